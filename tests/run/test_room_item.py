"""The room item carries the room's agents and which memory partitions hold lines, so a run reads
them in its one BatchGetItem (issue 13). A room item from before those maps must never look like
a room with no agents and no memory: a run then reads them the long way."""

from __future__ import annotations

import contextvars

from runhelpers import Env

from quaylocal import calls as C
from quayutec import resources as r
from quayutec.logic.room_service import RoomService
from quayutec.models import Author, MemoryLine, Room

ANN = Author(kind="person", id="ann", company="acme")


def _run_context(env: Env, room: str, text: str) -> dict:
    def post() -> None:
        with C.owner(C.SETUP):
            RoomService(env.deps.room).post_message(room, ANN, text, [])

    contextvars.copy_context().run(post)
    env.stack.wait_quiet()
    run = sorted(env.deps.ledger.runs_in_room(room), key=lambda x: x.started_at)[-1]
    assert run.status == "completed", run
    context = env.deps.rundata.get(run.run_id, "context")
    assert context is not None
    return context


def test_a_room_item_from_before_the_maps_is_read_the_long_way_also_after_a_rewrite(env: Env) -> None:
    ddb = env.stack.client("dynamodb")
    table = r.ROOM_TABLE.default_name
    with C.owner(C.SETUP):  # as a room, its links and a memory line were written before the maps
        for sk, extra in (
            ("META", {"type": {"S": "room"}, "id": {"S": "old"}, "members": {"L": [{"S": "acme"}, {"S": "bolt"}]}}),
            ("AGENT#a1", {"type": {"S": "room_agent"}, "agent_id": {"S": "a1"}, "company": {"S": "acme"}}),
            # a link from before links carried the company: its agent is read
            ("AGENT#b1", {"type": {"S": "room_agent"}, "agent_id": {"S": "b1"}}),
        ):
            ddb.put_item(TableName=table, Item={"pk": {"S": "ROOM#old"}, "sk": {"S": sk}, **extra})
        env.deps.room.put_memory(
            MemoryLine(
                id="m-old",
                room_id="old",
                text="kept from before",
                visibility="room",
                company="acme",
                author=ANN,
                created_at="2026-11-30T00:00:00Z",
            )
        )
        env.deps.room.put_room(Room(id="old", members=["acme", "bolt"], hop_limit=5))  # rewritten by set-up
    reads = env.deps.room.run_reads(
        agent_id="a1", room_id="old", cause_kind="message", cause_id="x", task_id=None, index_pk="ROOM#old#FILES"
    )
    assert reads.room is not None and reads.room.hop_limit == 5
    assert reads.agents is None and reads.memory is None  # not tracked: never "none"
    env.server.set_script("a1", [{"reply": {"text": "hello", "actions": []}}])
    context = _run_context(env, "old", "@a1 what do you know?")
    assert {(a["id"], a["company"]) for a in context["room"]["agents"]} == {("a1", "acme"), ("b1", "bolt")}
    assert [m["text"] for m in context["memory"]] == ["kept from before"]


def test_a_room_written_again_keeps_its_agents_and_memory(env: Env) -> None:
    d = env.deps
    with C.owner(C.SETUP):
        d.room.put_memory(
            MemoryLine(
                id="m-1",
                room_id="r1",
                text="the quay opens at six",
                visibility="room",
                company="acme",
                author=ANN,
                created_at="2026-11-30T00:00:00Z",
            )
        )
        d.room.put_room(Room(id="r1", members=["acme", "bolt"], hop_limit=3))
    reads = d.room.run_reads(
        agent_id="a1", room_id="r1", cause_kind="message", cause_id="x", task_id=None, index_pk="ROOM#r1#FILES"
    )
    assert reads.agents == {"a1": "acme", "b1": "bolt"} and reads.memory == {"room"}
    assert reads.room is not None and reads.room.hop_limit == 3
