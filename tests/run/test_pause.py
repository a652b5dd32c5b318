"""A person pauses their company's agent and resumes it (design §12.2): no run of a paused agent
starts, however its wake arrives; the claim checks the pause in its own transaction too, so a run
whose key read came before the pause is refused all the same. Real path on the local stack."""

from __future__ import annotations

import pytest
from runhelpers import Env

from quayutec.dal.keys import agent_key, chain_key
from quayutec.dal.ledger import ClaimOutcome
from quayutec.errors import NotFound
from quayutec.logic.room_service import RoomService
from quayutec.logic.stops import Stops
from quayutec.models import Author, RunRecord, Wake, now_iso

ANN = Author(kind="person", id="ann", company="acme")
BOB = Author(kind="person", id="bob", company="bolt")


def _stops(env: Env) -> Stops:
    return Stops(env.deps)


def _a1_run(run_id: str, wake: Wake) -> RunRecord:
    """The ledger record a claim of ``wake`` for acme's a1 in r1 would open."""
    now = now_iso()
    return RunRecord(
        run_id=run_id,
        agent_id="acme.a1",
        company="acme",
        room_id="r1",
        wake_id=wake.wake_id,
        wake=wake,
        hop=wake.hop,
        chain_id=wake.chain_id,
        execution_arn=f"arn:aws:states:us-east-1:123456789012:execution:sm:{run_id}",
        status="running",
        started_at=now,
        updated_at=now,
    )


def _notices(env: Env) -> list[str]:
    return [m.text for m in env.deps.room.all_messages("r1") if m.kind == "notice"]


def test_a_paused_agent_starts_no_run_until_it_is_resumed(env: Env) -> None:
    a1 = env.deps.room.get_agent("acme.a1")
    assert a1 is not None
    paused = _stops(env).pause(a1, ANN)
    assert paused.changed and paused.agent.paused_by == "ann" and paused.agent.paused_at
    again = _stops(env).pause(paused.agent, ANN)  # idempotent: the first pause stands, one notice
    assert not again.changed and again.agent.paused_at == paused.agent.paused_at
    assert _notices(env) == ["acme.a1 was paused by ann (acme): no run of it starts until it is resumed."]
    rooms = RoomService(env.deps.room)
    msg = rooms.post_message("r1", BOB, "@a1 @b1 anyone there?", [])
    env.stack.wait_quiet(30)
    assert env.server.count("a1") == 0 and env.server.count("b1") == 1, "the paused agent made no request"
    assert [r.agent_id for r in env.deps.ledger.runs_in_room("r1")] == ["bolt.b1"], "no ledger entry for a1"
    claim = env.deps.ledger.get_claim("acme.a1", f"msg:{msg.id}")
    assert claim is not None and claim["not_started"] == "paused", "the wake is claimed as not started, for good"
    resumed = _stops(env).resume(paused.agent, ANN)
    assert resumed.changed and resumed.agent.paused_at is None
    assert _notices(env)[-1] == "acme.a1 was resumed by ann (acme)."
    rooms.post_message("r1", BOB, "@a1 and now?", [])
    env.stack.wait_quiet(30)
    assert env.server.count("a1") == 1, "after resume, a new message wakes it again"


def test_the_claim_checks_the_pause_in_its_own_transaction(env: Env) -> None:
    """A run that read the agent before the pause and claims after it is refused: the claim's
    transaction holds a ConditionCheck on the agent item (its earlier read is not trusted)."""
    wake = Wake(
        agent_id="acme.a1",
        wake_id="msg:m-late",
        room_id="r1",
        hop=0,
        chain_id="m-late",
        by_kind="person",
        by_company="acme",
        cause_kind="message",
        cause_id="m-late",
    )
    record = _a1_run("run-late", wake)
    a1 = env.deps.room.get_agent("acme.a1")
    assert a1 is not None and a1.paused_at is None  # what the run's key read found
    _stops(env).pause(a1, ANN)
    guard = (env.deps.room.table, agent_key("acme.a1"))
    found = env.deps.ledger.claim(record, "t0", max_runs_per_chain=24, agent_item=guard)
    assert (found.outcome, found.not_started) == (ClaimOutcome.REFUSED, "paused")
    # the same execution's retried claim finds its refusal; nothing was counted or opened
    retried = env.deps.ledger.claim(record, "t0", max_runs_per_chain=24, agent_item=guard)
    assert (retried.outcome, retried.not_started) == (ClaimOutcome.REFUSED, "paused")
    assert env.deps.ledger.get_run("run-late") is None
    counter = env.deps.ledger.db.get_item(TableName=env.deps.ledger.table, Key=chain_key("r1", "m-late")).get("Item")
    assert counter is None, "a refused claim counts no run in its chain"


def test_a_stopped_chain_starts_no_further_run(env: Env) -> None:
    """Any person in the room stops a chain: its next wakes are claimed as not started; a new
    message starts a new chain as before."""
    env.server.set_script("a1", [{"reply": {"text": "@b1 your turn"}}])
    env.server.set_script("b1", [{"reply": {"text": "thanks"}}] * 2)
    rooms = RoomService(env.deps.room)
    msg = rooms.post_message("r1", ANN, "@a1 start", [])
    stops = Stops(env.deps)
    env.stack.wait_quiet(30)
    # a1 ran and woke b1, which ran: two runs of the chain; now bob stops it
    assert sorted(r.agent_id for r in env.deps.ledger.runs_in_room("r1")) == ["acme.a1", "bolt.b1"]
    assert stops.stop_chain("r1", msg.id, BOB) == (True, 0)
    assert stops.stop_chain("r1", msg.id, BOB) == (False, 0), "idempotent: one notice"
    stop_notices = [t for t in _notices(env) if "was stopped by bob (bolt)" in t]
    assert len(stop_notices) == 1
    # a wake of the stopped chain (as a run of it would send) is claimed as not started
    wake = Wake(
        agent_id="acme.a1",
        wake_id="run:x:reply:a1",
        room_id="r1",
        hop=2,
        chain_id=msg.id,
        by_kind="agent",
        by_company="bolt",
        cause_kind="message",
        cause_id=msg.id,
    )
    record = _a1_run("run-after-stop", wake)
    found = env.deps.ledger.claim(record, "t0", max_runs_per_chain=24)
    assert (found.outcome, found.not_started) == (ClaimOutcome.REFUSED, "chain_stopped")
    # an unknown chain is 404-shaped
    with pytest.raises(NotFound):
        stops.stop_chain("r1", "no-such-chain", BOB)
    # a new message starts a new chain and wakes as before
    rooms.post_message("r1", BOB, "@b1 again", [])
    env.stack.wait_quiet(30)
    assert env.server.count("b1") == 2


def test_an_agent_item_without_a_pause_count_counts_as_never_paused(env: Env) -> None:
    """The claim and the stop guard take a missing ``pauses`` for 0: an agent item written
    without it still wakes and its run completes."""
    d = env.deps
    d.room.db.update_item(TableName=d.room.table, Key=agent_key("acme.a1"), UpdateExpression="REMOVE pauses")
    env.server.set_script("a1", [{"reply": {"text": "here"}}])
    RoomService(d.room).post_message("r1", ANN, "@a1 hello", [])
    env.stack.wait_quiet(30)
    assert [r.status for r in d.ledger.runs_in_room("r1")] == ["completed"]
