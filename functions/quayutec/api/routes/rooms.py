"""Rooms: create one (the caller's company is always a member; the service generates its id, the
request's ``name`` is a label), list the caller's, read one."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import Services, member_room, services
from quayutec.api.context import caller, idempotency_key
from quayutec.api.routes._params import RoomId
from quayutec.api.schemas import RoomAgentOut, RoomIn, RoomList, RoomOut
from quayutec.errors import Conflict, InvalidInput, LimitReached
from quayutec.logic import ids
from quayutec.logic.ids import new_room_id
from quayutec.models import Room

router = APIGatewayRouter()


def room_out(svc: Services, room: Room) -> RoomOut:
    """A room with its agents (id and owning company only: never their configuration)."""
    agents = [
        RoomAgentOut(id=agent_id, name=ids.agent_name(agent_id), company=company)
        for agent_id, company in svc.deps.room.room_agents(room.id).items()
    ]
    return RoomOut(
        id=room.id,
        name=room.name,
        members=room.members,
        hop_limit=room.hop_limit,
        max_runs_per_chain=room.max_runs_per_chain,
        created_by=room.created_by,
        agents=agents,
    )


@router.post("/rooms", status_code=201, tags=["rooms"], summary="Create a room")
def create_room(body: Annotated[RoomIn, Body()]) -> RoomOut:
    who = caller()
    company = who.require_company()
    svc = services()
    members = list(dict.fromkeys([company, *body.members]))
    most = svc.deps.settings.max_room_members
    if len(members) > most:
        raise LimitReached(f"a room of {len(members)} member companies", most, "MAX_ROOM_MEMBERS")
    unknown = [m for m in members if svc.deps.room.get_company(m) is None]
    if unknown:
        raise InvalidInput(f"members: no such company: {', '.join(unknown)}")
    # The service picks the id (design §5): a caller never learns that an id is taken, since it
    # never chooses one; a repeat with the same Idempotency-Key gets the same id.
    room = Room(
        id=new_room_id(idempotency_key()),
        name=body.name,
        members=members,
        hop_limit=body.hop_limit,
        max_runs_per_chain=body.max_runs_per_chain,
        created_by=company,
    )
    if not svc.directory.create_room(room):
        existing = svc.deps.room.get_room(room.id)
        if existing is None or company not in existing.members:
            raise Conflict("room id collision: retry")
        room = existing
    return room_out(svc, room)


@router.get("/rooms", tags=["rooms"], summary="The rooms the caller's company is a member of")
def list_rooms() -> RoomList:
    company = caller().require_company()
    return RoomList(rooms=sorted(services().directory.rooms_of(company)))


@router.get("/rooms/<room_id>", tags=["rooms"], summary="A room: members and agents")
def get_room(room_id: RoomId) -> RoomOut:
    svc = services()
    return room_out(svc, member_room(svc, room_id, caller()))
