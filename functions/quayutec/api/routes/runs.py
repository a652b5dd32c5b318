"""The run ledger (design §2.1): a company sees the runs of its own agents only; their summed cost
lines (design §10) likewise."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.pages import fit
from quayutec.api.routes._params import ChainId, Cursor, Limit, RoomId, RunId
from quayutec.api.schemas import (
    ChainStopped,
    ReplayDecision,
    ReplayOut,
    ReplaySection,
    RoomCost,
    RoomSpendFigures,
    RunDetail,
    RunList,
)
from quayutec.logic import timeline

Day = Annotated[
    str | None,
    Query(min_length=1, max_length=64, description="A UTC day YYYY-MM-DD (default: today) and its month"),
]
Since = Annotated[
    str | None,
    Query(max_length=64, description="No longer taken (400): the cost is counted per UTC day and month"),
]

router = APIGatewayRouter()


@router.get(
    "/rooms/<room_id>/runs", tags=["runs"], summary="Runs of the caller's company's agents in a room, newest first"
)
def list_runs(room_id: RoomId, limit: Limit = 50, cursor: Cursor = None) -> RunList:
    """A page of runs and of refused wakes, each newest first and at most `limit`, bounded in
    bytes (docs/design.md §14); `next_cursor` continues both."""
    page = fit(services().runs.page(caller(), room_id, limit, cursor))
    return RunList(runs=page.parts["runs"], not_started=page.parts["not_started"], next_cursor=page.next_cursor)


@router.get(
    "/rooms/<room_id>/cost",
    tags=["runs"],
    summary="The caller's company's model spend in a room, by UTC day and month",
)
def room_cost(room_id: RoomId, day: Day = None, since: Since = None) -> RoomCost:
    """What the caller's company's agents spent on model requests in the room on a UTC day and
    in its month, from the spend counters the budgets keep (docs/design.md §12.4): one read
    however many runs the room holds. 400 for a `day` that is no day, or for `since`."""
    cost = services().runs.cost(caller(), room_id, day, since=since)
    micro = 1_000_000
    return RoomCost(
        room_id=room_id,
        company=cost.company,
        day=RoomSpendFigures(key=cost.day, spent_usd=cost.day_micro_usd / micro, spent_tokens=cost.day_tokens),
        month=RoomSpendFigures(key=cost.month, spent_usd=cost.month_micro_usd / micro, spent_tokens=cost.month_tokens),
    )


@router.get("/runs/<run_id>", tags=["runs"], summary="One run: wake, model requests, actions, outcome")
def get_run(run_id: RunId) -> RunDetail:
    run, requests, actions = services().runs.get(caller(), run_id)  # operators read no run (403, whatever the id)
    return RunDetail(
        run=run,
        requests=requests,
        actions=actions,
        timeline=timeline.timeline(run, requests, actions),
        cost_text=timeline.cost_text(run.cost),
    )


@router.get(
    "/runs/<run_id>/replay", tags=["runs"], summary="Decide a run's actions again under today's code and policy"
)
def replay_run(run_id: RunId) -> ReplayOut:
    """The run's own company only (anyone else: 404; an operator: 403). Decides each action the
    run's recorded model reply declared again, from the room facts its decision read (recorded
    with each action) under today's code and the company's current policy: a difference means the
    code or the policy changed, not the room. No model request, nothing written. 409 when the run
    got no reply (or the one it kept in run data expired, after 30 days by default) or was decided
    before its room facts were recorded (docs/design.md §5.1)."""
    r = services().replays.replay(caller(), run_id)
    return ReplayOut(
        run=r.run_id,
        then=[ReplayDecision(**d.as_dict()) for d in r.then],
        now=[ReplayDecision(**d.as_dict()) for d in r.now],
        same=r.same,
        differ=r.differ,
        sections=[ReplaySection(**s) for s in r.sections],
    )


@router.post(
    "/rooms/<room_id>/chains/<chain_id>/stop",
    tags=["runs"],
    summary="Stop a chain of agent wakes in a room: no further run of it starts",
)
def stop_chain(room_id: RoomId, chain_id: ChainId) -> ChainStopped:
    """Any person of a member company (design §12.2). Idempotent: stopping a stopped chain changes
    nothing (``stopped: false``). 404 when no run of this room ever belonged to that chain; a
    run's ``chain_id`` (``GET /rooms/{room}/runs``) names it."""
    now, stopping = services().runs.stop_chain(caller(), room_id, chain_id)
    return ChainStopped(room_id=room_id, chain_id=chain_id, stopped=now, stopping=stopping)
