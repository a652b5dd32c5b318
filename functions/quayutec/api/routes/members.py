"""Room membership: the member companies and the agents placed in the room."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.pages import fit
from quayutec.api.routes._params import Cursor, Limit, RoomId
from quayutec.api.routes.rooms import room_out
from quayutec.api.schemas import Invited, MemberIn, MembersPage, RoomAgentIn, RoomAgentOut, RoomOut
from quayutec.logic import ids
from quayutec.logic.rooms import RoomView

router = APIGatewayRouter()


@router.get("/rooms/<room_id>/members", tags=["members"], summary="Member companies and agents of a room")
def list_members(room_id: RoomId, limit: Limit = 200, cursor: Cursor = None) -> MembersPage:
    """The room with its member companies (at most the room's member limit) and a page of its
    agents in id order, at most `limit` and about 1 MB of JSON (docs/design.md §14);
    `next_cursor` continues the agents."""
    room, agents = services().rooms.members_page(caller(), room_id, limit, cursor)
    page = fit(agents.map(lambda a: RoomAgentOut(id=a[0], name=ids.agent_name(a[0]), company=a[1])))
    out = room_out(RoomView(room=room, agents={}))
    return MembersPage(**{**out.model_dump(), "agents": page.items}, next_cursor=page.next_cursor)


@router.post(
    "/rooms/<room_id>/members",
    status_code=201,
    tags=["members"],
    summary="Invite a company to the room (by a person of a member company)",
)
def add_member(room_id: RoomId, body: Annotated[MemberIn, Body()]) -> Invited:
    """The company is invited, not yet a member (docs/design.md §5): it sees the invitation
    (`GET /invitations`), not the room, until a person of it accepts
    (`POST /rooms/{room}/invitations/accept`). A pending invitation holds a seat: 409
    `limit_reached` when members and invitations fill the room; 409 when it is a member or
    invited already; 400 for no such company."""
    return Invited(**services().rooms.invite(caller(), room_id, body.company))


@router.post(
    "/rooms/<room_id>/agents",
    status_code=201,
    tags=["members"],
    summary="Place one of the caller's company's agents in the room",
)
def add_agent(room_id: RoomId, body: Annotated[RoomAgentIn, Body()]) -> RoomOut:
    return room_out(services().rooms.place_agent(caller(), room_id, body.agent))
