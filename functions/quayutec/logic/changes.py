"""A room's changes since a cursor, in one request (docs/design.md §9): new messages and the
tasks, approvals, runs and files created or changed since, with the cursor to ask from next. The
domain service of ``GET /rooms/{id}/changes``: what the room page polls, so a quiet page costs
one small request per poll however many lists it shows.

Bounds: at most ``limit`` items of each kind, and at most :data:`MAX_CHANGES_BYTES` of items in
all as the API serializes them (escapes included): a kind cut short keeps its position at the
last item sent and ``more`` says to ask again at once. Each kind is one bounded Query of an index
by the time of the last change (:mod:`quayutec.dal.changes`; messages: up to
:data:`quayutec.dal.messages.VISIBLE_READS` past other companies' notices), whatever the room's
history. Who sees what is what the listings show: the members' messages without other companies'
company-only notices (§12.5), every task and file of the room, the caller's company's own
approvals and runs (§14)."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field

from quayutec.dal.changes import ChangeReads, DeletedFile, KindPage
from quayutec.deps import Deps
from quayutec.errors import InvalidInput
from quayutec.logic.access import Principal, member_room
from quayutec.logic.files import as_seen
from quayutec.models import (
    ApprovalRequest,
    Message,
    MessageNotWoken,
    NotWokenWhy,
    RoomFile,
    RunRecord,
    Task,
    now_iso,
)

#: The kinds of a changes answer, in the order they are filled (messages first: the transcript).
KINDS = ("messages", "approvals", "tasks", "runs", "files")
#: Items of all kinds in one answer, in bytes of the API's JSON (``ensure_ascii``: each
#: non-ASCII character or control byte counted as its escape): far under Lambda's 6 MB answer,
#: even with API Gateway's envelope escaping the body once more.
MAX_CHANGES_BYTES = 1024 * 1024
#: Items of one kind in one answer, by default and at most.
DEFAULT_LIMIT = 50
MAX_LIMIT = 100
#: The cursor's position on the ledger's ``live_by_room`` index (refused wakes; absent from a
#: cursor of before it: read from the messages' position).
LIVE = "live"
#: The reasons a member reads of a refused wake (models.NotWokenWhy): every claim refusal.
_NOT_WOKEN_WHY = frozenset(get_args(NotWokenWhy))
_BAD_CURSOR = "since: not a cursor this API returned for this room (omit it to start from now)"


class _Cursor(BaseModel):
    """What a changes cursor holds: the room and, per kind, the index position read up to."""

    model_config = ConfigDict(extra="forbid", strict=True)
    v: int = Field(ge=1, le=1)
    room: str = Field(max_length=128)
    at: dict[str, str] = Field(max_length=len(KINDS) + 1)


def encode_cursor(room_id: str, positions: dict[str, str]) -> str:
    raw = json.dumps({"v": 1, "room": room_id, "at": positions}, sort_keys=True, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, room_id: str) -> dict[str, str]:
    """A changes cursor back to its positions, checked to be this room's. Raises InvalidInput."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parsed = _Cursor.model_validate_json(raw)  # pydantic's parser: bounded, never a RecursionError
    except (binascii.Error, ValueError):  # pydantic's ValidationError is a ValueError
        raise InvalidInput(_BAD_CURSOR) from None
    at = parsed.at
    if parsed.room != room_id or set(at) - {LIVE} != set(KINDS) or any(not p or len(p) > 512 for p in at.values()):
        raise InvalidInput(_BAD_CURSOR)
    at.setdefault(LIVE, at["messages"])
    return at


def json_size(item: BaseModel) -> int:
    """Bytes of ``item`` as the API's serializer writes it (``json.dumps``, ASCII escapes)."""
    return len(json.dumps(item.model_dump(mode="json"), separators=(",", ":")))


