"""Counted figures of a big room (design §14): one page of every listing, and one run, read the
same in a room with 10x the history of a small one (messages, runs, approvals, tasks, memory).

:func:`seed_history` writes a room's history straight into the tables (set-up, not counted);
:func:`page_reads` counts what one page of each listing reads through the domain services the
API calls (DynamoDB calls and items read, from botocore's ``after-call`` events);
:func:`big_room_figures` puts a small and a 10x room side by side for ``make bench``'s
``big_room`` object, which other figures of big rooms join (keep it a flat dict of figures).
Counts, not timings: a test pins them (tests/run/test_big_room.py); the time ratio is printed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from quaylab.costs import plain_runs, seed_room_runs
from quaylocal import calls as C

#: A small room's history (two pages of each listing: a page reads a full page in either room);
#: a large room holds ``scale`` times as much of each.
BASE_HISTORY = {"messages": 40, "runs": 40, "approvals": 40, "tasks": 40, "memory": 80}
#: The listings one page of which is counted (each through its domain service).
LISTINGS = ("messages", "runs", "approvals", "tasks", "memory")
#: The page size the counts are taken at.
PAGE_LIMIT = 20
#: When the seeded history begins (before any run of the bench: a run's own writes are newer).
SEEDED_AT = "2026-11-30T00:00:00.000000Z"


def seed_history(deps: Any, room_id: str, scale: int, agent: str = "acme.a1") -> dict[str, int]:
    """Write ``scale`` times :data:`BASE_HISTORY` into ``room_id`` (which must exist, with
    acme's ``agent`` placed): messages of ann (acme), finished runs of acme's agent, approval
    requests of acme (one in three still pending), open tasks for ``agent`` and memory lines
    (room-wide and acme's own), each a second apart from :data:`SEEDED_AT`. Returns the counts."""
    from quayutec.models import ApprovalRequest, Author, MemoryLine, Message, Task, TaskEvent, iso, parse_iso

    n = {k: v * scale for k, v in BASE_HISTORY.items()}
    start = parse_iso(SEEDED_AT)
    ann = Author(kind="person", id="ann", company="acme")

    def at(i: int) -> str:
        return iso(start + timedelta(seconds=i))

    with C.owner(C.SETUP):
        for i in range(n["messages"]):
            deps.room.put_message(
                Message(id=f"m-{room_id}-{i:05d}", room_id=room_id, author=ann, text=f"m{i}", created_at=at(i))
            )
        seed_room_runs(deps.ledger, room_id, {"acme": n["runs"]}, at=SEEDED_AT)
        for i in range(n["approvals"]):
            run = f"run-{room_id}-acme-{i}"
            approval = ApprovalRequest(
                id=f"{run}:0",
                room_id=room_id,
                run_id=run,
                index=0,
                agent_id=agent,
                company="acme",
                summary="remember (room)",
                fields={"text": f"line {i}"},
                created_at=at(i),
                status="pending" if i % 3 == 0 else "rejected",
            )
            deps.room.put_approval(approval, f"token-{room_id}-{i}")
        for i in range(n["tasks"]):
            task = Task(
                id=f"t-{room_id}-{i:05d}",
                room_id=room_id,
                title=f"t{i}",
                body="",
                to=agent,
                created_by=ann,
                created_at=at(i),
                updated_at=at(i),
            )
            event = TaskEvent(
                id=f"te-{task.id}", room_id=room_id, task_id=task.id, kind="created", by=ann, created_at=at(i)
            )
            deps.room.create_task(task, event)
        for i in range(n["memory"]):
            visibility = "room" if i % 2 else "company"
            deps.room.put_memory(
                MemoryLine(
                    id=f"mem-{room_id}-{i:05d}",
                    room_id=room_id,
                    text=f"line {i}",
                    visibility=visibility,
                    company="acme",
                    author=ann,
                    created_at=at(i),
                )
            )
    return n


def counted(clients: list[Any], read: Callable[[], Any]) -> tuple[Any, dict[str, int]]:
    """Call ``read`` and count the DynamoDB calls it made through ``clients`` (each once):
    ``aws_calls`` and ``items_read`` (a Query's ``ScannedCount``, the items DynamoDB read and
    billed before any filter; a GetItem's item; a BatchGetItem's items)."""
    counts = {"aws_calls": 0, "items_read": 0}

    def count(parsed: dict[str, Any], model: Any = None, **_: Any) -> None:
        counts["aws_calls"] += 1
        op = getattr(model, "name", "")
        if op in ("Query", "Scan"):
            counts["items_read"] += int(parsed.get("ScannedCount", 0))
        elif op == "GetItem":
            counts["items_read"] += 1 if parsed.get("Item") else 0
        elif op == "BatchGetItem":
            counts["items_read"] += sum(len(v) for v in (parsed.get("Responses") or {}).values())

    unique = list({id(c): c for c in clients}.values())
    for c in unique:
        c.meta.events.register("after-call.dynamodb", count, unique_id="quay-big-room")
    try:
        with C.owner(C.SETUP):
            result = read()
    finally:
        for c in unique:
            c.meta.events.unregister("after-call.dynamodb", unique_id="quay-big-room")
    return result, counts


def page_reads(deps: Any, room_id: str, limit: int = PAGE_LIMIT) -> dict[str, dict[str, Any]]:
    """What one page of each of :data:`LISTINGS` reads for ann (acme) in ``room_id``, through the
    domain services the API's routes call: ``aws_calls``, ``items_read``, ``items`` (the page's
    length) and ``seconds`` (wall time, for the printed ratio only)."""
    from quayutec.logic.access import Caller
    from quayutec.logic.services import Services

    svc = Services(deps)
    ann = Caller(company="acme", member="ann")
    reads: dict[str, Callable[[], Any]] = {
        "messages": lambda: svc.messages.page(ann, room_id, limit),
        "runs": lambda: svc.runs.page(ann, room_id, limit),
        "approvals": lambda: svc.approvals.page(ann, room_id, limit, status="all"),
        "tasks": lambda: svc.tasks.page(ann, room_id, limit, status="open"),
        "memory": lambda: svc.memory.page(ann, room_id, limit),
    }
    out: dict[str, dict[str, Any]] = {}
    for name in LISTINGS:
        t0 = time.perf_counter()
        page, counts = counted([deps.room.db, deps.ledger.db], reads[name])
        seconds = time.perf_counter() - t0
        out[name] = {**counts, "items": sum(len(r.items) for r in page.parts.values()), "seconds": seconds}
    return out


def total(reads: dict[str, dict[str, Any]], figure: str = "items_read") -> int:
    """One figure summed over the listings of :func:`page_reads`."""
    return sum(int(r[figure]) for r in reads.values())


def big_room_figures(
    deps: Any,
    stack: Any | None = None,
    server: Any | None = None,
    *,
    scale: int = 10,
    rooms: tuple[str, str] = ("big-small", "big-large"),
) -> dict[str, Any]:
    """Two rooms of acme and bolt with acme's ``a1`` placed, one with :data:`BASE_HISTORY` and
    one with ``scale`` times it: one page of each listing in each (``pages``: per listing and
    room), and, with ``stack`` and ``server`` (the local stack and provider server), the AWS
    calls of one warm plain run in each. Returns the ``big_room`` figures: ``reads_per_page``
    (items read by one page of every listing), ``calls_per_page``, ``reads_per_run`` (AWS calls of
    a run), each ``{"small": n, "large": n}``, ``page_time_ratio`` (large / small, printed only)
    and ``pages`` (the detail)."""
    from quayutec.logic.access import Caller
    from quayutec.logic.services import Services

    small, large = rooms
    ann, bob, services = Caller(company="acme", member="ann"), Caller(company="bolt", member="bob"), Services(deps)
    with C.owner(C.SETUP):  # as POST /rooms and POST /rooms/{room}/agents make them
        for room in rooms:
            services.rooms.create(ann, name=room, members=["acme", "bolt"], room_id=room)
            services.rooms.accept(bob, room)  # bolt is invited (design §5): bob accepts it
            services.rooms.place_agent(ann, room, "a1")
    seed_history(deps, small, 1)
    seed_history(deps, large, scale)
    pages = {"small": page_reads(deps, small), "large": page_reads(deps, large)}
    seconds = {k: sum(r["seconds"] for r in v.values()) for k, v in pages.items()}
    figures: dict[str, Any] = {
        "reads_per_page": {k: total(v) for k, v in pages.items()},
        "calls_per_page": {k: total(v, "aws_calls") for k, v in pages.items()},
        "page_time_ratio": round(seconds["large"] / seconds["small"], 2) if seconds["small"] else None,
        "pages": {
            k: {name: {f: r[f] for f in ("aws_calls", "items_read", "items")} for name, r in v.items()}
            for k, v in pages.items()
        },
    }
    if stack is not None and server is not None:
        figures["reads_per_run"] = {
            "small": plain_runs(stack, server, 2, room=small)[-1].aws_calls,
            "large": plain_runs(stack, server, 2, room=large)[-1].aws_calls,
        }
    return figures
