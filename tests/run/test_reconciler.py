"""Every claimed run ends with a final ledger status, also when its execution is stopped, times
out or fails outside any Catch (design §2.1): the reconciler, fed by the local execution-status
poller in the EventBridge event shape."""

from __future__ import annotations

import time

from runhelpers import CTX, Env, hold_cross_company_tasks

from quayutec.handlers import reconciler
from quayutec.logic.room_service import RoomService
from quayutec.models import Author


def _park_a_run(env: Env) -> str:
    """a1 replies with a cross-company task held for approval; its execution parks."""
    hold_cross_company_tasks(env.deps)
    env.server.set_script(
        "a1",
        [
            {
                "reply": {
                    "text": "Asking bolt.",
                    "actions": [
                        {"kind": "remember", "text": "Plan agreed.", "visibility": "room"},
                        {"kind": "create_task", "to": "b1", "title": "Check", "body": "Check it."},
                    ],
                }
            }
        ],
    )
    RoomService(env.deps.room).post_message("r1", Author(kind="person", id="ann", company="acme"), "@a1 plan it", [])
    env.stack.wait_quiet(30)
    running = env.stack.running_executions()
    assert len(running) == 1
    run = env.deps.ledger.get_run(running[0]["name"])
    assert run is not None and run.status == "waiting_approval"
    return running[0]["executionArn"]


def test_stopped_execution_gets_a_final_status_through_the_reconciler(env: Env) -> None:
    """StopExecution while CallModel's request is in flight: the execution is ABORTED outside any
    Catch; the reconciler gives the claimed run ``failed_before_reply``; the room gets its notices only."""
    env.server.set_script("a1", [{"reply": {"text": "Too late.", "actions": []}, "delay_s": 1.5}])
    RoomService(env.deps.room).post_message("r1", Author(kind="person", id="ann", company="acme"), "@a1 plan it", [])
    sfn = env.stack.client("stepfunctions")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and env.server.count("a1") == 0:
        time.sleep(0.02)
    assert env.server.count("a1") == 1
    [running] = env.stack.running_executions()
    sfn.stop_execution(executionArn=running["executionArn"], error="Operator", cause="stopped by hand")
    env.stack.wait_quiet(30)
    assert sfn.describe_execution(executionArn=running["executionArn"])["status"] == "ABORTED"
    run = env.deps.ledger.get_run(running["name"])
    assert run is not None and run.status == "failed_before_reply"
    assert "reply not posted" in run.not_done
    assert env.stack.stats.executions_reconciled == 1
    # no reply in the room; its notices (the room's, and acme's with the cause) say so
    assert [m.kind for m in env.deps.room.all_messages("r1")] == ["message", "notice", "notice"]
    assert [m.text.split(" (")[0] for m in env.deps.room.recent_messages("r1", 10, reader="bolt")[1:]] == [
        "acme.a1 could not answer"
    ]


def test_reconciler_timed_out_and_idempotent(env: Env) -> None:
    arn = _park_a_run(env)
    run_id = arn.rsplit(":", 1)[-1]
    with env.stack.paused():
        failed = {
            "detail-type": "Step Functions Execution Status Change",
            "source": "aws.states",
            "detail": {"executionArn": arn, "name": run_id, "status": "TIMED_OUT"},
        }
        event = failed
        assert reconciler.handler(event, CTX) == {"reconciled": "timed_out"}
        assert reconciler.handler(event, CTX) == {"reconciled": None}  # a final status is never overwritten
        other = {"detail": {"executionArn": arn + "-other", "name": run_id, "status": "FAILED"}}
        assert reconciler.handler(other, CTX) == {"reconciled": None}
        run = env.deps.ledger.get_run(run_id)
        assert run is not None and run.status == "timed_out"
        assert reconciler.handler({"detail": {"name": "no-such-run", "status": "ABORTED"}}, CTX) == {"reconciled": None}


def test_reconciler_after_reply(env: Env) -> None:
    """A parked run (reply posted) whose execution fails outside any Catch ends failed_after_reply;
    its held action is recorded as not reached."""
    arn = _park_a_run(env)
    run_id = arn.rsplit(":", 1)[-1]
    with env.stack.paused():
        event = {"detail": {"executionArn": arn, "name": run_id, "status": "ABORTED"}}
        assert reconciler.handler(event, CTX) == {"reconciled": "failed_after_reply"}
        actions = {a.kind: a.outcome for a in env.deps.ledger.actions(run_id)}
        assert actions["create_task"] == "not_reached"
        [approval] = env.deps.room.approvals("r1")
        assert approval.status == "expired"  # no one can approve an action of an ended run
        run = env.deps.ledger.get_run(run_id)
        assert run is not None and any("create_task" in n for n in run.not_done)
