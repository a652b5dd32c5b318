"""Company-only notices in a run's context (design §12.5), through the real run path: a notice for
acme reaches acme's agent (its recent messages, and the wake's cause) and never another company's
agent: not in its stored context, not in any request the provider server received for it."""

from __future__ import annotations

import json

from runhelpers import Env

from quayutec import resources as r
from quayutec.logic.ids import agent_name
from quayutec.logic.notices import company_notice
from quayutec.logic.room_service import RoomService
from quayutec.models import Author, Message, Wake

ANN = Author(kind="person", id="ann", company="acme")
SECRET = "acme only: your provider key expires on Friday"


def _post_notice(env: Env, nid: str = "notice-test-key") -> Message:
    notice = company_notice(id=nid, room_id="r1", company="acme", text=SECRET)
    assert env.deps.room.put_message(notice)
    return notice


def _requests_of(env: Env, agent: str) -> list[str]:
    return [
        json.dumps(q.body) for q in env.server.requests if q.agent_id is not None and agent_name(q.agent_id) == agent
    ]


def _context(env: Env, agent: str) -> dict:
    [run] = [x for x in env.deps.ledger.runs_in_room("r1") if agent_name(x.agent_id) == agent]
    ctx = env.deps.rundata.get(run.run_id, "context")
    assert ctx is not None
    return ctx


def test_the_notice_is_in_its_companys_agents_context_only(env: Env) -> None:
    notice = _post_notice(env)
    RoomService(env.deps.room).post_message("r1", ANN, "@a1 @b1 what is new?", [])
    env.stack.wait_quiet(60)
    assert env.server.count("a1") == 1 and env.server.count("b1") == 1
    # acme's agent: in its recent messages, and in what the model read, marked as acme's only
    assert notice.id in [m["id"] for m in _context(env, "a1")["messages"]]
    [a1_request] = _requests_of(env, "a1")
    assert SECRET in a1_request and "(only acme sees this)" in a1_request
    # bolt's agent: the room's messages without it
    b1_ids = [m["id"] for m in _context(env, "b1")["messages"]]
    assert notice.id not in b1_ids and len(b1_ids) >= 1  # ann's message is there
    [b1_request] = _requests_of(env, "b1")
    assert SECRET not in b1_request and notice.id not in json.dumps(_context(env, "b1"))


def test_a_wake_caused_by_the_notice_reads_it_for_its_company_only(env: Env) -> None:
    """Notices wake no one (design §3); should a wake ever name one as its cause, another
    company's agent reads it as absent: its run fails before any model request."""
    notice = _post_notice(env)
    env.server.set_script("a1", [{"reply": {"text": "Noted.", "actions": []}}])
    sqs = env.stack.client("sqs")
    url = env.stack.queue_urls[r.WAKE_QUEUE.logical_id]
    for agent in ("acme.a1", "bolt.b1"):
        wake = Wake(
            agent_id=agent,
            wake_id=f"test:{notice.id}",
            room_id="r1",
            hop=0,
            chain_id=notice.id,
            by_kind="person",
            by_company="acme",
            cause_kind="message",
            cause_id=notice.id,
        )
        sqs.send_message(QueueUrl=url, MessageBody=wake.model_dump_json())
    env.stack.wait_quiet(60)
    runs = {agent_name(x.agent_id): x for x in env.deps.ledger.runs_in_room("r1")}
    assert runs["a1"].status == "completed"
    assert _context(env, "a1")["cause"]["message"]["text"] == SECRET
    assert any(f"Message from [system] (only acme sees this): {SECRET}" in q for q in _requests_of(env, "a1"))
    assert runs["b1"].status == "failed_before_reply", runs["b1"]
    assert env.server.count("b1") == 0 and env.deps.rundata.get(runs["b1"].run_id, "context") is None
