"""The provider answers of issue 3, played end to end (``tests/scenarios/provider-inputs.yaml``):
the real SDKs / boto3 talk HTTP to the local provider server, the run path records every request
in the ledger before sending it, and Step Functions does the waiting. Each test reads the ledger
rows of one agent's run (``result.runs[i]["requests"]``) and, where it matters, the Wait states
in the execution history (design §2.3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from quaycli.render import request_line
from quaylocal.scenario import Player, PlayResult, Scenario
from quaylocal.stack import LocalStack
from quaylocal.transcript import render

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "provider-inputs.yaml"


@pytest.fixture(scope="module")
def played() -> tuple[PlayResult, dict[str, list[dict[str, Any]]]]:
    """The scenario played once; plus, per execution (= run id), its Wait states' inputs."""
    import anthropic  # noqa: F401 - imported once here, not by eleven runs at once
    import openai  # noqa: F401

    waits: dict[str, list[dict[str, Any]]] = {}

    def inspect(stack: LocalStack, result: PlayResult) -> None:
        sfn = stack.client("stepfunctions")
        prefix = stack.state_machine_arn.replace(":stateMachine:", ":execution:")
        for run in result.runs:
            events = sfn.get_execution_history(executionArn=f"{prefix}:{run['run_id']}", maxResults=1000)["events"]
            waits[run["run_id"]] = [
                json.loads(e["stateEnteredEventDetails"]["input"]) for e in events if e["type"] == "WaitStateEntered"
            ]

    result = Player(Scenario.load(SCENARIO), time_scale=0.01, quiet_timeout_s=60).play(inspect)
    assert result.failures == [], result.failures
    return result, waits


def run_of(result: PlayResult, agent: str) -> dict[str, Any]:
    runs = [r for r in result.runs if r["agent_id"].split(".")[-1] == agent]  # {company}.{name}
    assert len(runs) == 1, f"{agent}: {len(runs)} runs"
    return runs[0]


def scripted_body(agent: str, n: int = 0) -> Any:
    return Scenario.load(SCENARIO).model_replies[agent][n]["error"]["body"]


def rows(run: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (q["status"], q.get("category"), q.get("retryable"), q.get("wait_s"), q.get("decision"))
        for q in run["requests"]
    ]


def assert_final_after_one(result: PlayResult, agent: str, status: int, category: str) -> dict[str, Any]:
    run = run_of(result, agent)
    assert run["status"] == "failed_before_reply" and run["reply_message_id"] is None
    assert rows(run) == [(status, category, False, None, f"final: {category}")]
    assert result.model_requests[agent] == 1  # what the provider server saw agrees with the ledger
    q = run["requests"][0]
    assert q["outcome"] == "error" and q["request_id"].startswith("req_")
    assert json.loads(q["body"]) == scripted_body(agent)  # the provider's original body, kept
    assert run["error_class"] == "ModelCallFailed" and f"final: {category}" in run["error_message"]
    return q


def test_openai_429_insufficient_quota_is_final_after_one_request(played: Any) -> None:
    q = assert_final_after_one(played[0], "openai-quota", 429, "quota")
    assert (q["error_type"], q["error_code"]) == ("insufficient_quota", "insufficient_quota")


def test_openai_429_credit_balance_exhausted_is_a_final_spending_limit(played: Any) -> None:
    q = assert_final_after_one(played[0], "openai-credit", 429, "spend_limit")
    assert q["error_code"] == "credit_balance_exhausted"


def test_openai_429_request_too_large_is_final_even_with_a_retry_after(played: Any) -> None:
    q = assert_final_after_one(played[0], "openai-too-large", 429, "request_too_large")
    assert q["error_code"] == "rate_limit_exceeded" and "tokens per min" in q["message"]


def test_anthropic_400_credit_balance_too_low_is_a_final_spending_limit(played: Any) -> None:
    q = assert_final_after_one(played[0], "claude-credit", 400, "spend_limit")
    assert q["error_type"] == "invalid_request_error" and "credit balance is too low" in q["message"]


def test_anthropic_529_without_retry_after_waits_2_then_8_then_stops_at_3(played: Any) -> None:
    result, waits = played
    run = run_of(result, "claude-overloaded")
    assert rows(run) == [
        (529, "overloaded", True, 2, "default wait 2 s before request 2"),
        (529, "overloaded", True, 8, "default wait 8 s before request 3"),
        (529, "overloaded", True, None, "overloaded: request 3 of 3 was the last"),
    ]
    assert result.model_requests["claude-overloaded"] == 3
    assert run["status"] == "failed_before_reply"
    # the pauses are Step Functions Wait states, driven by the wait CallModel returned
    assert [w["model"]["wait_seconds"] for w in waits[run["run_id"]]] == [2, 8]
    assert all(q["error_type"] == "overloaded_error" for q in run["requests"])


