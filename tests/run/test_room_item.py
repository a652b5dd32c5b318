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
        agent_id="acme.a1", room_id="r1", cause_kind="message", cause_id="x", task_id=None, index_pk="ROOM#r1#FILES"
    )
    assert reads.agents == {"acme.a1": "acme", "bolt.b1": "bolt"} and reads.memory == {"room"}
    assert reads.room is not None and reads.room.hop_limit == 3


def test_runs_writing_memory_write_the_room_item_once_per_partition(env: Env) -> None:
    """A memory line is never in a transaction with the room item (runs of one room writing memory
    would conflict with each other and with placements): its partition is marked by an UpdateItem
    of its own, once; a run that read the mark writes only its line (docs/design.md §2)."""
    from quaylab.costs import plain_runs

    remember = [{"kind": "remember", "text": "a line", "visibility": "room"}]
    first, second, third = plain_runs(env.stack, env.server, 3, actions=remember)
    updates = [f.by_operation.get("dynamodb.UpdateItem", 0) for f in (first, second, third)]
    assert updates[0] == updates[1] + 1 and updates[1] == updates[2], updates  # the mark, in the first run only
    assert second.by_operation == third.by_operation
    lines = env.deps.room.all_memory("r1", ["acme"])
    assert sorted(m.text for m in lines) == ["a line 0", "a line 1", "a line 2"]
    reads = env.deps.room.run_reads(
        agent_id="acme.a1", room_id="r1", cause_kind="message", cause_id="x", task_id=None, index_pk="ROOM#r1#FILES"
    )
    assert reads.memory == {"room"}