@dataclass
class RoomChanges:
    """What changed since the cursor, oldest change first per kind; ``cursor``: where the next
    call starts; ``more``: some kind was cut short (by ``limit`` or bytes): call again now.
    ``busy_agents``: the room's agents with a run in flight now; ``not_woken``: the wakes of
    messages the claim refused since the cursor (what every member may know, design §9)."""

    cursor: str
    more: bool = False
    messages: list[Message] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    approvals: list[ApprovalRequest] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)
    files: list[RoomFile] = field(default_factory=list)
    busy_agents: list[str] = field(default_factory=list)
    not_woken: list[MessageNotWoken] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)  # ids of files deleted since


class Changes:
    """``deps``: the runtime's stores."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room
        self.reads = ChangeReads(deps.room, deps.ledger)

    def since(self, who: Principal, room_id: str, cursor: str | None, limit: int = DEFAULT_LIMIT) -> RoomChanges:
        """The room's changes since ``cursor`` (a ``cursor`` of an earlier answer; ``None``: from
        now on, nothing yet: the answer is only a cursor). Raises Forbidden (an operator),
        NotFound (no such room, or the caller's company not a member), InvalidInput (a cursor
        this API did not return for this room; ``limit`` outside 1..100)."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit: between 1 and {MAX_LIMIT}")
        member_room(self.store, room_id, who)
        company = who.require_company()
        if cursor is None:
            now = now_iso()
            _, busy, _ = self.deps.ledger.live_since(room_id, now)
            return RoomChanges(cursor=encode_cursor(room_id, dict.fromkeys((*KINDS, LIVE), now)), busy_agents=busy)
        at = decode_cursor(cursor, room_id)
        out = RoomChanges(cursor="")
        self._live(room_id, at, out)
        budget = MAX_CHANGES_BYTES
        for kind in KINDS:
            if budget <= 0:
                out.more = True  # this kind waits for the next call, at its position
                continue
            page = self._read(kind, room_id, company, at[kind], limit)
            taken: list[Any] = []
            for position, item in page.items:
                if isinstance(item, DeletedFile):  # an id: a few bytes, within any budget left
                    out.deleted_files.append(item.id)
                    budget -= len(item.id) + 3
                    at[kind] = position
                    continue
                shown = as_seen(item, self.deps.clock()) if kind == "files" else item
                size = json_size(shown)
                if size > budget and (taken or out.deleted_files or any(getattr(out, k) for k in KINDS)):
                    page.more, budget = True, 0  # the rest of this kind waits for the next call
                    break
                budget -= size
                taken.append(shown)
                at[kind] = position
            else:
                if page.position is not None:
                    at[kind] = page.position  # past hidden notices too (an empty page that moved on)
            getattr(out, kind).extend(taken)
            out.more = out.more or page.more
        out.cursor = encode_cursor(room_id, at)
        return out

    def _live(self, room_id: str, at: dict[str, str], out: RoomChanges) -> None:
        """The room's busy agents and the refused wakes of messages past ``at[LIVE]`` (one
        bounded Query, :meth:`quayutec.dal.ledger.LedgerStore.live_since`): into ``out``,
        moving ``at[LIVE]`` past what was read."""
        refusals, out.busy_agents, more = self.deps.ledger.live_since(room_id, at[LIVE])
        for position, r in refusals:
            at[LIVE] = position
            if r.cause_kind == "message" and r.reason in _NOT_WOKEN_WHY:
                out.not_woken.append(
                    MessageNotWoken.model_validate({"message_id": r.cause_id, "agent": r.agent_id, "why": r.reason})
                )
        out.more = out.more or more

    def _read(self, kind: str, room_id: str, company: str, after: str, limit: int) -> KindPage:
        if kind == "messages":
            return self.reads.messages(room_id, after, limit, reader=company)
        if kind == "approvals":
            return self.reads.approvals(room_id, company, after, limit)
        if kind == "runs":
            return self.reads.runs(room_id, company, after, limit)
        if kind == "tasks":
            return self.reads.tasks(room_id, after, limit)
        return self.reads.files(room_id, after, limit)
