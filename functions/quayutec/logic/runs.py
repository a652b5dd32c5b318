"""The run ledger as a company sees it (docs/design.md §2, §3, §14): the runs of its own agents
in a room (and the wakes refused before a run started), their summed cost lines, one run with
its model requests and actions, and stopping a chain of agent wakes. The domain service of
``/rooms/{id}/runs``, ``/rooms/{id}/cost``, ``/runs/{id}`` and ``/rooms/{id}/chains/{id}/stop``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from quayutec.cost import prices
from quayutec.dal.pages import Page
from quayutec.deps import Deps
from quayutec.errors import InvalidInput, NotFound
from quayutec.logic.access import Principal, member_room
from quayutec.logic.stops import Stops
from quayutec.models import ActionRecord, ModelRequestRecord, RunCost, RunRecord, iso


@dataclass(frozen=True)
class RoomCost:
    """The summed cost lines of a company's runs in a room since ``since`` (ISO-8601, or all)."""

    since: str | None
    runs: int
    without_cost: int
    cost: RunCost


def instant(text: str) -> datetime:
    """An ISO-8601 timestamp or date as a UTC instant (UTC when it names no zone). Raises
    InvalidInput."""
    try:
        value = datetime.fromisoformat(text.strip())
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except (ValueError, OverflowError):
        raise InvalidInput(
            f"since: {text[:64]!r} is not an ISO-8601 timestamp or date (e.g. 2026-11-30T12:00:00Z)"
        ) from None


class Runs:
    """``deps``: the runtime's stores and clients (the ledger, Step Functions for a stop)."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room
        self.ledger = deps.ledger

    def page(self, who: Principal, room_id: str, limit: int, cursor: str | None = None) -> Page:
        """One page of the caller's company's runs in the room and of its wakes refused before a
        run started, newest first, ``limit`` of each, from ``cursor`` on
        (:meth:`quayutec.dal.ledger.Ledger.runs_page`: parts ``runs`` and ``not_started``).
        Raises NotFound, InvalidInput (a cursor this listing did not hand out)."""
        member_room(self.store, room_id, who)
        # Keyed by (room, company): each read reads this company's items only, `limit` of them
        # (design §14), however many runs other companies or the room's history hold.
        return self.ledger.runs_page(room_id, who.require_company(), limit, cursor)

    def cost(self, who: Principal, room_id: str, since: str | None = None) -> RoomCost:
        """The summed cost lines of the caller's company's runs in the room since ``since``.
        Raises InvalidInput (``since`` no instant), NotFound."""
        start = instant(since) if since is not None else None
        member_room(self.store, room_id, who)
        # The company's own runs since `start` only: one key range (design §14), summed as they
        # are read, a page at a time. Its reads still grow with the runs summed (a later issue
        # brings per-room spend counters).
        seen = {"runs": 0, "without_cost": 0}

        def costs() -> Iterator[RunCost]:
            for run in self.ledger.runs_since(room_id, who.require_company(), iso(start) if start else None):
                seen["runs"] += 1
                if run.cost is None:
                    seen["without_cost"] += 1
                else:
                    yield run.cost

        total = prices.total(costs())
        return RoomCost(
            since=iso(start) if start else None, runs=seen["runs"], without_cost=seen["without_cost"], cost=total
        )

    def get(self, who: Principal, run_id: str) -> tuple[RunRecord, list[ModelRequestRecord], list[ActionRecord]]:
        """A run of the caller's company's agents, its model requests and its actions. Raises
        Forbidden (an operator, whatever the id), NotFound."""
        company = who.require_company()
        run = self.ledger.get_run(run_id)
        if run is None or run.company != company:
            raise NotFound(f"run {run_id!r} does not exist")
        return run, self.ledger.model_requests(run_id), self.ledger.actions(run_id)

    def stop_chain(self, who: Principal, room_id: str, chain_id: str) -> tuple[bool, int]:
        """Stop a chain of agent wakes (any person of a member company,
        :meth:`quayutec.logic.stops.Stops.stop_chain`): whether this stopped it and how many
        runs waiting on approvals it ended. Raises NotFound."""
        member_room(self.store, room_id, who)
        return Stops(self.deps).stop_chain(room_id, chain_id, who.author())
