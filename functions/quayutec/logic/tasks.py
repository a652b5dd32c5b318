"""A room's tasks as its members' people see them (docs/design.md §2, §5): created for an agent
of the room, updated with a note and closed with a result by a person of the creator's or the
assignee's company, listed and read with their events. The domain service of
``/rooms/{id}/tasks``."""

from __future__ import annotations

from typing import Literal

from quayutec.dal.pages import Page
from quayutec.deps import Deps
from quayutec.errors import NotFound
from quayutec.logic.access import Principal, member_room
from quayutec.logic.room_service import RoomService
from quayutec.models import Task, TaskEvent


class Tasks:
    """``deps``: the runtime's stores."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room

    def create(
        self, who: Principal, room_id: str, to: str, title: str, body: str, idempotency_key: str | None = None
    ) -> Task:
        """A task for agent ``to`` of the room (:meth:`RoomService.create_task`). Raises NotFound,
        InvalidInput."""
        member_room(self.store, room_id, who)
        return RoomService(self.store).create_task(
            room_id, who.author(), to, title, body, idempotency_key=idempotency_key
        )

    def get(self, who: Principal, room_id: str, task_id: str) -> tuple[Task, list[TaskEvent]]:
        """A task of the room and its events. Raises NotFound."""
        member_room(self.store, room_id, who)
        task = self.store.get_task(room_id, task_id)
        if task is None:
            raise NotFound(f"task {task_id!r} is not in room {room_id!r}")
        return task, self.store.task_events(room_id, task_id)

    def event(
        self,
        who: Principal,
        room_id: str,
        task_id: str,
        kind: Literal["update", "close"],
        text: str,
        idempotency_key: str | None = None,
    ) -> TaskEvent:
        """A note (``update``) or a result (``close``) on an open task
        (:meth:`RoomService.task_event`). Raises NotFound, Forbidden, Conflict (closed)."""
        member_room(self.store, room_id, who)
        return RoomService(self.store).task_event(
            room_id, who.author(), task_id, kind, text, idempotency_key=idempotency_key
        )

    def page(
        self,
        who: Principal,
        room_id: str,
        limit: int,
        cursor: str | None = None,
        status: Literal["open", "closed", "all"] = "open",
    ) -> Page:
        """One page of the room's tasks of ``status``, in creation order (part ``tasks``,
        :meth:`quayutec.dal.tasks.TaskRecords.tasks_page`). Raises NotFound, InvalidInput."""
        member_room(self.store, room_id, who)
        return self.store.tasks_page(room_id, limit, cursor, status)
