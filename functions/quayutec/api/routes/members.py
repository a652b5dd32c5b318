"""Room membership: the member companies and the agents placed in the room."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import member_room, own_agent, services
from quayutec.api.context import caller
from quayutec.api.routes._params import RoomId
from quayutec.api.routes.rooms import room_out
from quayutec.api.schemas import MemberIn, RoomAgentIn, RoomOut
from quayutec.errors import Conflict, InvalidInput, LimitReached
from quayutec.logic import ids

router = APIGatewayRouter()


@router.get("/rooms/<room_id>/members", tags=["members"], summary="Member companies and agents of a room")
def list_members(room_id: RoomId) -> RoomOut:
    svc = services()
    return room_out(svc, member_room(svc, room_id, caller()))


@router.post(
    "/rooms/<room_id>/members",
    status_code=201,
    tags=["members"],
    summary="Add a company to the room (by a person of a member company)",
)
def add_member(room_id: RoomId, body: Annotated[MemberIn, Body()]) -> RoomOut:
    svc = services()
    member_room(svc, room_id, caller())
    if svc.deps.room.get_company(body.company) is None:
        raise InvalidInput(f"company: no such company {body.company!r}")
    most = svc.deps.settings.max_room_members
    if not svc.directory.add_member(room_id, body.company, most):
        room = member_room(svc, room_id, caller())
        if body.company not in room.members and len(room.members) >= most:
            raise LimitReached(f"room {room_id!r} has {len(room.members)} member companies", most, "MAX_ROOM_MEMBERS")
        raise Conflict(f"company {body.company!r} is a member of room {room_id!r} already")
    return room_out(svc, member_room(svc, room_id, caller()))


@router.post(
    "/rooms/<room_id>/agents",
    status_code=201,
    tags=["members"],
    summary="Place one of the caller's company's agents in the room",
)
def add_agent(room_id: RoomId, body: Annotated[RoomAgentIn, Body()]) -> RoomOut:
    svc = services()
    who = caller()
    room = member_room(svc, room_id, who)
    agent = own_agent(svc, body.agent, who)
    # the agent's own link and the room's holder of its name: one read, whatever the room's size
    name = ids.agent_name(agent.id)
    present = svc.deps.room.named_room_agents(room_id, [agent.id, name])
    if agent.id in present:
        raise Conflict(f"agent {agent.id!r} is in room {room_id!r} already")
    # @name must name one agent of the room, letter case aside (its members see the room's
    # agents: no leak); the room's name item makes it hold under concurrent placements too
    same = [a for a in present if ids.name_key(ids.agent_name(a)) == ids.name_key(name)]
    if same or not svc.deps.room.add_room_agent(room_id, agent.id, agent.company, svc.deps.settings.max_room_agents):
        holder = same[0] if same else "another agent"
        raise Conflict(
            f"room {room_id!r} has an agent named {name!r} already ({holder}): register yours under another name"
        )
    return room_out(svc, room)
