"""A room's messages as its members' people see them (docs/design.md §3, §5): a person posts as
themselves (the author is the caller, never a body field) and reads the transcript a page at a
time, without other companies' company-only notices. The domain service of
``/rooms/{id}/messages``."""

from __future__ import annotations

from quayutec.dal.pages import Page
from quayutec.deps import Deps
from quayutec.errors import PayloadTooLarge
from quayutec.logic.access import Principal, member_room
from quayutec.logic.room_service import RoomService
from quayutec.models import MAX_REPLY_BYTES, Message


class Messages:
    """``deps``: the runtime's stores."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room

    def post(
        self, who: Principal, room_id: str, text: str, to: list[str], idempotency_key: str | None = None
    ) -> Message:
        """Post the caller's message; it wakes the agents in ``to`` and those it @mentions
        (:meth:`quayutec.logic.room_service.RoomService.post_message`). Raises NotFound,
        PayloadTooLarge (a text over 32 KiB of UTF-8), InvalidInput."""
        member_room(self.store, room_id, who)
        if len(text.encode("utf-8", "surrogatepass")) > MAX_REPLY_BYTES:
            raise PayloadTooLarge(f"body.text: longer than {MAX_REPLY_BYTES} bytes (32 KiB) of UTF-8")
        return RoomService(self.store).post_message(
            room_id, who.author(), text, list(dict.fromkeys(to)), idempotency_key=idempotency_key
        )

    def page(
        self, who: Principal, room_id: str, limit: int, cursor: str | None = None, newest_first: bool = False
    ) -> Page:
        """One page of the messages the caller's company may read (part ``messages``,
        :meth:`quayutec.dal.messages.MessageRecords.messages_page`). Raises NotFound,
        InvalidInput (a cursor this listing did not hand out)."""
        member_room(self.store, room_id, who)
        # Other companies' company-only notices are not the caller's to read (design §12.5).
        return self.store.messages_page(room_id, limit, cursor, newest_first=newest_first, reader=who.require_company())
