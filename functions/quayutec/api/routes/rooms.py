"""Rooms: create one (the caller's company is always a member; the service generates its id, the
request's ``name`` is a label), list the caller's, read one."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller, idempotency_key
from quayutec.api.pages import fit
from quayutec.api.routes._params import Cursor, Limit, RoomId
from quayutec.api.schemas import RoomAgentOut, RoomIn, RoomList, RoomOut
from quayutec.logic import ids
from quayutec.logic.rooms import RoomView

router = APIGatewayRouter()


def room_out(view: RoomView) -> RoomOut:
    """A room with its agents (id and owning company only: never their configuration)."""
    room = view.room
    agents = [
        RoomAgentOut(id=agent_id, name=ids.agent_name(agent_id), company=company)
        for agent_id, company in view.agents.items()
    ]
    return RoomOut(
        id=room.id,
        name=room.name,
        members=room.members,
        hop_limit=room.hop_limit,
        max_runs_per_chain=room.max_runs_per_chain,
        created_by=room.created_by,
        invited=sorted(room.invited),
        agents=agents,
        busy_agents=view.busy_agents,
    )


@router.post("/rooms", status_code=201, tags=["rooms"], summary="Create a room")
def create_room(body: Annotated[RoomIn, Body()]) -> RoomOut:
    # The service picks the id (docs/design.md §5); a repeat with the same Idempotency-Key gets the same room.
    return room_out(
        services().rooms.create(
            caller(),
            name=body.name,
            members=body.members,
            hop_limit=body.hop_limit,
            max_runs_per_chain=body.max_runs_per_chain,
            idempotency_key=idempotency_key(),
        )
    )


@router.get("/rooms", tags=["rooms"], summary="The rooms the caller's company is a member of")
def list_rooms(limit: Limit = 50, cursor: Cursor = None) -> RoomList:
    """In id order, at most `limit` room ids a page (docs/design.md §14)."""
    page = fit(services().rooms.page(caller(), limit, cursor))
    return RoomList(rooms=page.items, next_cursor=page.next_cursor)


@router.get("/rooms/<room_id>", tags=["rooms"], summary="A room: members, agents and which are busy")
def get_room(room_id: RoomId) -> RoomOut:
    """Its member companies, its agents and `busy_agents`: those with a run in flight now, of
    any company (their ids only: docs/design.md §9)."""
    return room_out(services().rooms.get(caller(), room_id))
