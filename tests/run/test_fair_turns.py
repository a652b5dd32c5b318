"""Fair turns (design §12.3): at most ``max_concurrent_runs`` runs of one company are active at
once; the others wait in their company's line, in arrival order, holding no Lambda; another
company's runs do not wait behind them; a turn whose release was lost expires; a hand-off to a
token whose execution is gone goes on to the next run. Played on the local stack: the real
ASL (its WaitForTurn ``.waitForTaskToken`` state), the real handlers, the local provider server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from runhelpers import TIME_SCALE, Env, make_room

from quaylocal.provider_server import ProviderServer
from quaylocal.scenario import Player, PlayResult, two_company_backlog
from quaylocal.stack import LocalStack
from quayutec.dal import keys
from quayutec.logic.access import OPERATOR
from quayutec.logic.room_service import RoomService
from quayutec.logic.services import Services
from quayutec.models import Author, parse_iso


def _most_at_once(runs: list[dict[str, Any]]) -> int:
    """The most runs active at one instant, from their ``started_at`` and ``ended_at``."""
    edges = sorted(
        [(parse_iso(r["started_at"]), 1) for r in runs] + [(parse_iso(r["ended_at"]), -1) for r in runs],
        key=lambda e: (e[0], e[1]),  # an end before a start at the same instant
    )
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_one_company_backlog_takes_turns_and_the_other_company_goes_first() -> None:
    """xco may run 2 at once: one message wakes 12 of its agents and one of yco's, each reply 2 s
    late (1 s is the bar; 2 s keeps a loaded machine's slower starts from deciding the order).
    Never more than 2 of xco's runs are active at once; yco's reply is among the first three;
    every run completes once, and a run's wait is not its run time."""
    seen: dict[str, Any] = {}

    def inspect(stack: LocalStack, result: PlayResult) -> None:
        from quayutec.deps import default_deps

        d = default_deps()
        seen["xco"] = (d.turns.counter("xco"), d.turns.holds("xco"), d.turns.line("xco", 10))
        seen["yco"] = (d.turns.counter("yco"), d.turns.holds("yco"))

    result = Player(two_company_backlog(12, cap=2, delay_s=2.0), time_scale=TIME_SCALE, quiet_timeout_s=120).play(
        inspect
    )
    assert result.expect_ok, result.failures
    x_runs = [r for r in result.runs if r["company"] == "xco"]
    y_runs = [r for r in result.runs if r["company"] == "yco"]
    assert len(x_runs) == 12 and len(y_runs) == 1
    assert all(r["status"] == "completed" for r in result.runs)
    assert _most_at_once(x_runs) == 2, "xco's cap holds, and is used"
    replies = sorted((m for m in result.transcript if m["kind"] == "reply"), key=lambda m: m["created_at"])
    assert len(replies) == 13
    assert "yco." in replies[0]["author"]["id"] or any("yco." in m["author"]["id"] for m in replies[:3])
    # Waiting is not run time: each run's own time is about its 2 s reply, however long it waited.
    waited = sorted(r["waited_s"] for r in x_runs)
    assert waited[-1] >= 8.0, "the last of xco's runs waited for five turns before it"
    own = [(parse_iso(r["ended_at"]) - parse_iso(r["started_at"])).total_seconds() for r in x_runs]
    print("run times", sorted(own), "waited", waited)
    assert max(own) < waited[-1], "a run's time does not hold its wait"
    assert all("waiting_since" not in r or r["waiting_since"] is None for r in result.runs)
    # Nothing held or waiting afterwards; the counters agree with the items.
    counter, holds, line = seen["xco"]
    assert (counter.get("active"), counter.get("waiting"), counter.get("cap")) == (0, 0, 2)
    assert holds == [] and line == []
    assert seen["yco"][0].get("active") == 0 and seen["yco"][1] == []


@pytest.fixture
def env_fast_recheck() -> Iterator[Env]:
    """The run fixture, with waiting runs looking again every second."""
    server = ProviderServer(scripts={}, keys={})
    server.start()
    settings = {
        "ANTHROPIC_BASE_URL": server.base_url("anthropic"),
        "OPENAI_BASE_URL": server.base_url("openai"),
        "BEDROCK_ENDPOINT_URL": server.base_url("bedrock"),
        "TURN_RECHECK_SECONDS": "1",
    }
    try:
        with LocalStack(settings=settings, time_scale=TIME_SCALE) as stack:
            keys_ = make_room(stack, server)
            yield Env(stack=stack, server=server, keys=keys_)
    finally:
        server.stop()


def _post(env: Env, text: str) -> None:
    RoomService(env.deps.room).post_message("r1", Author(kind="person", id="ann", company="acme"), text, [])


def _acme_runs(env: Env) -> list[Any]:
    return sorted((r for r in env.deps.ledger.runs_in_room("r1") if r.company == "acme"), key=lambda r: r.started_at)


def test_a_turn_whose_release_was_lost_expires_and_is_taken_over(env_fast_recheck: Env) -> None:
    """acme may run 1 at once, and a run that died holding it left no release (its lease ends in
    2 s). A new run waits, looks again every second, and takes the turn over once it expired."""
    env = env_fast_recheck
    Services(env.deps).companies.set_max_concurrent_runs(OPERATOR, "acme", 1)
    now = int(time.time())
    assert env.deps.turns.acquire("acme", "dead-run", "arn:dead", now, 2) == "taken"
    env.server.set_script("a1", [{"reply": {"text": "Done.", "actions": []}}])
    _post(env, "@a1 go")
    env.stack.wait_quiet(60)
    [run] = _acme_runs(env)
    assert run.status == "completed"
    assert run.waited_s >= 1.0, "it waited for the lease to end"
    assert parse_iso(run.started_at).timestamp() >= now + 2 - 0.5
    assert env.deps.turns.holds("acme") == [] and env.deps.turns.line("acme", 5) == []
    counter = env.deps.turns.counter("acme")
    assert (counter["active"], counter["waiting"]) == (0, 0)


def test_a_hand_off_to_a_dead_token_goes_on_to_the_next_run(env: Env) -> None:
    """acme may run 1 at once. Ahead in its line waits a run whose execution is gone (its token is
    dead; its release was lost too). The run that ends hands the turn to it, Step Functions refuses
    the token, and the turn goes on to the next run, which completes; nothing is left held."""
    d = env.deps
    Services(d).companies.set_max_concurrent_runs(OPERATOR, "acme", 1)
    env.server.set_script(
        "a1",
        [{"reply": {"text": "First.", "actions": []}, "delay_s": 1.0}, {"reply": {"text": "Second.", "actions": []}}],
    )
    _post(env, "@a1 first")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not d.turns.holds("acme"):
        time.sleep(0.02)
    # A run that died in line: its place, counted, with a token Step Functions never issued.
    ghost = keys.wait_key("acme", "2000-01-01T00:00:00.000000Z", "ghost-run")
    d.turns.db.transact_write_items(
        TransactItems=[
            {
                "Put": {
                    "TableName": d.turns.table,
                    "Item": {**ghost, "run_id": "ghost-run", "token": "dead-token", "execution_arn": "arn:ghost"},
                }
            },
            {
                "Update": {
                    "TableName": d.turns.table,
                    "Key": keys.turns_key("acme"),
                    "UpdateExpression": "ADD waiting :one",
                    "ExpressionAttributeValues": {":one": 1},
                }
            },
        ]
    )
    _post(env, "@a1 second")
    env.stack.wait_quiet(60)
    first, second = _acme_runs(env)
    assert first.status == "completed" and second.status == "completed"
    assert second.waited_s > 0 and parse_iso(second.started_at) >= parse_iso(first.ended_at or "")
    assert d.turns.holds("acme") == [] and d.turns.line("acme", 5) == []
    counter = d.turns.counter("acme")
    assert (counter["active"], counter["waiting"]) == (0, 0)


def test_the_bench_backlog_is_not_cut_by_the_chains_run_cap() -> None:
    """``make bench`` wakes 53 agents with one message: the room's run cap per chain (24 by
    default) would stop the chain before yco's agent, mentioned last, ever ran (the bench then
    printed no wake-to-start figure)."""
    scenario = two_company_backlog(52)
    assert scenario.room.max_runs_per_chain == 53
    assert two_company_backlog(12).room.max_runs_per_chain == 24


def test_a_run_that_ends_while_still_in_its_own_line_leaves_it_and_hands_on(env: Env) -> None:
    """A retried join after the turn was handed to the run can put it back in line while it holds
    its turn (the chaos matrix met it: a crash right after the join's transaction). When that run
    ends, its own entry is not a run to hand the turn to (the hand-off would drop and put the same
    HOLD in one transaction, which DynamoDB refuses): it leaves the line and the turn goes to the
    next run (here a dead token's, so it is given back); nothing is left held or in line."""
    from quayutec.logic import turns

    Services(env.deps).companies.set_max_concurrent_runs(OPERATOR, "acme", 1)
    t = env.deps.turns
    for run_id in ("run-a", "run-w"):  # joining the line marks the run's ledger entry waiting
        t.db.put_item(TableName=t.table, Item={**keys.run_key(run_id), "run_id": run_id})
    assert t.acquire("acme", "run-a", "arn:a", int(time.time()), 60) == "taken"
    assert t.enqueue("acme", "run-a", "2026-01-01T00:00:00.000000Z", "token-a", "arn:a")  # ahead of the other
    assert t.enqueue("acme", "run-w", "2026-01-01T00:00:01.000000Z", "token-w", "arn:w")
    turns.end(env.deps, "acme", "run-a")
    assert t.line("acme", 5) == [] and t.holds("acme") == []
    counter = t.counter("acme")
    assert (counter["active"], counter["waiting"]) == (0, 0)
