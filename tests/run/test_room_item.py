"""The room item carries the room's agents and which memory partitions hold lines, so a run reads
them in its one BatchGetItem (issue 13)."""

from __future__ import annotations

from runhelpers import Env

from quaylocal import calls as C
from quayutec.models import Author, MemoryLine, Room

ANN = Author(kind="person", id="ann", company="acme")


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
