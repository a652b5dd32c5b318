"""The room table (single-table design, its stream is the wake outbox; SPEC §3).

Item layout (pk / sk):

* ``COMPANY#{id}`` / ``META`` — a company, its people and rights policy
* ``AGENT#{id}`` / ``META`` — an always-on agent's configuration (no key: keys live in Secrets Manager)
* ``ROOM#{id}`` / ``META`` — a room; ``MEMBER#{company}`` and ``AGENT#{agent}`` its members
* ``ROOM#{id}`` / ``MSG#{msg}`` — a message (LSI ``by_time``: ``MSG#{created_at}#{msg}``)
* ``ROOM#{id}`` / ``TASK#{task}`` — a task (LSI: creation order; GSI ``open_tasks``:
  ``OPEN#{room}#{assignee}`` while open — a sparse index)
* ``ROOM#{id}`` / ``TEV#{task}#{event}`` — a task event (created / update / close)
* ``ROOM#{id}`` / ``APPROVAL#{run}#{index}`` — an approval request
* ``ROOM#{id}`` / ``OUTBOX#{id}`` — the wakes of a run's action writes
* ``ROOM#{id}#MEM#room`` and ``ROOM#{id}#MEM#company#{c}`` / ``MEM#{id}`` — memory lines
* ``ROOM#{id}#FILES`` / ``FILE#{file}`` and ``INDEX`` — room files and the index pointer
  (:mod:`quayutec.dal.files`)

Any item may carry ``wakes`` (a list of :class:`~quayutec.models.Wake` dicts): the stream
dispatcher sends them to the wake queue when the item is inserted, so a write and its wakes are
one atomic write. Every write here is a conditional put keyed by the caller's deterministic id.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from quayutec.dal.aws import (
    cancellation_codes,
    dynamodb,
    is_condition_failure,
    paginate_query,
    put_new,
    transact_new,
    transient_errors,
    update_if,
)
from quayutec.models import (
    Agent,
    ApprovalRequest,
    Company,
    MemoryLine,
    Message,
    Room,
    Task,
    TaskEvent,
    Wake,
)

_NOT_EXISTS = "attribute_not_exists(pk)"


def _room_pk(room_id: str) -> str:
    return f"ROOM#{room_id}"


def _mem_pk(room_id: str, visibility: str, company: str) -> str:
    return f"ROOM#{room_id}#MEM#room" if visibility == "room" else f"ROOM#{room_id}#MEM#company#{company}"


def _strip(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in {"pk", "sk", "lsi1sk", "gsi1pk", "gsi1sk", "wakes", "type"}}


class RoomStore:
    """Reads and conditional writes of the room table. ``client``: a DynamoDB client taking
    Python values (defaults to :func:`quayutec.dal.aws.dynamodb`)."""

    def __init__(self, table_name: str, client: Any | None = None) -> None:
        self.table = table_name
        self._client = client

    @property
    def db(self) -> Any:
        return self._client or dynamodb()

    # ------------------------------------------------------------------ helpers
    def _put_new(self, item: dict[str, Any]) -> bool:
        """Conditional put; ``True`` when written, ``False`` when the key already existed."""
        return put_new(self.db, self.table, item)

    def _get(self, pk: str, sk: str, consistent: bool = True) -> dict[str, Any] | None:
        with transient_errors():
            resp = self.db.get_item(TableName=self.table, Key={"pk": pk, "sk": sk}, ConsistentRead=consistent)
        return resp.get("Item")

    def _query(self, **kwargs: Any) -> list[dict[str, Any]]:
        with transient_errors():
            return self.db.query(TableName=self.table, **kwargs).get("Items", [])

    # ------------------------------------------------------------------ companies, agents, rooms
    def put_company(self, company: Company) -> None:
        with transient_errors():
            self.db.put_item(TableName=self.table, Item={"pk": f"COMPANY#{company.id}", "sk": "META",
                                                         "type": "company", **company.model_dump(mode="json")})

    def get_company(self, company_id: str) -> Company | None:
        item = self._get(f"COMPANY#{company_id}", "META")
        return Company.model_validate(_strip(item)) if item else None

    def put_agent(self, agent: Agent) -> None:
        with transient_errors():
            self.db.put_item(TableName=self.table, Item={"pk": f"AGENT#{agent.id}", "sk": "META",
                                                         "type": "agent", **agent.model_dump(mode="json", exclude_none=True)})

    def get_agent(self, agent_id: str) -> Agent | None:
        item = self._get(f"AGENT#{agent_id}", "META")
        return Agent.model_validate(_strip(item)) if item else None

    def put_room(self, room: Room) -> None:
        with transient_errors():
            self.db.put_item(TableName=self.table, Item={"pk": _room_pk(room.id), "sk": "META", "type": "room",
                                                         **room.model_dump(mode="json", exclude_none=True)})
            for company in room.members:
                self.db.put_item(TableName=self.table, Item={"pk": _room_pk(room.id), "sk": f"MEMBER#{company}",
                                                             "type": "member", "company": company})

    def get_room(self, room_id: str, consistent: bool = True) -> Room | None:
        """``consistent=False``: an eventually consistent read (half the read cost), for readers
        that no rights decision rests on (a run's context: members, hop limit)."""
        item = self._get(_room_pk(room_id), "META", consistent)
        return Room.model_validate(_strip(item)) if item else None

    def add_room_agent(self, room_id: str, agent_id: str, company: str | None = None) -> None:
        """Link an agent to a room; the link carries the agent's company (an agent's company
        never changes), so a run reads the room's agents in one query."""
        if company is None:
            agent = self.get_agent(agent_id)
            company = agent.company if agent else None
        item = {"pk": _room_pk(room_id), "sk": f"AGENT#{agent_id}", "type": "room_agent", "agent_id": agent_id}
        if company:
            item["company"] = company
        with transient_errors():
            self.db.put_item(TableName=self.table, Item=item)

    def room_agents(self, room_id: str) -> dict[str, str]:
        """The agents of a room → their companies: one query (links written before the company
        was carried on them cost a point read each)."""
        items = paginate_query(self.db.query, TableName=self.table,
                               KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                               ExpressionAttributeValues={":pk": _room_pk(room_id), ":p": "AGENT#"})
        out: dict[str, str] = {}
        for i in items:
            company = i.get("company")
            if not company:
                agent = self.get_agent(i["agent_id"])
                if agent is None:
                    continue
                company = agent.company
            out[i["agent_id"]] = company
        return out

    def room_agent_ids(self, room_id: str) -> list[str]:
        """The agents of a room (bounded by the number of agents registered in it)."""
        items = paginate_query(self.db.query, TableName=self.table,
                               KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                               ExpressionAttributeValues={":pk": _room_pk(room_id), ":p": "AGENT#"})
        return [i["agent_id"] for i in items]

    # ------------------------------------------------------------------ messages
    def put_message(self, message: Message, wakes: list[Wake] | None = None) -> bool:
        """Write a message once (its id is the idempotency key); its wakes ride on the item."""
        item = {"pk": _room_pk(message.room_id), "sk": f"MSG#{message.id}", "type": "message",
                 "lsi1sk": f"MSG#{message.created_at}#{message.id}",
                 **message.model_dump(mode="json", exclude_none=True)}
        if wakes:
            item["wakes"] = [w.model_dump(mode="json") for w in wakes]
        return self._put_new(item)

    def get_message(self, room_id: str, message_id: str) -> Message | None:
        item = self._get(_room_pk(room_id), f"MSG#{message_id}")
        return Message.model_validate(_strip(item)) if item else None

    def recent_messages(self, room_id: str, limit: int) -> list[Message]:
        """The newest ``limit`` messages, oldest first (one bounded query on the LSI)."""
        items = self._query(IndexName="by_time", KeyConditionExpression="pk = :pk AND begins_with(lsi1sk, :p)",
                            ExpressionAttributeValues={":pk": _room_pk(room_id), ":p": "MSG#"},
                            ScanIndexForward=False, Limit=limit)
        return [Message.model_validate(_strip(i)) for i in reversed(items)]

    def all_messages(self, room_id: str) -> list[Message]:
        """Every message in time order (transcripts; never used by a run)."""
        items = paginate_query(self.db.query, TableName=self.table, IndexName="by_time",
                               KeyConditionExpression="pk = :pk AND begins_with(lsi1sk, :p)",
                               ExpressionAttributeValues={":pk": _room_pk(room_id), ":p": "MSG#"})
        return [Message.model_validate(_strip(i)) for i in items]

    # ------------------------------------------------------------------ tasks
    def _task_item(self, task: Task) -> dict[str, Any]:
        item = {"pk": _room_pk(task.room_id), "sk": f"TASK#{task.id}", "type": "task",
                "lsi1sk": f"TASK#{task.created_at}#{task.id}", **task.model_dump(mode="json", exclude_none=True)}
        if task.status == "open":
            item["gsi1pk"] = f"OPEN#{task.room_id}#{task.to}"
            item["gsi1sk"] = f"{task.created_at}#{task.id}"
        return item

    def _event_item(self, event: TaskEvent, wakes: list[Wake] | None) -> dict[str, Any]:
        item = {"pk": _room_pk(event.room_id), "sk": f"TEV#{event.task_id}#{event.id}", "type": "task_event",
                "lsi1sk": f"TEV#{event.created_at}#{event.id}", **event.model_dump(mode="json", exclude_none=True)}
        if wakes:
            item["wakes"] = [w.model_dump(mode="json") for w in wakes]
        return item

    def create_task(self, task: Task, event: TaskEvent, wakes: list[Wake] | None = None) -> bool:
        """Write a task and its ``created`` event in one transaction, once. ``False`` when the
        task id already exists (a repeat)."""
        return transact_new(self.db, [
            {"Put": {"TableName": self.table, "Item": self._task_item(task), "ConditionExpression": _NOT_EXISTS}},
            {"Put": {"TableName": self.table, "Item": self._event_item(event, wakes), "ConditionExpression": _NOT_EXISTS}},
        ])

    def add_task_event(self, event: TaskEvent, wakes: list[Wake] | None = None) -> str:
        """Write an ``update`` or ``close`` event on an open task, once.

        Returns ``"written"``, ``"exists"`` (this event id was written before: a repeat) or
        ``"task_closed"`` (the task is closed or gone: nothing written).
        """
        updates: dict[str, Any] = {
            "Update": {"TableName": self.table, "Key": {"pk": _room_pk(event.room_id), "sk": f"TASK#{event.task_id}"},
                       "ConditionExpression": "attribute_exists(pk) AND #s = :open",
                       "ExpressionAttributeNames": {"#s": "status"},
                       "ExpressionAttributeValues": {":open": "open", ":now": event.created_at},
                       "UpdateExpression": "SET updated_at = :now"}}
        if event.kind == "close":
            upd = updates["Update"]
            upd["UpdateExpression"] = "SET updated_at = :now, #s = :closed, #r = :result REMOVE gsi1pk, gsi1sk"
            upd["ExpressionAttributeNames"]["#r"] = "result"
            upd["ExpressionAttributeValues"].update({":closed": "closed", ":result": event.text})
        try:
            with transient_errors():
                self.db.transact_write_items(TransactItems=[
                    {"Put": {"TableName": self.table, "Item": self._event_item(event, wakes),
                             "ConditionExpression": _NOT_EXISTS}},
                    updates,
                ])
            return "written"
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            codes = cancellation_codes(exc)
            if codes and codes[0] == "ConditionalCheckFailed":
                return "exists"
            if len(codes) > 1 and codes[1] == "ConditionalCheckFailed":
                return "task_closed"
            raise

    def get_task(self, room_id: str, task_id: str) -> Task | None:
        item = self._get(_room_pk(room_id), f"TASK#{task_id}")
        return Task.model_validate(_strip(item)) if item else None

    def open_tasks_for(self, room_id: str, agent_id: str, limit: int) -> list[Task]:
        """Open tasks sent to an agent, oldest first (bounded query on the sparse GSI)."""
        items = self._query(IndexName="open_tasks", KeyConditionExpression="gsi1pk = :pk",
                            ExpressionAttributeValues={":pk": f"OPEN#{room_id}#{agent_id}"}, Limit=limit)
        return [Task.model_validate(_strip(i)) for i in items]

    def all_tasks(self, room_id: str) -> list[Task]:
        """Every task of a room in creation order."""
        items = paginate_query(self.db.query, TableName=self.table, IndexName="by_time",
                               KeyConditionExpression="pk = :pk AND begins_with(lsi1sk, :p)",
                               ExpressionAttributeValues={":pk": _room_pk(room_id), ":p": "TASK#"})
        return [Task.model_validate(_strip(i)) for i in items]

    def task_events(self, room_id: str, task_id: str, limit: int = 100) -> list[TaskEvent]:
        items = self._query(KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                            ExpressionAttributeValues={":pk": _room_pk(room_id), ":p": f"TEV#{task_id}#"},
                            Limit=limit)
        return sorted((TaskEvent.model_validate(_strip(i)) for i in items), key=lambda e: e.created_at)

    def get_task_event(self, room_id: str, task_id: str, event_id: str) -> TaskEvent | None:
        item = self._get(_room_pk(room_id), f"TEV#{task_id}#{event_id}")
        return TaskEvent.model_validate(_strip(item)) if item else None

    # ------------------------------------------------------------------ memory
    def put_memory(self, line: MemoryLine) -> bool:
        return self._put_new({"pk": _mem_pk(line.room_id, line.visibility, line.company), "sk": f"MEM#{line.id}",
                              "type": "memory", "lsi1sk": f"MEM#{line.created_at}#{line.id}",
                              **line.model_dump(mode="json", exclude_none=True)})

    def get_memory(self, room_id: str, visibility: str, company: str, line_id: str) -> MemoryLine | None:
        item = self._get(_mem_pk(room_id, visibility, company), f"MEM#{line_id}")
        return MemoryLine.model_validate(_strip(item)) if item else None

    def memory_for(self, room_id: str, company: str, limit: int) -> list[MemoryLine]:
        """The newest ``limit`` memory lines a company may read (room-wide and its own
        company-only lines), oldest first. Two bounded queries."""
        lines: list[MemoryLine] = []
        for pk in (_mem_pk(room_id, "room", company), _mem_pk(room_id, "company", company)):
            items = self._query(IndexName="by_time", KeyConditionExpression="pk = :pk",
                                ExpressionAttributeValues={":pk": pk}, ScanIndexForward=False, Limit=limit)
            lines += [MemoryLine.model_validate(_strip(i)) for i in items]
        lines.sort(key=lambda m: m.created_at)
        return lines[-limit:]

    def all_memory(self, room_id: str, companies: list[str]) -> list[MemoryLine]:
        out: list[MemoryLine] = []
        pks = [_mem_pk(room_id, "room", "")] + [_mem_pk(room_id, "company", c) for c in companies]
        for pk in pks:
            out += [MemoryLine.model_validate(_strip(i)) for i in paginate_query(
                self.db.query, TableName=self.table, KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": pk})]
        return sorted(out, key=lambda m: m.created_at)

    # ------------------------------------------------------------------ approvals
    def put_approval(self, approval: ApprovalRequest, task_token: str) -> ApprovalRequest:
        """Record an approval request once; a repeat (a retried waitForTaskToken task, which
        gets a new token) only refreshes the token while the request is pending. Returns
        ``approval`` itself when it was recorded now, else the stored request."""
        key = {"pk": _room_pk(approval.room_id), "sk": f"APPROVAL#{approval.run_id}#{approval.index:03d}"}
        item = {**key, "type": "approval", "task_token": task_token, **approval.model_dump(mode="json", exclude_none=True)}
        if self._put_new(item):
            return approval
        try:
            with transient_errors():
                self.db.update_item(TableName=self.table, Key=key, UpdateExpression="SET task_token = :t",
                                    ConditionExpression="#s = :pending", ExpressionAttributeNames={"#s": "status"},
                                    ExpressionAttributeValues={":t": task_token, ":pending": "pending"})
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise
        existing = self._get(key["pk"], key["sk"])
        return ApprovalRequest.model_validate(_strip(existing or item))

    def get_approval(self, room_id: str, run_id: str, index: int) -> tuple[ApprovalRequest, str] | None:
        """The approval request and its task token."""
        item = self._get(_room_pk(room_id), f"APPROVAL#{run_id}#{index:03d}")
        if not item:
            return None
        return ApprovalRequest.model_validate(_strip(item)), str(item.get("task_token", ""))

    def set_approval_status(self, room_id: str, run_id: str, index: int, status: str, by: str | None,
                            from_statuses: tuple[str, ...] = ("pending",)) -> bool:
        """Move an approval from one of ``from_statuses`` (default: pending) to ``status``;
        ``False`` when it is in none of them (already decided, or gone). ``by``: who decided
        (``None``: ``system`` for an expiry, else the person recorded when deciding began)."""
        names = {"#s": "status"}
        values: dict[str, Any] = {":s": status, **{f":f{i}": f for i, f in enumerate(from_statuses)}}
        update = "SET #s = :s"
        if by is not None or status == "expired":
            update += ", decided_by = :by"
            values[":by"] = by or "system"
        condition = f"attribute_exists(pk) AND #s IN ({', '.join(f':f{i}' for i in range(len(from_statuses)))})"
        return update_if(
            self.db, TableName=self.table, Key={"pk": _room_pk(room_id), "sk": f"APPROVAL#{run_id}#{index:03d}"},
            UpdateExpression=update, ConditionExpression=condition,
            ExpressionAttributeNames=names, ExpressionAttributeValues=values)

    def approvals(self, room_id: str) -> list[ApprovalRequest]:
        items = paginate_query(self.db.query, TableName=self.table,
                               KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                               ExpressionAttributeValues={":pk": _room_pk(room_id), ":p": "APPROVAL#"})
        return sorted((ApprovalRequest.model_validate(_strip(i)) for i in items), key=lambda a: (a.created_at, a.index))

    # ------------------------------------------------------------------ outbox
    def put_outbox(self, room_id: str, outbox_id: str, run_id: str, wakes: list[Wake]) -> bool:
        """The wakes of a run's action writes, as one item (sent by the stream dispatcher)."""
        return self._put_new({"pk": _room_pk(room_id), "sk": f"OUTBOX#{outbox_id}", "type": "outbox",
                              "run_id": run_id, "wakes": [w.model_dump(mode="json") for w in wakes]})
