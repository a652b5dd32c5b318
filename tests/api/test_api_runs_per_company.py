"""A company's runs page reads its own runs only (design §14): the ledger's ``runs_by_room`` index
keys a room's runs by (room, company), so another company's runs, however many, are never read
and a page fills ``limit`` exactly. Its approval requests likewise (``approvals_by_company``)."""

from __future__ import annotations

import pytest
from apihelpers import World

from quaylab.costs import counted_reads, runs_page_reads, seed_room_runs
from quayutec.deps import default_deps
from quayutec.logic.access import Caller
from quayutec.logic.services import Services
from quayutec.models import ApprovalRequest

LIMIT = 7
ROOM = "r-runs"


@pytest.fixture(scope="module")
def crowded(light_world: World) -> World:
    """Room r-runs of acme and bolt: acme's agent ran 12 times, bolt's 120 (10x)."""
    d = default_deps()
    rooms = Services(d).rooms
    rooms.create(Caller(company="acme", member="ann"), name=ROOM, members=["bolt"], room_id=ROOM)
    rooms.accept(Caller(company="bolt", member="bob"), ROOM)  # bolt accepts its invitation (design §5)
    seed_room_runs(d.ledger, ROOM, {"acme": 12, "bolt": 120})
    return light_world


def test_a_runs_page_reads_only_the_callers_runs_and_fills_exactly(crowded: World) -> None:
    w = crowded
    ledger = default_deps().ledger
    alone = "r-runs-alone"
    seed_room_runs(ledger, alone, {"acme": 12})

    page_reads = runs_page_reads(ledger, ROOM, "acme", LIMIT)
    # two queries: the page's runs and its refused wakes (none here), each of acme's key range only
    assert page_reads == {"queries": 2, "items_read": LIMIT, "runs": LIMIT}, page_reads
    assert runs_page_reads(ledger, alone, "acme", LIMIT) == page_reads  # bolt's runs cost acme nothing
    everything = runs_page_reads(ledger, ROOM, "acme", 200)
    assert everything == {"queries": 2, "items_read": 12, "runs": 12}, everything

    page = w.api.ok("GET", f"/rooms/{ROOM}/runs?limit={LIMIT}", w.tokens["ann"])
    assert [r["run_id"] for r in page["runs"]] == [f"run-{ROOM}-acme-{i}" for i in range(11, 11 - LIMIT, -1)]
    bolt = w.api.ok("GET", f"/rooms/{ROOM}/runs?limit=200", w.tokens["bob"])["runs"]
    assert len(bolt) == 120 and {r["company"] for r in bolt} == {"bolt"}
    assert [r["started_at"] for r in bolt] == sorted((r["started_at"] for r in bolt), reverse=True)
    # the operator's view still reads every company's, oldest first
    every = ledger.runs_in_room(ROOM)
    assert len(every) == 132 and [r.started_at for r in every] == sorted(r.started_at for r in every)


def test_room_cost_reads_no_run_however_many_the_room_holds(crowded: World) -> None:
    """Design §12.4, §14: a room's cost comes from the spend counters (one BatchGetItem), never
    from its runs: no Query, whatever the 132 runs of the room."""
    w = crowded
    cost, reads = counted_reads(
        default_deps().ledger.db, lambda: w.api.ok("GET", f"/rooms/{ROOM}/cost", w.tokens["ann"])
    )
    assert reads == {"queries": 0, "items_read": 0}, reads
    assert cost["company"] == "acme" and set(cost) == {"room_id", "company", "day", "month"}


def test_a_companys_approvals_listing_reads_only_its_own_rows(crowded: World) -> None:
    w = crowded
    room = default_deps().room
    for company, n in (("acme", 2), ("bolt", 20)):
        for i in range(n):
            run = f"run-{ROOM}-{company}-{i}"
            approval = ApprovalRequest(
                id=f"{run}:0",
                room_id=ROOM,
                run_id=run,
                index=0,
                agent_id=f"{company}.a1",
                company=company,
                summary="remember (room)",
                fields={"text": f"line {i}"},
                created_at=f"2026-11-30T00:01:{i:02d}.000000Z",
            )
            room.put_approval(approval, f"token-{company}-{i}")
    mine, reads = counted_reads(room.db, lambda: room.approvals(ROOM, "acme"))
    assert [a.run_id for a in mine] == [f"run-{ROOM}-acme-{i}" for i in range(2)]
    assert reads == {"queries": 1, "items_read": 2}, reads
    listed = w.api.ok("GET", f"/rooms/{ROOM}/approvals", w.tokens["ann"])["approvals"]
    assert [a["run_id"] for a in listed] == [f"run-{ROOM}-acme-{i}" for i in range(2)]
    assert len(w.api.ok("GET", f"/rooms/{ROOM}/approvals?status=all", w.tokens["bob"])["approvals"]) == 20
