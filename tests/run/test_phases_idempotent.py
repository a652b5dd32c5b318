"""Never twice (design §2.1): each phase invoked twice with the same input writes once; the claim
is accepted once per (agent, wake) and again only for its own execution; a retried CallModel
step never makes another request once a reply is stored."""

from __future__ import annotations

import copy
from typing import Any

from runhelpers import CTX, Env, hold_cross_company_tasks, s3_keys, table_items

from quayutec import resources as r
from quayutec.handlers import (
    apply_and_finish,
    call_model,
    claim_and_read,
    decide_and_post,
    request_approval,
)
from quayutec.models import Author, Message, Task, TaskEvent, Wake, now_iso

ARN_PREFIX = "arn:aws:states:us-east-1:123456789012:execution:quayutec-agent-run:"


def _snapshot(env: Env) -> dict[str, Any]:
    def strip(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for i in items:
            i = {k: v for k, v in i.items() if k not in ("updated_at",)}
            out.append(i)
        return sorted(out, key=lambda i: (str(i.get("pk")), str(i.get("sk")), str(i.get("agent_id"))))

    return {
        "room": strip(table_items(env.stack, r.ROOM_TABLE.default_name)),
        "claims": strip(table_items(env.stack, r.CLAIM_TABLE.default_name)),
        "ledger": strip(table_items(env.stack, r.LEDGER_TABLE.default_name)),
        "rundata": s3_keys(env.stack, r.RUN_DATA_BUCKET.default_name),
    }


def _event(state: dict[str, Any], run_id: str, started: str = "2026-11-30T00:00:00.000Z") -> dict[str, Any]:
    return {
        "state": copy.deepcopy(state),
        "run_id": run_id,
        "execution_arn": ARN_PREFIX + run_id,
        "execution_start": started,
    }


def _wake(env: Env, text: str = "please plan") -> Wake:
    """A person's message to a1, written without wakes (the test drives the phases itself)."""
    msg = Message(
        id="m-1",
        room_id="r1",
        author=Author(kind="person", id="ann", company="acme"),
        text=text,
        to=["acme.a1"],
        created_at=now_iso(),
    )
    env.deps.room.put_message(msg)
    return Wake(
        agent_id="acme.a1",
        wake_id="msg:m-1",
        room_id="r1",
        hop=0,
        chain_id="m-1",
        by_kind="person",
        by_company="acme",
        cause_kind="message",
        cause_id="m-1",
    )


def test_every_write_phase_twice_writes_once(env: Env) -> None:
    bob = Author(kind="person", id="bob", company="bolt")
    now = now_iso()
    task = Task(
        id="t-1",
        room_id="r1",
        title="Draft",
        body="Draft it",
        to="acme.a1",
        created_by=bob,
        created_at=now,
        updated_at=now,
    )
    env.deps.room.create_task(
        task, TaskEvent(id="tev-1", room_id="r1", task_id="t-1", kind="created", text="Draft", by=bob, created_at=now)
    )  # no wakes: the test drives
    if True:
        env.server.set_script(
            "a1",
            [
                {
                    "reply": {
                        "text": "Done. Over to you.",
                        "actions": [
                            {"kind": "remember", "text": "Launch on Friday.", "visibility": "room"},
                            {"kind": "remember", "text": "Internal note.", "visibility": "company"},
                            {"kind": "create_task", "to": "b1", "title": "Check", "body": "Check the draft."},
                            {"kind": "update_task", "task": task.id, "note": "Half done."},
                            {"kind": "close_task", "task": task.id, "result": "Finished."},
                            {"kind": "teleport", "where": "mars"},
                        ],
                    }
                }
            ],
        )
    with env.stack.paused():
        run_id = "a1-test-run"
        state = {"wake": _wake(env).model_dump(mode="json")}
        phases = [claim_and_read, call_model, decide_and_post, apply_and_finish]
        for phase in phases:
            event = _event(state, run_id)
            first = phase.handler(event, CTX)
            after_first = _snapshot(env)
            second = phase.handler(_event(state, run_id), CTX)
            after_second = _snapshot(env)
            assert after_second == after_first, f"{phase.__name__} wrote again on a repeat"
            # the budget shrinks; a repeated claim says "resumed"; a repeat costs, and its span is its own
            ignore = {"budget", "claim", "cost", "spans"}
            assert [s["phase"] for s in second["spans"]] == [s["phase"] for s in first["spans"]], phase.__name__
            assert {k: v for k, v in second.items() if k not in ignore} == {
                k: v for k, v in first.items() if k not in ignore
            }, phase.__name__
            state = first
        # what landed, exactly once each
        room = after_second["room"]
        assert [i["sk"] for i in room if i.get("type") == "message" and i["kind"] == "reply"] == [f"MSG#reply-{run_id}"]
        assert len([i for i in room if i.get("type") == "memory"]) == 2
        assert len([i for i in room if i.get("type") == "task"]) == 2
        closed = env.deps.room.get_task("r1", task.id)
        assert closed is not None and closed.status == "closed" and closed.result == "Finished."
        outbox = [i for i in room if i.get("type") == "outbox"]
        assert len(outbox) == 1 and [w["agent_id"] for w in outbox[0]["wakes"]] == ["bolt.b1"]
        assert env.server.count("a1") == 1  # the repeated CallModel reused the stored reply
        ledger_run = env.deps.ledger.get_run(run_id)
        assert ledger_run is not None and ledger_run.status == "completed"
        acts = env.deps.ledger.actions(run_id)
        assert [a.outcome for a in acts] == ["written"] * 5 + ["denied"]
        assert acts[5].reason == "unknown action kind 'teleport'"


def test_claim_refuses_other_execution_and_accepts_its_own(env: Env) -> None:
    with env.stack.paused():
        state = {"wake": _wake(env).model_dump(mode="json")}
        first = claim_and_read.handler(_event(state, "run-a"), CTX)
        assert first["claim"] == {"claimed": True, "resumed": False}
        again = claim_and_read.handler(_event(state, "run-a"), CTX)  # retried after its write landed
        assert again["claim"] == {"claimed": True, "resumed": True}
        # Another execution, same (agent, wake): nothing done, a value the state machine ends on.
        other = {"claimed": False, "resumed": False, "not_started": "other_execution"}
        assert claim_and_read.handler(_event(state, "run-b"), CTX)["claim"] == other
        # the same name reused after 90 days is another execution
        reused = claim_and_read.handler(_event(state, "run-a", started="2027-03-01T00:00:00.000Z"), CTX)
        assert reused["claim"] == other and "run" not in reused
        claims = table_items(env.stack, r.CLAIM_TABLE.default_name)
        assert len(claims) == 1 and claims[0]["execution_arn"] == ARN_PREFIX + "run-a"
        runs = [i for i in table_items(env.stack, r.LEDGER_TABLE.default_name) if i["sk"] == "RUN"]
        assert [i["run_id"] for i in runs] == ["run-a"]


def test_request_approval_twice_records_one_request_with_the_newest_token(env: Env) -> None:
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
    with env.stack.paused():
        run_id = "a1-approval-run"
        state = {"wake": _wake(env).model_dump(mode="json")}
        for phase in (claim_and_read, call_model, decide_and_post):
            state = phase.handler(_event(state, run_id), CTX)
        assert state["rights"]["held"] == [0]
        request_approval.handler({"run_id": run_id, "index": 0, "task_token": "token-1"}, CTX)
        before = _snapshot(env)["room"]
        request_approval.handler({"run_id": run_id, "index": 0, "task_token": "token-2"}, CTX)
        approvals = env.deps.room.approvals("r1")
        assert len(approvals) == 1 and approvals[0].company == "acme" and approvals[0].status == "pending"
        assert env.deps.room.get_approval("r1", run_id, 0)[1] == "token-2"  # type: ignore[index]
        assert len(_snapshot(env)["room"]) == len(before)
        run = env.deps.ledger.get_run(run_id)
        assert run is not None and run.status == "waiting_approval" and run.parked_since
