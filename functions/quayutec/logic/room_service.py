"""What people (and outside systems) do in a room: post messages, create, update and close tasks,
add memory lines. One domain service used by the API and the local scenario player alike.

Every write carries its wakes on the written item (the stream is the outbox, design §3).
"""

from __future__ import annotations

import hashlib
import uuid

from quayutec.dal.store import RoomStore
from quayutec.errors import Conflict, Forbidden, InvalidInput, NotFound
from quayutec.logic import ids
from quayutec.logic import wakes as wake_rules
from quayutec.models import MAX_REPLY_BYTES, Author, Company, Message, Room, Task, TaskEvent, now_iso


def _new_id(prefix: str, idempotency_key: str | None) -> str:
    if idempotency_key:
        return f"{prefix}-{hashlib.sha256(idempotency_key.encode()).hexdigest()[:24]}"
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


#: A person's message: its first distinct @refs resolved against the room (with its ``to``, at
#: most 50, at most three reads of 99 keys whatever the room's size; docs/design.md §3).
MAX_MENTION_REFS = 3 * 99 - 50


class RoomService:
    def __init__(self, room: RoomStore) -> None:
        self.store = room

    # ------------------------------------------------------------------ who is who
    def member_room(self, room_id: str, company_id: str) -> Room:
        """The room, when ``company_id`` is one of its members. Raises NotFound / Forbidden."""
        room = self.store.get_room(room_id)
        if room is None:
            raise NotFound(f"room {room_id!r} does not exist")
        if company_id not in room.members:
            raise Forbidden(f"company {company_id!r} is not a member of room {room_id!r}")
        return room

    def person(self, person_id: str, company_id: str) -> Author:
        company: Company | None = self.store.get_company(company_id)
        if company is None or person_id not in company.people:
            raise Forbidden(f"{person_id!r} is not a person of company {company_id!r}")
        return Author(kind="person", id=person_id, company=company_id)

    def task_companies(self, task: Task) -> set[str]:
        """The companies that may update or close ``task``: its creator's and its assignee's."""
        companies = {task.created_by.company} if task.created_by.company else set()
        assignee = self.store.get_agent(task.to)
        if assignee is not None:
            companies.add(assignee.company)
        return companies

    def _room_agents(self, room_id: str, refs: list[str], agents: dict[str, str] | None = None) -> list[str]:
        """The ids of the room's agents ``refs`` name (ids or names, ids.resolve_agent). Raises
        InvalidInput naming the refs that are no agent of the room. ``agents``: the room's agents
        the caller read already (:meth:`_named`), else they are read, bounded by ``refs``."""
        if not refs:
            return []
        known = agents if agents is not None else self._named(room_id, refs)
        resolved = [(r, ids.resolve_agent(r, known)) for r in refs]
        unknown = [r for r, a in resolved if a is None]
        if unknown:
            raise InvalidInput(f"not agents of room {room_id!r}: {', '.join(unknown)}")
        return list(dict.fromkeys(a for _, a in resolved if a is not None))

    def _named(self, room_id: str, refs: list[str]) -> dict[str, str]:
        """The room's agents ``refs`` name → their companies: a read per 99 distinct refs whatever
        the room's size (the callers bound them)."""
        return self.store.named_room_agents(room_id, list(dict.fromkeys(refs)))

    # ------------------------------------------------------------------ messages
    def post_message(
        self, room_id: str, author: Author, text: str, to: list[str] | None = None, idempotency_key: str | None = None
    ) -> Message:
        """Post a person's message; it wakes the agents in ``to`` and those it @mentions.

        Raises InvalidInput (empty or over 32 KiB text, unknown recipient), NotFound, Forbidden.
        """
        if not text.strip():
            raise InvalidInput("text must not be empty")
        if len(text.encode()) > MAX_REPLY_BYTES:
            raise InvalidInput(f"text is longer than {MAX_REPLY_BYTES} bytes")
        self.member_room(room_id, author.company or "")
        # ``to`` (at most 50) and the text's first distinct @refs: one bounded read of the room
        refs = list(dict.fromkeys(wake_rules.MENTION.findall(text)))[:MAX_MENTION_REFS]
        agents = self._named(room_id, list(to or []) + refs)
        recipients = self._room_agents(room_id, list(to or []), agents)
        mentioned = wake_rules.mentions(text, agents)
        msg = Message(
            id=_new_id("msg", idempotency_key),
            room_id=room_id,
            author=author,
            text=text,
            to=recipients,
            mentions=mentioned,
            created_at=now_iso(),
        )
        wakes = wake_rules.person_message_wakes(msg, recipients + mentioned)
        if not self.store.put_message(msg, wakes):
            existing = self.store.get_message(room_id, msg.id)
            # A repeat answers the stored message: never one the author's company may not read
            if existing is None or not existing.visible_to_company(author.company or ""):
                raise Conflict("message id collision")
            return existing
        return msg

    # ------------------------------------------------------------------ tasks
    def create_task(
        self, room_id: str, author: Author, to: str, title: str, body: str, idempotency_key: str | None = None
    ) -> Task:
        """Create a task sent to agent ``to``; it wakes that agent (hop 0)."""
        if not title.strip():
            raise InvalidInput("title must not be empty")
        self.member_room(room_id, author.company or "")
        (to,) = self._room_agents(room_id, [to])
        now = now_iso()
        task = Task(
            id=_new_id("task", idempotency_key),
            room_id=room_id,
            title=title,
            body=body,
            to=to,
            created_by=author,
            created_at=now,
            updated_at=now,
        )
        event = TaskEvent(
            id=f"tev-{task.id}-created",
            room_id=room_id,
            task_id=task.id,
            kind="created",
            text=title,
            by=author,
            created_at=now,
        )
        wakes = wake_rules.task_event_wakes(
            room_id, task.id, event.id, [to], hop=0, exclude=None, by_kind="person", by_company=author.company
        )
        if not self.store.create_task(task, event, wakes):
            existing = self.store.get_task(room_id, task.id)
            if existing is None:
                raise Conflict("task id collision")
            return existing
        return task

    def task_event(
        self, room_id: str, author: Author, task_id: str, kind: str, text: str, idempotency_key: str | None = None
    ) -> TaskEvent:
        """A person's ``update`` (a note) or ``close`` (a result) on an open task; it wakes the
        assignee and the agent that created the task. Only a person of the task creator's or the
        assignee's company may (design §5). Raises NotFound, Forbidden, Conflict (closed)."""
        if kind not in ("update", "close"):
            raise InvalidInput("kind must be 'update' or 'close'")
        self.member_room(room_id, author.company or "")
        task = self.store.get_task(room_id, task_id)
        if task is None:
            raise NotFound(f"task {task_id!r} is not in room {room_id!r}")
        if author.company not in self.task_companies(task):
            raise Forbidden(f"only the companies of task {task_id!r}'s creator and assignee may {kind} it")
        event = TaskEvent(
            id=_new_id("tev", idempotency_key),
            room_id=room_id,
            task_id=task_id,
            kind=kind,
            text=text,
            by=author,
            created_at=now_iso(),
        )
        wakes = wake_rules.task_event_wakes(
            room_id,
            task_id,
            event.id,
            wake_rules.task_watchers(task),
            hop=0,
            exclude=None,
            by_kind="person",
            by_company=author.company,
        )
        result = self.store.add_task_event(event, wakes)
        if result == "exists":  # a repeat of the same key, maybe after its idempotency record expired
            stored = self.store.get_task_event(room_id, task_id, event.id)
            if stored is None or (stored.kind, stored.text) != (event.kind, event.text):
                raise Conflict(
                    f"this Idempotency-Key was used for another {kind} of task {task_id!r}: nothing written "
                    "(use a new key for a new request)"
                )
            return stored  # the earlier write, as stored: never text that was not
        if result == "task_closed":
            raise Conflict(f"task {task_id!r} is closed")
        return event
