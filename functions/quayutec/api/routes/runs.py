"""The run ledger (SPEC §2.1): a company sees the runs of its own agents only; their summed cost
lines (SPEC §10) likewise."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec import pricing
from quayutec.api.access import member_room, services
from quayutec.api.context import caller
from quayutec.api.routes._params import ChainId, Limit, RoomId, RunId
from quayutec.api.schemas import ChainStopped, RoomCost, RunDetail, RunList
from quayutec.errors import InvalidInput, NotFound
from quayutec.logic.stops import Stops
from quayutec.models import iso

Since = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=64,
        description="Only runs started at or after this instant: an ISO-8601 "
        "timestamp or date (UTC when it names no zone)",
    ),
]

router = APIGatewayRouter()


@router.get(
    "/rooms/<room_id>/runs", tags=["runs"], summary="Runs of the caller's company's agents in a room, newest first"
)
def list_runs(room_id: RoomId, limit: Limit = 50) -> RunList:
    who = caller()
    svc = services()
    member_room(svc, room_id, who)
    company = who.require_company()
    # Keyed by (room, company): each read reads this company's items only, `limit` of them
    # (design §9), however many runs other companies have in the room.
    runs = svc.deps.ledger.runs_in_room(room_id, company, limit=limit)
    refused = svc.deps.ledger.not_started_in_room(room_id, company, limit=limit)
    return RunList(runs=runs, not_started=refused)


@router.get(
    "/rooms/<room_id>/cost",
    tags=["runs"],
    summary="The summed cost lines of the caller's company's agents' runs in a room",
)
def room_cost(room_id: RoomId, since: Since = None) -> RoomCost:
    who = caller()
    svc = services()
    start = _instant(since) if since is not None else None
    member_room(svc, room_id, who)
    # the company's own runs since `start` only: one key range (design §9)
    runs = svc.deps.ledger.runs_in_room(room_id, who.require_company(), since=iso(start) if start else None)
    return RoomCost(
        room_id=room_id,
        since=iso(start) if start else None,
        runs=len(runs),
        without_cost=sum(1 for r in runs if r.cost is None),
        cost=pricing.total(r.cost for r in runs if r.cost is not None),
    )


def _instant(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.strip())
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except (ValueError, OverflowError):
        raise InvalidInput(
            f"since: {text[:64]!r} is not an ISO-8601 timestamp or date (e.g. 2026-11-30T12:00:00Z)"
        ) from None


@router.get("/runs/<run_id>", tags=["runs"], summary="One run: wake, model requests, actions, outcome")
def get_run(run_id: RunId) -> RunDetail:
    who = caller()
    svc = services()
    company = who.require_company()  # operators read no run (403, whatever the id)
    run = svc.deps.ledger.get_run(run_id)
    if run is None or run.company != company:
        raise NotFound(f"run {run_id!r} does not exist")
    return RunDetail(run=run, requests=svc.deps.ledger.model_requests(run_id), actions=svc.deps.ledger.actions(run_id))


@router.post(
    "/rooms/<room_id>/chains/<chain_id>/stop",
    tags=["runs"],
    summary="Stop a chain of agent wakes in a room: no further run of it starts",
)
def stop_chain(room_id: RoomId, chain_id: ChainId) -> ChainStopped:
    """Any person of a member company (design §3). Idempotent: stopping a stopped chain changes
    nothing (``stopped: false``). 404 when no run of this room ever belonged to that chain; a
    run's ``chain_id`` (``GET /rooms/{room}/runs``) names it."""
    who = caller()
    svc = services()
    member_room(svc, room_id, who)
    now, stopping = Stops(svc.deps).stop_chain(room_id, chain_id, who.author())
    return ChainStopped(room_id=room_id, chain_id=chain_id, stopped=now, stopping=stopping)
