"""Rooms: create one (the caller's company is always a member), list the caller's, read one."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import Services, member_room, services
from quayutec.api.context import caller
from quayutec.api.routes._params import RoomId
from quayutec.api.schemas import RoomAgentOut, RoomIn, RoomList, RoomOut
from quayutec.errors import Conflict, InvalidInput
from quayutec.models import Room

router = APIGatewayRouter()


def room_out(svc: Services, room: Room) -> RoomOut:
    """A room with its agents (id and owning company only: never their configuration)."""
    agents = []
    for agent_id in svc.deps.room.room_agent_ids(room.id):
        agent = svc.deps.room.get_agent(agent_id)
        agents.append(RoomAgentOut(id=agent_id, company=agent.company if agent else ""))
    return RoomOut(id=room.id, members=room.members, hop_limit=room.hop_limit, agents=agents)


@router.post("/rooms", status_code=201, tags=["rooms"], summary="Create a room")
def create_room(body: Annotated[RoomIn, Body()]) -> RoomOut:
    who = caller()
    company = who.require_company()
    svc = services()
    members = list(dict.fromkeys([company, *body.members]))
    unknown = [m for m in members if svc.deps.room.get_company(m) is None]
    if unknown:
        raise InvalidInput(f"members: no such company: {', '.join(unknown)}")
    room = Room(id=body.id, members=members, hop_limit=body.hop_limit)
    if not svc.directory.create_room(room):
        raise Conflict(f"room {body.id!r} exists already")
    return room_out(svc, room)


@router.get("/rooms", tags=["rooms"], summary="The rooms the caller's company is a member of")
def list_rooms() -> RoomList:
    company = caller().require_company()
    return RoomList(rooms=sorted(services().directory.rooms_of(company)))


@router.get("/rooms/<room_id>", tags=["rooms"], summary="A room: members and agents")
def get_room(room_id: RoomId) -> RoomOut:
    svc = services()
    return room_out(svc, member_room(svc, room_id, caller()))
