"""Each alarm proven on the local stack (docs/design.md §13): the situation it is for moves the
metric it watches to its threshold; the normal paths (a demo-like exchange, a customer's bad key,
a budget reached, a duplicate wake delivery) leave every alarm metric at 0 and count only the
information metrics. The metrics are counted by the local stack (quaylocal.metrics: moto has no
Lambda metrics, and Powertools metrics are off locally)."""

from __future__ import annotations

import json
import time

import pytest
from runhelpers import Env

from quayinfra.alarms import ALARMS, ALARMS_BY_NAME, ITERATOR_AGE_MS
from quaylocal import metrics as local_metrics
from quayutec import resources as R
from quayutec.logic.room_service import RoomService
from quayutec.models import Author, CompanyBudget, RunRecord

ANN = Author(kind="person", id="ann", company="acme")
BOB = Author(kind="person", id="bob", company="bolt")


def _runs(env: Env) -> list[RunRecord]:
    return sorted(env.deps.ledger.runs_in_room("r1"), key=lambda r: r.started_at)


def _post(env: Env, author: Author, text: str) -> None:
    RoomService(env.deps.room).post_message("r1", author, text, [])
    env.stack.wait_quiet(30)


def _fires(env: Env, name: str) -> bool:
    return env.stack.alarm_metrics()[name] >= ALARMS_BY_NAME[name].threshold


def test_normal_paths_leave_every_alarm_metric_at_zero(env: Env) -> None:
    """A reply, a reply to it, a customer's rejected key (401), a budget reached, a duplicate
    wake delivery: every alarm's metric stays at 0 (IteratorAge below its threshold); the
    information metrics count what happened."""
    env.server.set_script("a1", [{"reply": {"text": "noted @b1"}}])
    env.server.set_script("b1", [{"reply": {"text": "thanks"}}])
    _post(env, ANN, "@a1 plan the festival")
    assert [r.status for r in _runs(env)] == ["completed", "completed"]
    # a bad key: the provider answers 401, final; the run ends failed_before_reply
    env.server.keys["b1"] = "sk-not-this-one"
    _post(env, BOB, "@b1 are you there?")
    # a budget reached: acme's agent may not send its request
    env.deps.room.put_budget("acme", CompanyBudget(daily_tokens=1))
    _post(env, ANN, "@a1 one more")
    # the same wake delivered again (SQS at-least-once)
    body = env.stack.last_wake_body
    assert body is not None
    env.stack.client("sqs").send_message(QueueUrl=env.stack.queue_urls[R.WAKE_QUEUE.logical_id], MessageBody=body)
    env.stack.wait_quiet(30)
    statuses = [r.status for r in _runs(env)]
    assert statuses.count("failed_before_reply") == 2, statuses
    seen = env.stack.alarm_metrics()
    assert seen.pop("StreamIteratorAge") < ITERATOR_AGE_MS
    assert seen == dict.fromkeys(seen, 0.0)
    app = local_metrics.RECORDER.app
    assert app["RunFailed_customer"] == 1 and app["RunFailed_budget"] == 1, app
    assert app["BudgetRefused"] == 1 and app["DuplicateWakeDelivery"] >= 1, app
    assert app["Run_failed_before_reply"] == 2 and app["RunCompleted"] == 2, app


def test_a_run_that_fails_by_our_fault_fires_runs_failed_by_fault(env: Env) -> None:
    """A wake of an agent that is not registered: the claim lands, the phase raises
    RunStateInvalid, RecordFailure ends the run failed_before_reply: our fault, the alarm's."""
    env.server.set_script("a1", [{"reply": {"text": "noted"}}])
    _post(env, ANN, "@a1 hello")
    body = json.loads(env.stack.last_wake_body or "{}")
    ghost = {**body, "agent_id": "acme.ghost", "wake_id": "w-ghost"}
    env.stack.client("stepfunctions").start_execution(
        stateMachineArn=env.stack.state_machine_arn, name="ghost-run", input=json.dumps({"wake": ghost})
    )
    env.stack.wait_quiet(30)
    (run,) = [r for r in _runs(env) if r.agent_id == "acme.ghost"]
    assert run.status == "failed_before_reply" and run.error_class == "RunStateInvalid"
    assert env.stack.alarm_metrics()["RunsFailedByFault"] == 1
    assert _fires(env, "RunsFailedByFault")


def test_a_poison_wake_fires_the_dead_letter_depth_alarm(env: Env) -> None:
    """A wake message no consumer can read is received max_receive_count times, then lands in the
    wake DLQ: its depth alarm fires; its age is the message's age."""
    sqs = env.stack.client("sqs")
    sqs.send_message(QueueUrl=env.stack.queue_urls[R.WAKE_QUEUE.logical_id], MessageBody="not a wake")
    deadline = time.monotonic() + 60
    while env.stack.alarm_metrics()["WakeDeadLetterQueueDepth"] < 1 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _fires(env, "WakeDeadLetterQueueDepth")
    depth, age = local_metrics.queue_depth_and_age(sqs, env.stack.queue_urls[R.WAKE_DLQ.logical_id])
    assert depth == 1 and 0 <= age < 120
    old = time.time() + ALARMS_BY_NAME["WakeDeadLetterQueueOldestAge"].threshold
    assert local_metrics.queue_depth_and_age(sqs, env.stack.queue_urls[R.WAKE_DLQ.logical_id], now=old)[1] >= (
        ALARMS_BY_NAME["WakeDeadLetterQueueOldestAge"].threshold
    ), "a day later the age alarm fires"


def test_a_stream_not_read_raises_iterator_age(env: Env) -> None:
    """The pump held (the relay not reading the stream): the batch it reads later is as old
    as the hold, which is what the StreamIteratorAge alarm watches."""
    env.server.set_script("a1", [{"reply": {"text": "late"}}])
    with env.stack.paused():
        RoomService(env.deps.room).post_message("r1", ANN, "@a1 hello", [])
        time.sleep(1.5)
    env.stack.wait_quiet(30)
    assert env.stack.alarm_metrics()["StreamIteratorAge"] >= 1000
    records = [{"dynamodb": {"ApproximateCreationDateTime": 1_000.0}}]
    assert local_metrics.newest_record_age_ms(records, now=1_000.0 + ITERATOR_AGE_MS / 1000) >= ITERATOR_AGE_MS


def test_a_reconciler_error_fires_its_alarm(env: Env) -> None:
    """The reconciler raising (an event it cannot read) counts in its Errors."""
    with pytest.raises(RuntimeError, match="ReconcilerFunction failed"):
        env.stack.invoke("ReconcilerFunction", {"detail": "not an object"})
    assert _fires(env, "ReconcilerErrors")


def test_every_alarm_kind_has_a_local_proof_here() -> None:
    """The alarms proven above, by kind; Throttles has no local counterpart (quaylocal.metrics:
    the template test checks its alarm)."""
    proven_kinds = {("app", "RunFailed_fault"), ("queue", "ApproximateNumberOfMessagesVisible")}
    proven_kinds |= {("queue", "ApproximateAgeOfOldestMessage"), ("function", "IteratorAge"), ("function", "Errors")}
    assert {(a.source, a.metric) for a in ALARMS} - proven_kinds == {("function", "Throttles")}