def test_anthropic_429_retry_after_171_is_not_waited_for_and_the_ledger_says_why(played: Any) -> None:
    result, waits = played
    run = run_of(result, "claude-retry-after-171")
    assert rows(run) == [(429, "rate_limit", True, None, "retry-after: 171 -> 171 s > 20 s: not waited for")]
    assert result.model_requests["claude-retry-after-171"] == 1
    assert run["status"] == "failed_before_reply" and "171 s > 20 s" in run["error_message"]
    assert waits[run["run_id"]] == []


def test_anthropic_429_retry_after_1_5_is_a_wait_state_of_2_seconds(played: Any) -> None:
    result, waits = played
    run = run_of(result, "claude-retry-after-1-5")
    assert rows(run) == [
        (429, "rate_limit", True, 2, "retry-after: 1.5 -> wait 2 s before request 2"),
        (200, None, None, None, None),
    ]
    assert run["status"] == "completed" and run["reply_message_id"]
    [wait] = waits[run["run_id"]]
    assert wait["model"] == {"outcome": "wait", "wait_seconds": 2, "requests": 1}


def test_retry_after_ms_wins_over_retry_after(played: Any) -> None:
    result, waits = played
    run = run_of(result, "openai-retry-after-ms")
    # retry-after 60 alone would not be waited for (> 20 s); retry-after-ms 1200 -> 2 s
    assert rows(run)[0] == (429, "rate_limit", True, 2, "retry-after-ms: 1200 -> wait 2 s before request 2")
    assert run["status"] == "completed"
    assert [w["model"]["wait_seconds"] for w in waits[run["run_id"]]] == [2]


@pytest.mark.parametrize("agent", ["claude-html-502", "bedrock-html-502"])
def test_a_502_html_page_is_retryable_and_kept_as_sent(played: Any, agent: str) -> None:
    result, _ = played
    run = run_of(result, agent)
    assert rows(run) == [
        (502, "server_error", True, 2, "default wait 2 s before request 2"),
        (200, None, None, None, None),
    ]
    assert run["status"] == "completed"
    q = run["requests"][0]
    assert q["body"] == scripted_body(agent)  # the HTML, not a parse error
    assert q["error_type"] is None and "Bad Gateway" in q["message"]
    assert q["request_id"]


def test_openai_compatible_503_is_retryable_but_gets_one_request(played: Any) -> None:
    result, waits = played
    run = run_of(result, "owner-503")
    assert rows(run) == [(503, "server_error", True, None, "owner base URL: one request")]
    assert result.model_requests["owner-503"] == 1
    assert run["status"] == "failed_before_reply" and waits[run["run_id"]] == []


def test_every_request_the_server_saw_is_in_the_ledger(played: Any) -> None:
    result, _ = played
    for agent, seen in result.model_requests.items():
        run = run_of(result, agent)
        assert [q["n"] for q in run["requests"]] == list(range(1, seen + 1)), agent
        assert all(q["outcome"] in ("ok", "error") and q["finished_at"] for q in run["requests"]), agent


def test_the_ledger_view_shows_each_request_on_one_line(played: Any) -> None:
    result, _ = played
    text = render(result)
    run = run_of(result, "claude-retry-after-1-5")
    first, second = run["requests"]
    line = request_line(first)
    lines = text.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith(f"- run {run['run_id']}: completed"))
    assert lines[at + 1 : at + 3] == ["    " + line, "    " + request_line(second)]
    for part in (
        first["sent_at"][11:19],
        "HTTP 429",
        f"id {first['request_id']}",
        "rate_limit_error",
        "rate_limit, retryable",
        "wait 2 s",
        "why: retry-after: 1.5 -> wait 2 s before request 2",
    ):
        assert part in line, part
    assert request_line(second).endswith(f"HTTP 200  id {second['request_id']}  → reply")
    owner = run_of(result, "owner-503")["requests"][0]
    assert "server_error/503  → server_error, retryable, no wait  why: owner base URL: one request" in request_line(
        owner
    )


def test_an_overloaded_error_inside_a_200_is_retried_and_the_reply_posted(played: Any) -> None:
    """Issue 10 finding 9: classified by its error type, like a 529 (it was `unexpected`, final)."""
    result, _ = played
    run = run_of(result, "claude-200-overloaded")
    assert rows(run) == [
        (200, "overloaded", True, 2, "default wait 2 s before request 2"),
        (200, None, None, None, None),
    ]
    assert run["status"] == "completed" and run["reply_message_id"]
    assert run["requests"][0]["error_type"] == "overloaded_error"


def test_an_openai_limit_per_day_is_a_used_up_quota_final_after_one_request(played: Any) -> None:
    """Issue 10 finding 9: a 429 "tokens per day (TPD)" was retried three times."""
    q = assert_final_after_one(played[0], "openai-tpd", 429, "quota")
    assert "tokens per day (TPD)" in q["message"]
