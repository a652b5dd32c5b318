"""Room membership: the member companies and the agents placed in the room."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.routes._params import RoomId
from quayutec.api.routes.rooms import room_out
from quayutec.api.schemas import MemberIn, RoomAgentIn, RoomOut

router = APIGatewayRouter()


@router.get("/rooms/<room_id>/members", tags=["members"], summary="Member companies and agents of a room")
def list_members(room_id: RoomId) -> RoomOut:
    return room_out(services().rooms.get(caller(), room_id))


@router.post(
    "/rooms/<room_id>/members",
    status_code=201,
    tags=["members"],
    summary="Add a company to the room (by a person of a member company)",
)
def add_member(room_id: RoomId, body: Annotated[MemberIn, Body()]) -> RoomOut:
    return room_out(services().rooms.add_member(caller(), room_id, body.company))


@router.post(
    "/rooms/<room_id>/agents",
    status_code=201,
    tags=["members"],
    summary="Place one of the caller's company's agents in the room",
)
def add_agent(room_id: RoomId, body: Annotated[RoomAgentIn, Body()]) -> RoomOut:
    return room_out(services().rooms.place_agent(caller(), room_id, body.agent))
