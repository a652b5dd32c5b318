"""Memory lines: a caller reads the room-wide lines and its own company's; `company` lines of
another company are never shown (design §5)."""

from __future__ import annotations

import uuid
from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import member_room, services
from quayutec.api.context import caller, idempotency_key
from quayutec.api.routes._params import Limit, RoomId
from quayutec.api.schemas import MemoryIn, MemoryList
from quayutec.errors import Conflict
from quayutec.models import MemoryLine, now_iso

router = APIGatewayRouter()


@router.get("/rooms/<room_id>/memory", tags=["memory"], summary="The memory lines the caller's company may read")
def list_memory(room_id: RoomId, limit: Limit = 100) -> MemoryList:
    who = caller()
    svc = services()
    member_room(svc, room_id, who)
    return MemoryList(lines=svc.deps.room.memory_for(room_id, who.require_company(), limit))


@router.post("/rooms/<room_id>/memory", status_code=201, tags=["memory"], summary="Add a memory line")
def add_memory(room_id: RoomId, body: Annotated[MemoryIn, Body()]) -> MemoryLine:
    who = caller()
    svc = services()
    member_room(svc, room_id, who)
    key = idempotency_key()
    line = MemoryLine(
        id=f"mem-{key[:24]}" if key else f"mem-{uuid.uuid4().hex[:24]}",  # key: scoped to caller and path
        room_id=room_id,
        text=body.text,
        visibility=body.visibility,
        company=who.require_company(),
        author=who.author(),
        created_at=now_iso(),
    )
    if not svc.deps.room.put_memory(line):  # a repeat of the key, maybe after its record expired
        stored = svc.deps.room.get_memory(room_id, line.visibility, line.company, line.id)
        if stored is None or stored.text != line.text:
            raise Conflict(
                "this Idempotency-Key was used for another memory line: nothing written (use a new key for a new line)"
            )
        return stored  # the earlier write, as stored: never text that was not
    return line
