"""The run ledger (SPEC §2.1): a company sees the runs of its own agents only."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import member_room, services
from quayutec.api.context import caller
from quayutec.api.routes._params import Limit, RoomId, RunId
from quayutec.api.schemas import RunDetail, RunList
from quayutec.errors import NotFound

router = APIGatewayRouter()


@router.get("/rooms/<room_id>/runs", tags=["runs"], summary="Runs of the caller's company's agents in a room, newest first")
def list_runs(room_id: RoomId, limit: Limit = 50) -> RunList:
    who = caller()
    svc = services()
    member_room(svc, room_id, who)
    runs = [r for r in svc.deps.ledger.runs_in_room(room_id) if r.company == who.company]
    runs.sort(key=lambda r: r.started_at, reverse=True)
    return RunList(runs=runs[:limit])


@router.get("/runs/<run_id>", tags=["runs"], summary="One run: wake, model requests, actions, outcome")
def get_run(run_id: RunId) -> RunDetail:
    who = caller()
    svc = services()
    run = svc.deps.ledger.get_run(run_id) if who.company else None
    if run is None or run.company != who.company:
        raise NotFound(f"run {run_id!r} does not exist")
    return RunDetail(run=run, requests=svc.deps.ledger.model_requests(run_id), actions=svc.deps.ledger.actions(run_id))
