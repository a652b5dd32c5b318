"""A pause or a chain's stop reaches the runs already running (design §12.2): the stop intent (the
agent's pause, the chain's stop flag) is written first, every model request, reply and action
write of a run carries a stop guard on it, and runs parked on approvals are ended through
SendTaskFailure(RunStopped). A stopped run ends ``stopped``, writes nothing after the request
was answered, and is never run again. Real path on the local stack: stream, queue, executions."""

from __future__ import annotations

from runhelpers import Env, hold_cross_company_tasks, until

from quayutec.logic.room_service import RoomService
from quayutec.logic.stops import Stops
from quayutec.models import Author, RunRecord

ANN = Author(kind="person", id="ann", company="acme")
BOB = Author(kind="person", id="bob", company="bolt")


def _stops(env: Env) -> Stops:
    return Stops(env.deps)


def _runs_of(env: Env, agent_id: str) -> list[RunRecord]:
    return [r for r in env.deps.ledger.runs_in_room("r1") if r.agent_id == agent_id]


def _texts_by(env: Env, agent_id: str) -> list[str]:
    return [m.text for m in env.deps.room.all_messages("r1") if m.author.id == agent_id]


def test_a_pause_stops_the_agents_run_waiting_on_its_model_and_it_writes_nothing(env: Env) -> None:
    """a1's model answers slowly; ann pauses a1 while the request is in flight: the reply (which
    would wake b1) is not posted, the run ends stopped, b1 is not woken; after resume a new
    message wakes a1 again and that run completes."""
    env.server.set_script(
        "a1",
        [{"reply": {"text": "@b1 over to you"}, "delay_s": 1.5}, {"reply": {"text": "back again"}}],
    )
    env.server.set_script("b1", [{"reply": {"text": "hello"}}])
    rooms = RoomService(env.deps.room)
    rooms.post_message("r1", ANN, "@a1 start", [])
    until(lambda: env.server.count("a1") == 1)  # the request is at the model
    a1 = env.deps.room.get_agent("acme.a1")
    assert a1 is not None
    paused = _stops(env).pause(a1, ANN)
    assert paused.changed
    env.stack.wait_quiet(30)
    [run] = _runs_of(env, "acme.a1")
    assert run.status == "stopped" and run.reply_message_id is None
    assert run.active_agent is None and run.active_chain is None, "out of the active-runs indexes"
    assert _texts_by(env, "acme.a1") == [], "nothing of the run landed after the pause"
    assert env.server.count("b1") == 0 and _runs_of(env, "bolt.b1") == []
    assert env.deps.ledger.active_runs(agent_id="acme.a1") == []
    _stops(env).resume(paused.agent, ANN)
    rooms.post_message("r1", ANN, "@a1 once more", [])
    env.stack.wait_quiet(30)
    runs = sorted(_runs_of(env, "acme.a1"), key=lambda r: r.started_at)
    assert [r.status for r in runs] == ["stopped", "completed"]
    assert _texts_by(env, "acme.a1") == ["back again"]


def test_a_run_claimed_before_a_pause_stays_stopped_after_a_quick_resume(env: Env) -> None:
    """Pause and resume while a run's request is in flight: the run still writes nothing (its
    guard holds the pause count its claim saw), so resuming never lets an old run through."""
    env.server.set_script("a1", [{"reply": {"text": "late words"}, "delay_s": 1.5}])
    RoomService(env.deps.room).post_message("r1", ANN, "@a1 start", [])
    until(lambda: env.server.count("a1") == 1)
    a1 = env.deps.room.get_agent("acme.a1")
    assert a1 is not None
    paused = _stops(env).pause(a1, ANN).agent
    resumed = _stops(env).resume(paused, ANN).agent
    assert resumed.paused_at is None and resumed.pauses == 1
    env.stack.wait_quiet(30)
    [run] = _runs_of(env, "acme.a1")
    assert run.status == "stopped" and _texts_by(env, "acme.a1") == []


def test_a_pause_ends_the_agents_run_parked_on_an_approval(env: Env) -> None:
    """a1's reply holds a cross-company task for approval and parks; ann pauses a1: the approval
    is stopped through SendTaskFailure(RunStopped), the run ends stopped with its reply posted
    (the ledger says so), and the held task is never written, not even when approved later."""
    hold_cross_company_tasks(env.deps)
    env.server.set_script(
        "a1",
        [
            {
                "reply": {
                    "text": "Asking bolt.",
                    "actions": [{"kind": "create_task", "to": "b1", "title": "Check", "body": "Check it."}],
                }
            }
        ],
    )
    RoomService(env.deps.room).post_message("r1", ANN, "@a1 start", [])
    until(lambda: any(r.status == "waiting_approval" for r in _runs_of(env, "acme.a1")))
    a1 = env.deps.room.get_agent("acme.a1")
    assert a1 is not None
    paused = _stops(env).pause(a1, ANN)
    assert paused.stopping == 1, "one parked run was ended"
    env.stack.wait_quiet(30)
    [run] = _runs_of(env, "acme.a1")
    assert run.status == "stopped" and run.reply_message_id, "the reply was posted before the pause"
    [approval] = env.deps.room.approvals("r1")
    assert approval.status == "stopped" and approval.decided_by == "ann"
    assert env.deps.room.all_tasks("r1") == [], "the held task is not written"
    [action] = env.deps.ledger.actions(run.run_id)
    assert action.outcome != "written"
    # a second pause request reaches nothing more (the run has ended)
    assert _stops(env).pause(paused.agent, ANN).stopping == 0


def test_stopping_a_chain_stops_its_runs_in_flight_and_leaves_other_chains(env: Env) -> None:
    """bob stops the chain while a1's run of it waits on the model: the run ends stopped, its reply
    is not posted; a message of another chain still wakes a1 and completes."""
    env.server.set_script(
        "a1", [{"reply": {"text": "@b1 chain reply"}, "delay_s": 1.5}, {"reply": {"text": "other chain"}}]
    )
    rooms = RoomService(env.deps.room)
    msg = rooms.post_message("r1", ANN, "@a1 start", [])
    until(lambda: env.server.count("a1") == 1)
    assert [r.run_id for r in env.deps.ledger.active_runs(room_id="r1", chain_id=msg.id)], "listed while active"
    stopped, stopping = _stops(env).stop_chain("r1", msg.id, BOB)
    assert stopped and stopping == 0  # running, not parked: its guard stops it
    env.stack.wait_quiet(30)
    [run] = _runs_of(env, "acme.a1")
    assert run.status == "stopped" and run.reply_message_id is None and run.chain_id == msg.id
    assert _texts_by(env, "acme.a1") == [] and env.server.count("b1") == 0
    rooms.post_message("r1", ANN, "@a1 something else", [])
    env.stack.wait_quiet(30)
    assert sorted(r.status for r in _runs_of(env, "acme.a1")) == ["completed", "stopped"]
    assert _texts_by(env, "acme.a1") == ["other chain"]
