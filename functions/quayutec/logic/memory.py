"""A room's memory lines as its members' people see them (docs/design.md §5): a caller reads the
room-wide lines and its own company's (another company's ``company`` lines are never shown) and
adds lines of either visibility. The domain service of ``/rooms/{id}/memory``."""

from __future__ import annotations

import uuid

from quayutec.dal.pages import Page
from quayutec.deps import Deps
from quayutec.errors import Conflict
from quayutec.logic.access import Principal, member_room
from quayutec.models import MemoryLine, Visibility, now_iso


class Memory:
    """``deps``: the runtime's stores."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room

    def page(self, who: Principal, room_id: str, limit: int, cursor: str | None = None) -> Page:
        """One page of the lines the caller's company may read, newest first
        (:meth:`quayutec.dal.memory.MemoryRecords.memory_page`). Raises NotFound, InvalidInput."""
        member_room(self.store, room_id, who)
        return self.store.memory_page(room_id, who.require_company(), limit, cursor)

    def add(
        self, who: Principal, room_id: str, text: str, visibility: Visibility, idempotency_key: str | None = None
    ) -> MemoryLine:
        """Add a line; a repeat of ``idempotency_key`` (scoped to caller and path) answers the
        stored line. Raises NotFound, Conflict (the key was used for another line)."""
        member_room(self.store, room_id, who)
        key = idempotency_key
        line = MemoryLine(
            id=f"mem-{key[:24]}" if key else f"mem-{uuid.uuid4().hex[:24]}",
            room_id=room_id,
            text=text,
            visibility=visibility,
            company=who.require_company(),
            author=who.author(),
            created_at=now_iso(),
        )
        if not self.store.put_memory(line):  # a repeat of the key, maybe after its record expired
            stored = self.store.get_memory(room_id, line.visibility, line.company, line.id)
            if stored is None or stored.text != line.text:
                raise Conflict(
                    "this Idempotency-Key was used for another memory line: nothing written "
                    "(use a new key for a new line)"
                )
            return stored  # the earlier write, as stored: never text that was not
        return line
