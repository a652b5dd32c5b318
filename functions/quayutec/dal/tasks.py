"""Tasks and their events in the room table: created with their ``created`` event in one
transaction, updated and closed by conditional writes on the open task; GSI ``open_tasks`` holds
the open ones (design §2, §14)."""

from __future__ import annotations

from typing import Any

from quayutec.dal import keys
from quayutec.dal.aws import (
    Guard,
    paginate_query,
    transact_guarded,
)
from quayutec.dal.pages import KeySpec, Page, decode_cursor, query_rows
from quayutec.dal.table import NOT_EXISTS, RoomTable, strip, wakes_attrs
from quayutec.models import (
    Task,
    TaskEvent,
    Wake,
)

#: The key of a task on ``by_time`` (a page cursor's key): the table's and the index's.
TASK_KEY = ("pk", "sk", "gsi2pk", "gsi2sk")


class TaskRecords(RoomTable):
    """A room's tasks (``TASK#``) and task events (``TEV#``)."""

    def _task_item(self, task: Task) -> dict[str, Any]:
        item = {
            **keys.task_key(task.room_id, task.id),
            "type": "task",
            "gsi2pk": keys.tasks_by_time_pk(task.room_id),
            "gsi2sk": keys.time_sk(task.created_at, task.id),
            **task.model_dump(mode="json", exclude_none=True),
            "gsi4pk": keys.changes_pk(task.room_id, "tasks"),
            "gsi4sk": keys.change_sk(task.updated_at or task.created_at, task.id),
        }
        if task.status == "open":
            item["gsi1pk"] = keys.open_tasks_pk(task.room_id, task.to)
            item["gsi1sk"] = keys.time_sk(task.created_at, task.id)
        return item

    def _event_item(self, event: TaskEvent, wakes: list[Wake] | None) -> dict[str, Any]:
        item = {
            **keys.task_event_key(event.room_id, event.task_id, event.id),
            "type": "task_event",
            **event.model_dump(mode="json", exclude_none=True),
        }
        if wakes:
            item.update(wakes_attrs(wakes))
        return item

    def create_task(
        self, task: Task, event: TaskEvent, wakes: list[Wake] | None = None, guard: Guard | None = None
    ) -> bool:
        """Write a task and its ``created`` event in one transaction, once. ``False`` when the
        task id already exists (a repeat). ``guard``: a run's stop guard (raises RunStopped)."""
        return (
            transact_guarded(
                self.db,
                [
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": self._task_item(task),
                            "ConditionExpression": NOT_EXISTS,
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": self._event_item(event, wakes),
                            "ConditionExpression": NOT_EXISTS,
                        }
                    },
                ],
                guard,
            )
            is None
        )

    def add_task_event(self, event: TaskEvent, wakes: list[Wake] | None = None, guard: Guard | None = None) -> str:
        """Write an ``update`` or ``close`` event on an open task, once.

        Returns ``"written"``, ``"exists"`` (this event id was written before: a repeat) or
        ``"task_closed"`` (the task is closed or gone: nothing written). ``guard``: a run's
        stop guard (raises RunStopped).
        """
        updates: dict[str, Any] = {
            "Update": {
                "TableName": self.table,
                "Key": keys.task_key(event.room_id, event.task_id),
                "ConditionExpression": "attribute_exists(pk) AND #s = :open",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {
                    ":open": "open",
                    ":now": event.created_at,
                    ":chg": keys.change_sk(event.created_at, event.task_id),  # the changes feed (design §14)
                },
                "UpdateExpression": "SET updated_at = :now, gsi4sk = :chg",
            }
        }
        if event.kind == "close":
            upd = updates["Update"]
            upd["UpdateExpression"] = (
                "SET updated_at = :now, gsi4sk = :chg, #s = :closed, #r = :result REMOVE gsi1pk, gsi1sk"
            )
            upd["ExpressionAttributeNames"]["#r"] = "result"
            upd["ExpressionAttributeValues"].update({":closed": "closed", ":result": event.text})
        failed = transact_guarded(
            self.db,
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": self._event_item(event, wakes),
                        "ConditionExpression": NOT_EXISTS,
                    }
                },
                updates,
            ],
            guard,
        )
        if failed is None:
            return "written"
        return "exists" if failed[0] else "task_closed"

    def get_task(self, room_id: str, task_id: str) -> Task | None:
        item = self._item(keys.task_key(room_id, task_id))
        return Task.model_validate(strip(item)) if item else None

    def open_tasks_for(self, room_id: str, agent_id: str, limit: int) -> list[Task]:
        """The newest ``limit`` open tasks sent to an agent, oldest first (a bounded query on the
        sparse GSI, continued past a page DynamoDB cut short: :meth:`_query_up_to`)."""
        items = self._query_up_to(
            limit,
            IndexName="open_tasks",
            KeyConditionExpression="gsi1pk = :pk",
            ExpressionAttributeValues={":pk": keys.open_tasks_pk(room_id, agent_id)},
            ScanIndexForward=False,
        )
        return [Task.model_validate(strip(i)) for i in reversed(items)]

    def all_tasks(self, room_id: str) -> list[Task]:
        """Every task of a room in creation order: one consistent query of the room's ``TASK#``
        items (by id), put in order here; no index (design §14)."""
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": keys.room_pk(room_id), ":p": keys.TASK_PREFIX},
            ConsistentRead=True,
        )
        return sorted((Task.model_validate(strip(i)) for i in items), key=lambda t: (t.created_at, t.id))

    def tasks_page(self, room_id: str, limit: int, cursor: str | None = None, status: str = "all") -> Page:
        """One page of the room's tasks in creation order (part ``tasks``), from ``cursor`` on:
        one bounded query of the room's ``by_time`` task partition (design §14); ``status``
        ``open`` / ``closed`` filters (bounded reads: a page may be short and still have a next
        cursor), ``all`` does not. The cursor binds the room and the status. Raises
        InvalidInput (a cursor this listing did not hand out), TransientError."""
        pk = keys.tasks_by_time_pk(room_id)
        listing = f"tasks:{status}:{room_id}"
        spec = KeySpec({"pk": keys.room_pk(room_id), "gsi2pk": pk}, {"sk": keys.TASK_PREFIX, "gsi2sk": ""})
        start = decode_cursor(cursor, listing, {"tasks": spec})["tasks"]
        query: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "by_time",
            "KeyConditionExpression": "gsi2pk = :pk",
            "ExpressionAttributeValues": {":pk": pk},
        }
        if status != "all":
            query["FilterExpression"] = "#s = :s"
            query["ExpressionAttributeNames"] = {"#s": "status"}
            query["ExpressionAttributeValues"] = {":pk": pk, ":s": status}
        rows = query_rows(self.db, query, limit, start, TASK_KEY, filtered=status != "all")
        return Page(listing, {"tasks": rows.map(lambda i: Task.model_validate(strip(i)))})

    def task_events(self, room_id: str, task_id: str, limit: int = 100) -> list[TaskEvent]:
        items = self._query(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": keys.room_pk(room_id), ":p": keys.task_event_prefix(task_id)},
            Limit=limit,
        )
        return sorted((TaskEvent.model_validate(strip(i)) for i in items), key=lambda e: e.created_at)

    def get_task_event(self, room_id: str, task_id: str, event_id: str) -> TaskEvent | None:
        item = self._item(keys.task_event_key(room_id, task_id, event_id))
        return TaskEvent.model_validate(strip(item)) if item else None
