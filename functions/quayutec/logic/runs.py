"""The run ledger as a company sees it (docs/design.md §2, §3, §14): the runs of its own agents
in a room (and the wakes refused before a run started), their summed cost lines, one run with
its model requests and actions, and stopping a chain of agent wakes. The domain service of
``/rooms/{id}/runs``, ``/rooms/{id}/cost``, ``/runs/{id}`` and ``/rooms/{id}/chains/{id}/stop``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from quayutec.dal.keys import budget_key
from quayutec.dal.pages import Page
from quayutec.deps import Deps
from quayutec.errors import InvalidInput, NotFound
from quayutec.logic import budgets
from quayutec.logic.access import Principal, member_room
from quayutec.logic.stops import Stops
from quayutec.models import ActionRecord, ModelRequestRecord, RunRecord


@dataclass(frozen=True)
class RoomCost:
    """A company's model spend in a room for one UTC day and its month, from its spend counters
    (design §12.4): micro-USD for models with a known price, tokens for the others; requests
    not answered yet count at their reserve."""

    company: str
    day: str  # "2026-12-03"
    month: str  # "2026-12"
    day_micro_usd: int
    day_tokens: int
    month_micro_usd: int
    month_tokens: int


_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def utc_day(text: str) -> datetime:
    """A UTC day ``YYYY-MM-DD`` (ASCII digits, each part at its full width: ``strptime`` alone
    takes ``2026-1-1`` and any Unicode digits) as midnight UTC. Raises InvalidInput."""
    try:
        if not _DAY.fullmatch(text.strip()):
            raise ValueError(text)
        return datetime.strptime(text.strip(), "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise InvalidInput(f"day: {text[:64]!r} is not a UTC day YYYY-MM-DD (e.g. 2026-12-03)") from None


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

    def cost(self, who: Principal, room_id: str, day: str | None = None, *, since: str | None = None) -> RoomCost:
        """The caller's company's model spend in the room on UTC ``day`` (``YYYY-MM-DD``; today
        when ``None``) and in that day's month, from the company's spend counters: one
        BatchGetItem whatever the room's history (design §12.4, §14). Raises InvalidInput (no
        such day; ``since``, which the cost no longer takes), NotFound, TransientError."""
        if since is not None:
            raise InvalidInput(
                "since: no longer taken; the room's cost is counted per UTC day and month: pass day=YYYY-MM-DD"
            )
        at = utc_day(day) if day is not None else self.deps.clock()
        member_room(self.store, room_id, who)
        company = who.require_company()
        periods = budgets.periods(at)
        _, counters = self.ledger.spend_reads(
            company, [periods["day"], periods["month"]], (self.store.table, budget_key(company))
        )

        def figure(period: str, unit: str) -> int:
            return int(counters.get(periods[period], {}).get(f"room_{unit}:{room_id}", 0))

        return RoomCost(
            company=company,
            day=periods["day"].split("#", 1)[1],
            month=periods["month"].split("#", 1)[1],
            day_micro_usd=figure("day", "usd"),
            day_tokens=figure("day", "tokens"),
            month_micro_usd=figure("month", "usd"),
            month_tokens=figure("month", "tokens"),
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
