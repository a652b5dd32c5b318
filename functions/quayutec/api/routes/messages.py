"""Messages: a person posts as themselves (the author is the authenticated caller, never a body
field); the room's transcript is read page by page, without other companies' company-only
notices (design §12.5)."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller, idempotency_key
from quayutec.api.pages import fit
from quayutec.api.routes._params import Cursor, Limit, RoomId
from quayutec.api.schemas import MessageIn, MessagePage
from quayutec.models import Message

router = APIGatewayRouter()


@router.post(
    "/rooms/<room_id>/messages",
    status_code=201,
    tags=["messages"],
    summary="Post a message (wakes the agents in `to` and those it @mentions)",
)
def post_message(room_id: RoomId, body: Annotated[MessageIn, Body()]) -> Message:
    return services().messages.post(caller(), room_id, body.text, body.to, idempotency_key=idempotency_key())


@router.get("/rooms/<room_id>/messages", tags=["messages"], summary="The room's messages, a page at a time")
def list_messages(
    room_id: RoomId,
    limit: Limit = 50,
    cursor: Cursor = None,
    order: Annotated[Literal["asc", "desc"], Query(description="asc: oldest first")] = "asc",
) -> MessagePage:
    """At most `limit` messages and about 1 MB of JSON (docs/design.md §14); `next_cursor`
    continues in the same order."""
    page = fit(services().messages.page(caller(), room_id, limit, cursor, newest_first=order == "desc"))
    return MessagePage(messages=page.parts["messages"], next_cursor=page.next_cursor)
