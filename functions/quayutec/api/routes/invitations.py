"""Rooms by consent (docs/design.md §5): a company's pending invitations, a person of the invited
company accepting or declining one, and a company leaving a room."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.routes._params import RoomId
from quayutec.api.routes.rooms import room_out
from quayutec.api.schemas import Declined, InvitationList, InvitationOut, Left, RoomOut

router = APIGatewayRouter()


@router.get("/invitations", tags=["members"], summary="The caller's company's pending room invitations")
def list_invitations() -> InvitationList:
    """The rooms the caller's company is invited to and has not answered yet, in room id order:
    the company sees such a room only once a person of it accepts (docs/design.md §5)."""
    found = services().rooms.invitations(caller())
    return InvitationList(invitations=[InvitationOut(**i) for i in found])


@router.post(
    "/rooms/<room_id>/invitations/accept",
    tags=["members"],
    summary="Accept the caller's company's invitation to a room",
)
def accept_invitation(room_id: RoomId) -> RoomOut:
    """The caller's company becomes a member of the room (docs/design.md §5). 404 without a
    pending invitation; 409 `limit_reached` when the room is full."""
    return room_out(services().rooms.accept(caller(), room_id))


@router.post(
    "/rooms/<room_id>/invitations/decline",
    tags=["members"],
    summary="Decline the caller's company's invitation to a room",
)
def decline_invitation(room_id: RoomId) -> Declined:
    """The invitation is gone; the room stays unseen (docs/design.md §5). 404 without one."""
    company = caller().require_company()
    services().rooms.decline(caller(), room_id)
    return Declined(room_id=room_id, declined=company)


@router.post("/rooms/<room_id>/leave", tags=["members"], summary="The caller's company leaves a room")
def leave_room(room_id: RoomId) -> Left:
    """The caller's company is no longer a member: it no longer sees the room (docs/design.md
    §5); its agents are taken out of it and their runs there stop (§12.2: ``stopping`` counts
    those waiting on approvals it ended). 404 when it is not a member; 409 when the room
    changed meanwhile (retry); 503 when Step Functions did not take a stop (retry)."""
    company = caller().require_company()
    stopping = services().rooms.leave(caller(), room_id)
    return Left(room_id=room_id, left=company, stopping=stopping)
