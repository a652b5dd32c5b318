"""Chains of wakes are bounded in width, counted at the claim (design §12.1): a person's write starts a
chain, the wakes of the runs it causes carry it, and the chain starts at most the room's
``max_runs_per_chain`` runs (24 by default). Played on the local stack, the real path: stream,
queue, executions, the claim's transaction."""

from __future__ import annotations

from typing import Any

import pytest

from quaylocal.scenario import Player, PlayResult, Scenario, SStep, mutual_mentions
from quaylocal.stack import LocalStack
from quayutec.dal.keys import chain_key
from quayutec.deps import default_deps


def _room_of_three(*, steps: list[dict[str, Any]], max_runs: int | None = None, **agent_extra: Any) -> Scenario:
    """acme's ``a1``, globex's ``a2`` and ``a3``; every reply @mentions the other two."""
    scenario = mutual_mentions(3, max_runs_per_chain=max_runs)
    scenario.steps = [SStep.model_validate(s) for s in steps]
    for agent in scenario.agents:
        for key, value in agent_extra.get(agent.id, {}).items():
            setattr(agent, key, value)
    return scenario


def _chains(result: PlayResult) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for run in result.runs:
        out.setdefault(run["chain_id"], []).append(run)
    return out


def test_one_message_in_a_room_of_mutual_mentions_makes_at_most_24_runs_and_one_notice() -> None:
    seen: dict[str, Any] = {}

    def inspect(stack: LocalStack, result: PlayResult) -> None:
        d = default_deps()
        room_id = result.runs[0]["room_id"]
        seen["counters"] = {
            chain: d.ledger.db.get_item(TableName=d.ledger.table, Key=chain_key(room_id, chain))["Item"]["runs"]
            for chain in _chains(result)
        }

    steps = [{"post": {"as": "ann", "text": "@a1 start", "to": []}}, {"post": {"as": "gus", "text": "@a2 hello"}}]
    result = Player(_room_of_three(steps=steps), time_scale=0.01, quiet_timeout_s=120).play(inspect)
    chains = _chains(result)
    assert len(chains) == 2, "each person's message starts its own chain"
    first, second = (chains[c] for c in sorted(chains, key=lambda c: min(r["started_at"] for r in chains[c])))
    # The bound holds exactly, concurrent runs included: 24 runs and so 24 model requests, then no more.
    assert len(first) == 24 and all(r["status"] == "completed" for r in first)
    assert seen["counters"] == {first[0]["chain_id"]: 24, second[0]["chain_id"]: 24}
    assert sum(result.model_requests.values()) == 48
    # The next person's message still woke the agent it named, in a chain of its own.
    assert min(second, key=lambda r: r["started_at"])["agent_id"].split(".")[-1] == "a2" and len(second) == 24
    notices = [m for m in result.transcript if m["kind"] == "notice" and "chain of agent wakes" in m["text"]]
    assert len(notices) == 2, "one notice per chain"
    assert "stopped after 24 runs" in notices[0]["text"]
    # What a run wrote carries its chain.
    replies = [m for m in result.transcript if m["kind"] == "reply"]
    assert {m.get("chain_id") for m in replies} == set(chains)


def test_a_room_sets_its_own_bound() -> None:
    seen: dict[str, Any] = {}

    def inspect(stack: LocalStack, result: PlayResult) -> None:
        seen["refused"] = default_deps().ledger.not_started_in_room(result.runs[0]["room_id"])

    result = Player(
        _room_of_three(steps=[{"post": {"as": "ann", "text": "@a1 start"}}], max_runs=5), time_scale=0.01
    ).play(inspect)
    assert len(result.runs) == 5 and sum(result.model_requests.values()) == 5
    # the replies whose wakes the full chain refused say so (design §9): each refusal on its message
    noted = sorted((m["id"], n["agent"], n["why"]) for m in result.transcript for n in m.get("not_woken", []))
    refused = sorted((r.cause_id, r.agent_id, r.reason) for r in seen["refused"])
    assert noted and noted == refused and {why for _, _, why in noted} == {"chain_full"}


@pytest.mark.parametrize(
    ("wake_from", "woken"), [("own_company", {"a1"}), ("people", {"a1"}), ("anyone", {"a1", "a2"})]
)
def test_wake_from_decides_who_may_wake_an_agent(wake_from: str, woken: set[str]) -> None:
    """a2 (globex) is mentioned by acme's a1 only: with own_company or people, a1's mention posts
    but does not wake a2; a person of globex still wakes it."""
    scenario = _room_of_three(
        steps=[{"post": {"as": "ann", "text": "@a1 start"}}, {"post": {"as": "gus", "text": "@a2 and you?"}}],
        max_runs=3,
        a2={"wake_from": wake_from},
    )
    scenario.model_replies["a1"] = [{"reply": {"text": "@a2 your turn"}}]
    scenario.model_replies["a2"] = [{"reply": {"text": "done"}}] * 2
    result = Player(scenario, time_scale=0.01).play()
    first_chain = next(r for r in result.runs if r["hop"] == 0 and r["agent_id"].split(".")[-1] == "a1")["chain_id"]
    assert {r["agent_id"].split(".")[-1] for r in result.runs if r["chain_id"] == first_chain} == woken
    assert any(r["agent_id"].split(".")[-1] == "a2" and r["hop"] == 0 for r in result.runs), (
        "a person of globex wakes a2"
    )
