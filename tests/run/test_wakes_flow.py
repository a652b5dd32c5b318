"""Wakes through the real outbox path (design §3): room-table stream → WakeRelay → SQS →
WakeConsumer → one execution per (agent, wake); partial batch failures; poison wakes in the DLQ."""

from __future__ import annotations

import json
import time

from runhelpers import Env

from quayutec import resources as r
from quayutec.logic.ids import execution_name
from quayutec.logic.room_service import RoomService
from quayutec.models import Author

ANN = Author(kind="person", id="ann", company="acme")
BOB = Author(kind="person", id="bob", company="bolt")


def _executions(env: Env) -> list[dict]:
    sfn = env.stack.client("stepfunctions")
    return [
        e
        for s in ("RUNNING", "SUCCEEDED", "FAILED")
        for e in sfn.list_executions(stateMachineArn=env.stack.state_machine_arn, statusFilter=s)["executions"]
    ]


def test_to_and_mention_of_one_agent_is_one_wake_and_one_run(env: Env) -> None:
    msg = RoomService(env.deps.room).post_message("r1", ANN, "@a1 hello @a1", ["a1"])
    env.stack.wait_quiet(30)
    names = [e["name"] for e in _executions(env)]
    assert names == [execution_name("acme.a1", f"msg:{msg.id}")]
    assert env.server.count("a1") == 1 and env.server.count("b1") == 0
    replies = [m for m in env.deps.room.all_messages("r1") if m.kind == "reply"]
    assert [m.author.id for m in replies] == ["acme.a1"]


def test_task_wakes_assignee_and_agent_creator_on_someone_elses_update(env: Env) -> None:
    env.server.set_script(
        "a1",
        [
            {
                "reply": {
                    "text": "Asking b1.",
                    "actions": [{"kind": "create_task", "to": "b1", "title": "Check", "body": "Check it."}],
                }
            },
            {"reply": {"text": "Seen.", "actions": []}},
        ],
    )
    rooms = RoomService(env.deps.room)
    rooms.post_message("r1", ANN, "@a1 get b1 to check", [])
    env.stack.wait_quiet(30)
    [task] = env.deps.room.all_tasks("r1")
    assert task.created_by.id == "acme.a1" and env.server.count("b1") == 1  # b1 woke on the new task (echo reply)
    rooms.task_event("r1", BOB, task.id, "update", "Half way.")
    env.stack.wait_quiet(30)
    assert env.server.count("b1") == 2 and env.server.count("a1") == 2  # assignee and the agent that created it
    runs = env.deps.ledger.runs_in_room("r1")
    assert sorted(run.hop for run in runs) == [0, 0, 0, 1]
    assert all(run.status == "completed" for run in runs)


def test_poison_wake_goes_to_the_dlq_and_spares_its_batch(env: Env) -> None:
    sqs = env.stack.client("sqs")
    url = env.stack.queue_urls[r.WAKE_QUEUE.logical_id]
    msg = RoomService(env.deps.room)
    with env.stack.paused():
        good = msg.post_message("r1", ANN, "hello", [])  # no recipients: no wake of its own
        wake = {
            "agent_id": "acme.a1",
            "wake_id": f"msg:{good.id}",
            "room_id": "r1",
            "hop": 0,
            "chain_id": good.id,
            "by_kind": "person",
            "by_company": "acme",
            "cause_kind": "message",
            "cause_id": good.id,
        }
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[{"Id": "poison", "MessageBody": "{not json"}, {"Id": "good", "MessageBody": json.dumps(wake)}],
        )
    dlq = env.stack.queue_urls[r.WAKE_DLQ.logical_id]
    deadline = time.monotonic() + 30
    found: list[dict] = []
    while time.monotonic() < deadline and not found:
        found = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10).get("Messages", [])
        time.sleep(0.2)
    assert [m["Body"] for m in found] == ["{not json"]
    env.stack.wait_quiet(30)
    assert [e["name"] for e in _executions(env)] == [execution_name("acme.a1", f"msg:{good.id}")]
    # Delivered once: no repeat counted, and a first delivery writes nothing to the ledger.
    assert env.deps.ledger.deliveries("acme.a1", f"msg:{good.id}") == {}
