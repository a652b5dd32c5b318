"""Every shipped scenario plays end to end on the local stack and meets its ``expect`` (design §7,
scenarios README). Step Functions time is scaled; everything else is the real path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quaylocal.scenario import Player, PlayResult, Scenario
from quaylocal.stack import LocalStack

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "scenarios"
SCENARIOS = (
    sorted((ROOT / "infra" / "quaylocal" / "scenarios").glob("*.yaml"))
    + sorted((ROOT / "tests" / "scenarios").glob("*.yaml"))
    + (sorted(SHARED.glob("*.yaml")) if SHARED.is_dir() else [])
)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_scenario_plays_and_meets_expect(path: Path) -> None:
    result = Player(Scenario.load(path), time_scale=0.01, quiet_timeout_s=60).play()
    assert result.failures == [], result.failures
    assert result.expect_ok


def _history_types(stack: LocalStack) -> dict[str, list[str]]:
    sfn = stack.client("stepfunctions")
    out = {}
    for status in ("SUCCEEDED", "FAILED"):
        for ex in sfn.list_executions(stateMachineArn=stack.state_machine_arn, statusFilter=status)["executions"]:
            events = sfn.get_execution_history(executionArn=ex["executionArn"], maxResults=1000)["events"]
            out[ex["name"]] = [e["type"] for e in events]
    return out


def test_reference_room_story() -> None:
    """The reference room shows every feature of design §2–§4 the launch room shows."""
    seen: dict[str, object] = {}

    def inspect(stack: LocalStack, result: PlayResult) -> None:
        seen["histories"] = _history_types(stack)
        seen["sizes"] = []
        sfn = stack.client("stepfunctions")
        for name in seen["histories"]:  # type: ignore[union-attr]
            arn = f"{stack.state_machine_arn.replace(':stateMachine:', ':execution:')}:{name}"
            for e in sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]:
                for key, value in e.items():
                    if key.endswith("EventDetails") and isinstance(value, dict):
                        for field in ("input", "output"):
                            if field in value:
                                seen["sizes"].append(len(value[field]))  # type: ignore[union-attr]

    result = Player(Scenario.load(ROOT / "infra/quaylocal/scenarios/reference-room.yaml"), time_scale=0.01).play(
        inspect
    )
    assert result.failures == []
    # set up as the API sets up a room: each agent's id is {company}.{name}
    assert all(r["agent_id"] == f"{r['company']}.{r['agent_id'].rsplit('.', 1)[-1]}" for r in result.runs)
    runs = {r["agent_id"].split(".")[-1] + ":" + r["status"]: r for r in result.runs}
    # the coordinator's first call: 429 with retry-after 1 → a 1 s Wait → the reply
    first = result.runs[0]
    assert [q["status"] for q in first["requests"]] == [429, 200]
    assert first["requests"][0]["wait_s"] == 1 and "retry-after" in first["requests"][0]["decision"]
    # the printer: 503 → default 2 s → reply; its create_task denied by policy
    printer = runs["lumen-printer:completed"]
    assert [q["status"] for q in printer["requests"]] == [503, 200]
    assert printer["requests"][0]["wait_s"] == 2
    assert [(a["kind"], a["decision"], a["outcome"]) for a in printer["actions"]] == [
        ("update_task", "allow", "written"),
        ("close_task", "allow", "written"),
        ("create_task", "deny", "denied"),
    ]
    # the cross-company task: held, approved, written
    held = next(a for a in first["actions"] if a["kind"] == "create_task")
    assert (held["decision"], held["approval"], held["outcome"]) == ("ask", "approved", "written")
    assert result.approvals[0]["status"] == "approved" and result.approvals[0]["decided_by"] == "ines"
    # the duplicate wake: refused by Step Functions, not run twice
    assert any("delivered again" in e and "not run twice" in e for e in result.events)
    # the final 401 ends a run before its reply
    failed = runs["tw-coordinator:failed_before_reply"]
    assert failed["requests"][-1]["status"] == 401 and failed["reply_message_id"] is None
    # the retry pauses are Wait states in the execution history, not sleeps in a Lambda
    histories = seen["histories"]
    assert sum(types.count("WaitStateEntered") for types in histories.values()) == 2  # type: ignore[union-attr]
    # nothing in the Step Functions payloads beyond ids: every input/output is small
    assert max(seen["sizes"]) < 32 * 1024  # type: ignore[arg-type]
    # the company-only memory line never reached the other company's model
    assert not any("budget ceiling" in t for t in result.request_texts["lumen-printer"])
    assert any("budget ceiling" in t for t in result.request_texts["tw-coordinator"])
    assert json.loads(json.dumps(result.summary()))["expect_ok"] is True


def test_a_scenario_sets_budgets_and_context_budgets() -> None:
    """``companies[].budget`` and ``agents[].max_context_tokens`` (docs/scenarios.md): the agent
    over its budget sends nothing and its run says why; the agent with a 8,000-token context
    leaves the oldest long messages out and the ledger says how many."""
    sc = Scenario.load(ROOT / "tests" / "scenarios" / "budget-and-context.yaml")
    result = Player(sc, time_scale=0.01, quiet_timeout_s=60).play()
    assert result.failures == [], result.failures
    runs = {r["agent_id"].split(".")[-1]: r for r in result.runs}
    blocked = runs["blocked"]
    assert blocked["status"] == "failed_before_reply"
    assert blocked["error_message"] == "budget reached: acme.blocked's daily budget of 1 token", blocked
    ctx = runs["scout"]["context"]
    assert ctx["max_context_tokens"] == 8000 and ctx["prompt_tokens"] <= ctx["budget"] < 8000, ctx
    assert ctx["left_out"]["messages"] > 0, ctx
    scout_prompt = result.request_texts["scout"][0]
    assert "[long 7]" in scout_prompt and "[long 0]" not in scout_prompt
    assert "where do we stand?" in result.request_texts["pilot"][0]
