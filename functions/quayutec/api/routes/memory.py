"""Memory lines: a caller reads the room-wide lines and its own company's; `company` lines of
another company are never shown (design §5)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller, idempotency_key
from quayutec.api.pages import fit
from quayutec.api.routes._params import Cursor, Limit, RoomId
from quayutec.api.schemas import MemoryIn, MemoryList
from quayutec.models import MemoryLine

router = APIGatewayRouter()


@router.get("/rooms/<room_id>/memory", tags=["memory"], summary="The memory lines the caller's company may read")
def list_memory(room_id: RoomId, limit: Limit = 100, cursor: Cursor = None) -> MemoryList:
    """Newest first, at most `limit` lines and about 1 MB of JSON a page (docs/design.md §14);
    `next_cursor` continues with older lines."""
    page = fit(services().memory.page(caller(), room_id, limit, cursor))
    return MemoryList(lines=page.items, next_cursor=page.next_cursor)


@router.post("/rooms/<room_id>/memory", status_code=201, tags=["memory"], summary="Add a memory line")
def add_memory(room_id: RoomId, body: Annotated[MemoryIn, Body()]) -> MemoryLine:
    # the key: scoped to caller and path (an id derived from it)
    return services().memory.add(caller(), room_id, body.text, body.visibility, idempotency_key=idempotency_key())
