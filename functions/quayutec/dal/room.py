"""The room table (single-table design, its stream is the wake outbox; design §3). Keys and
indexes: design §14 (no local secondary index, so no item collection is capped at 10 GB).

Item layout (pk / sk):

* ``COMPANY#{id}`` / ``META`` — a company, its people and rights policy
* ``AGENT#{id}`` / ``META`` — an always-on agent's configuration (no key: keys live in Secrets Manager)
* ``ROOM#{id}`` / ``META`` — a room, its ``agents`` map (agent → company, so a run reads the room
  and its agents in one item) and its ``memory`` map (which memory partitions hold lines:
  ``room``, ``company#{c}``, so a run queries only those); ``MEMBER#{company}`` and
  ``AGENT#{agent}`` its members
* ``ROOM#{id}#MSG`` / ``MSG#{msg}`` — a message, in a partition of the room's messages alone
  (keyed by its id: the put's condition makes a repeat a no-op; GSI ``by_time``: ``gsi2pk`` =
  its pk, ``gsi2sk`` = ``{created_at}#{msg}``)
* ``ROOM#{id}`` / ``TASK#{task}`` — a task (GSI ``open_tasks``: ``OPEN#{room}#{assignee}`` /
  ``{created_at}#{task}`` while open — a sparse index; a room's task list is the ``TASK#``
  range, put in creation order when read)
* ``ROOM#{id}`` / ``TEV#{task}#{event}`` — a task event (created / update / close)
* ``ROOM#{id}`` / ``APPROVAL#{run}#{index}`` — an approval request (GSI ``approvals_by_company``:
  ``APPROVALS#{room}#{company}`` / ``{created_at}#{run}#{index}``)
* ``ROOM#{id}`` / ``OUTBOX#{id}`` — the wakes of a run's action writes
* ``ROOM#{id}#MEM#room`` and ``ROOM#{id}#MEM#company#{c}`` / ``MEM#{id}`` — memory lines (GSI
  ``by_time``: ``gsi2pk`` = their pk, ``gsi2sk`` = ``{created_at}#{id}``)
* ``ROOM#{id}#FILES`` / ``FILE#{file}`` and ``INDEX`` — room files and the index pointer
  (:mod:`quayutec.dal.files`)

Any item may carry ``wakes`` (a list of :class:`~quayutec.models.Wake` dicts): the stream
dispatcher sends them to the wake queue when the item is inserted, so a write and its wakes are
one atomic write. Every write here is a conditional put keyed by the caller's deterministic id.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from quayutec import resources as r
from quayutec.dal.aws import (
    Guard,
    dynamodb,
    is_condition_failure,
    paginate_query,
    put_guarded,
    put_new,
    transact,
    transact_guarded,
    transient_errors,
    update_if,
)
from quayutec.errors import LimitReached, TransientError
from quayutec.logic.ids import agent_name, name_key
from quayutec.models import (
    Agent,
    ApprovalRequest,
    Company,
    CompanyBudget,
    MemoryLine,
    Message,
    Room,
    Task,
    TaskEvent,
    Wake,
)

_NOT_EXISTS = "attribute_not_exists(pk)"
#: BatchGetItem attempts at the keys DynamoDB left unprocessed (throttling) before giving up.
_BATCH_ATTEMPTS = 5

#: What a company may read of the room's messages (design §12.5): those for the whole room and its
#: own company-only notices. A FilterExpression: DynamoDB applies it after ``Limit``, so a query
#: may return fewer items than it evaluated (:func:`visible_messages` reads on).
_VISIBLE = "attribute_not_exists(visible_to) OR visible_to = :reader"
#: The attributes of a message's key on the ``by_time`` GSI (a page cursor holds them).
MESSAGE_KEY = ("pk", "sk", "gsi2pk", "gsi2sk")
#: A page of messages reads at most this many times to fill itself past hidden notices...
VISIBLE_READS = 8
#: ...each read after the first evaluating at least this many items.
_READ_AHEAD = 100


def wakes_attrs(wakes: list[Wake]) -> dict[str, Any]:
    """The attributes of an item that carries ``wakes``: the list, and the scalar marker the
    stream's event filter matches (``resources.ROOM_STREAM_FILTER``, docs/design.md §3)."""
    return {"wakes": [w.model_dump(mode="json") for w in wakes], r.HAS_WAKES_ATTR: True}


def _room_pk(room_id: str) -> str:
    return f"ROOM#{room_id}"


def memory_partition(visibility: str, company: str) -> str:
    """A memory partition's name in the room item's ``memory`` map: ``room`` for room-wide lines,
    ``company#{company}`` for a company's own."""
    return "room" if visibility == "room" else f"company#{company}"


def message_pk(room_id: str) -> str:
    """The partition of a room's messages, apart from its tasks, approvals and members
    (design §14)."""
    return f"ROOM#{room_id}#MSG"


def _time_sk(created_at: str, item_id: str) -> str:
    """An item's sort key on the ``by_time`` GSI: time order, ties by id (design §14)."""
    return f"{created_at}#{item_id}"


_mem_key = memory_partition


def _mem_pk(room_id: str, visibility: str, company: str) -> str:
    return f"ROOM#{room_id}#MEM#{_mem_key(visibility, company)}"


#: The key and index attributes of a room-table item (its table key and every GSI key): never
#: part of what the item says.
KEY_ATTRS = frozenset({"pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk", "gsi3pk", "gsi3sk"})
#: What :func:`_strip` drops: the keys, the wakes an item carries for the stream, its type.
_NOT_CONTENT = KEY_ATTRS | {"wakes", r.HAS_WAKES_ATTR, "type"}


def _strip(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in _NOT_CONTENT}


def budget_key(company_id: str) -> dict[str, str]:
    """The key of a company's budget item in the room table (design §12.4)."""
    return {"pk": f"COMPANY#{company_id}", "sk": "BUDGET"}


def budget_of(item: dict[str, Any] | None) -> CompanyBudget | None:
    """A company's budget from its item as read (``None``: it set none)."""
    return CompanyBudget.model_validate(_strip(item)) if item else None


def agent_key(agent_id: str) -> dict[str, str]:
    """The key of an agent's item in the room table."""
    return {"pk": f"AGENT#{agent_id}", "sk": "META"}


def _message_key(item: dict[str, Any]) -> dict[str, Any]:
    """A message item's key on the ``by_time`` GSI (an ``ExclusiveStartKey``: the index's key
    and the table's)."""
    return {k: item[k] for k in MESSAGE_KEY}


def visible_messages(
    db: Any, query: dict[str, Any], limit: int, reader: str
) -> tuple[list[Message], dict[str, Any] | None]:
    """Up to ``limit`` messages of a ``by_time`` query (``query``: its keyword arguments, maybe
    with an ``ExclusiveStartKey``) that a person or agent of company ``reader`` may read, in the
    query's order, and the key to read on from (``None``: the partition ended). Design §12.5.

    Other companies' company-only notices are left out by a FilterExpression, which DynamoDB
    applies after ``Limit``: a read that met some returns fewer than it evaluated, so this reads
    on until ``limit`` messages are found or the partition ends, at most :data:`VISIBLE_READS`
    queries. The first read evaluates ``limit`` items (a room without such notices costs what it
    did), later ones at least 100. A page is short only when it carries a key, and that key is
    its last message's (items read past it are read again on the next page), so it names no
    hidden notice; except when the reads found nothing at all, where it is the last evaluated
    item's key (the position of a hidden notice: its id and time, never its text) so that the
    next page still moves on."""
    kwargs = {
        **query,
        "FilterExpression": _VISIBLE,
        "ExpressionAttributeValues": {**query["ExpressionAttributeValues"], ":reader": reader},
    }
    items: list[dict[str, Any]] = []
    start: dict[str, Any] | None = kwargs.pop("ExclusiveStartKey", None)
    for n in range(VISIBLE_READS):
        if start is not None:
            kwargs["ExclusiveStartKey"] = start
        kwargs["Limit"] = limit if n == 0 else max(limit - len(items), _READ_AHEAD)
        with transient_errors():
            page = db.query(**kwargs)
        items += page.get("Items", [])
        start = page.get("LastEvaluatedKey")
        if start is None or len(items) >= limit:
            break
    if len(items) > limit or (items and start is not None):
        items = items[:limit]
        start = _message_key(items[-1])
    return [Message.model_validate(_strip(i)) for i in items], start


def _room_of(item: dict[str, Any]) -> Room:
    return Room.model_validate({k: v for k, v in _strip(item).items() if k not in ("agents", "memory")})


@dataclass
class RunReads:
    """What a run reads by key before it claims and reads the room (design §2.1, §2.2), from one
    consistent ``BatchGetItem``: the agent, the room and its agents (the room item's ``agents``
    map), the wake's cause (a message, or a task and its event) and the room's index pointer
    ``(version, object key)`` (``(0, None)`` before any file)."""

    agent: Agent | None = None
    room: Room | None = None
    agents: dict[str, str] = field(default_factory=dict)
    #: The memory partitions holding lines (``room``, ``company#{c}``: the room item's ``memory`` map).
    memory: set[str] = field(default_factory=set)
    message: Message | None = None
    task: Task | None = None
    task_event: TaskEvent | None = None
    index: tuple[int, str | None] = field(default=(0, None))
    #: The wake's chain as its counter item stood (design §12.1): runs started, and whether stopped.
    chain_runs: int = 0
    chain_stopped: bool = False


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

    def _query_up_to(self, limit: int, **kwargs: Any) -> list[dict[str, Any]]:
        """Up to ``limit`` items of a query, in its order: a page DynamoDB cuts short (1 MB of
        items read) is continued from its ``LastEvaluatedKey`` until ``limit`` items are read or
        the query ends, each page asking for what is still missing. The pages are bounded by
        ``limit`` too: every page but the last holds at least one item (no FilterExpression)."""
        items: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        while len(items) < limit:
            page_kwargs = {**kwargs, "Limit": limit - len(items)}
            if start is not None:
                page_kwargs["ExclusiveStartKey"] = start
            with transient_errors():
                page = self.db.query(TableName=self.table, **page_kwargs)
            items += page.get("Items", [])
            start = page.get("LastEvaluatedKey")
            if start is None:
                break
        return items[:limit]

    # ------------------------------------------------------------------ companies, agents, rooms
    def put_company(self, company: Company) -> None:
        with transient_errors():
            self.db.put_item(
                TableName=self.table,
                Item={
                    "pk": f"COMPANY#{company.id}",
                    "sk": "META",
                    "type": "company",
                    **company.model_dump(mode="json"),
                },
            )

    def get_budget(self, company_id: str) -> CompanyBudget | None:
        """The company's budget (design §12.4), ``None`` when it set none."""
        key = budget_key(company_id)
        return budget_of(self._get(key["pk"], key["sk"]))

    def put_budget(self, company_id: str, budget: CompanyBudget) -> None:
        """Set (replace) the company's budget. Raises TransientError on throttling."""
        with transient_errors():
            self.db.put_item(
                TableName=self.table,
                Item=json.loads(
                    json.dumps(
                        {
                            **budget_key(company_id),
                            "type": "budget",
                            **budget.model_dump(mode="json", exclude_none=True),
                        }
                    ),
                    parse_float=Decimal,
                ),
            )

    def get_company(self, company_id: str) -> Company | None:
        item = self._get(f"COMPANY#{company_id}", "META")
        return Company.model_validate(_strip(item)) if item else None

    def put_agent(self, agent: Agent) -> None:
        with transient_errors():
            self.db.put_item(
                TableName=self.table,
                Item={
                    "pk": f"AGENT#{agent.id}",
                    "sk": "META",
                    "type": "agent",
                    **agent.model_dump(mode="json", exclude_none=True),
                },
            )

    def get_agent(self, agent_id: str) -> Agent | None:
        item = self._get(f"AGENT#{agent_id}", "META")
        return Agent.model_validate(_strip(item)) if item else None

    def set_agent_paused(self, agent_id: str, by: str, at: str) -> bool:
        """Mark an existing agent paused by ``by`` at ``at`` (ISO-8601) and count the pause
        (``pauses``: every run claimed before it fails its stop guard from now on, design §12.2);
        ``False`` when it is paused already (the first pause stands) or does not exist. Raises
        TransientError on throttling."""
        return update_if(
            self.db,
            TableName=self.table,
            Key=agent_key(agent_id),
            UpdateExpression="SET paused_at = :at, paused_by = :by ADD pauses :one",
            ConditionExpression="attribute_exists(pk) AND attribute_not_exists(paused_at)",
            ExpressionAttributeValues={":at": at, ":by": by, ":one": 1},
        )

    def clear_agent_paused(self, agent_id: str) -> bool:
        """Resume a paused agent; ``False`` when it was not paused. Raises TransientError on
        throttling."""
        return update_if(
            self.db,
            TableName=self.table,
            Key=agent_key(agent_id),
            UpdateExpression="REMOVE paused_at, paused_by",
            ConditionExpression="attribute_exists(paused_at)",
        )

    def put_room(self, room: Room) -> None:
        """Write a room's item (set-up and tests; the API creates rooms through the directory),
        its member items and each member's index entry. A new room item starts with empty
        ``agents`` and ``memory`` maps; a room written again keeps its maps."""
        fields = room.model_dump(mode="json", exclude_none=True)
        key = {"pk": _room_pk(room.id), "sk": "META"}
        if not put_new(self.db, self.table, {**key, "type": "room", "agents": {}, "memory": {}, **fields}):
            names = {f"#f{i}": k for i, k in enumerate(fields)}
            values: dict[str, Any] = {f":v{i}": v for i, v in enumerate(fields.values())}
            removed = [k for k in Room.model_fields if k not in fields]
            expr = "SET " + ", ".join(f"#f{i} = :v{i}" for i in range(len(fields)))
            if removed:
                names.update({f"#r{i}": k for i, k in enumerate(removed)})
                expr += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(removed)))
            with transient_errors():
                self.db.update_item(
                    TableName=self.table,
                    Key=key,
                    UpdateExpression=expr,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                )
        with transient_errors():
            for company in room.members:
                self.db.put_item(
                    TableName=self.table,
                    Item={"pk": _room_pk(room.id), "sk": f"MEMBER#{company}", "type": "member", "company": company},
                )
                # the company's index of its rooms, as the directory writes it (Directory.rooms_of)
                self.db.put_item(
                    TableName=self.table,
                    Item={
                        "pk": f"COMPANY#{company}",
                        "sk": f"ROOM#{room.id}",
                        "type": "company_room",
                        "room_id": room.id,
                    },
                )

    def get_room(self, room_id: str, consistent: bool = True) -> Room | None:
        """``consistent=False``: an eventually consistent read (half the read cost), for readers
        that no rights decision rests on (a run's context: members, hop limit)."""
        item = self._get(_room_pk(room_id), "META", consistent)
        return _room_of(item) if item else None

    def add_room_agent(
        self, room_id: str, agent_id: str, company: str | None = None, max_agents: int | None = None
    ) -> bool:
        """Link an agent to a room, in one transaction: the link item (listing), the room's name
        item (``NAME#agent#{name, case folded}``: one agent per name in a room, so ``@name``
        names one agent) and the room item's ``agents`` map (agent → company: an agent's company
        never changes, so a run reads the room and its agents in one item). ``False`` when
        another agent of that name is in the room (nothing written); linking the same agent again
        is a no-op. ``max_agents``: the room's limit (``size(agents)``, checked in the same
        transaction). Raises ValueError for an agent with no company or no room, LimitReached
        when the room holds ``max_agents`` agents already."""
        if company is None:
            agent = self.get_agent(agent_id)
            company = agent.company if agent else None
        if not company:
            raise ValueError(f"agent {agent_id!r} is not registered: no company to link")
        link = {
            "pk": _room_pk(room_id),
            "sk": f"AGENT#{agent_id}",
            "type": "room_agent",
            "agent_id": agent_id,
            "company": company,
        }
        name = {
            "TableName": self.table,
            "Item": {
                "pk": _room_pk(room_id),
                "sk": f"NAME#agent#{name_key(agent_name(agent_id))}",
                "type": "room_agent_name",
                "agent_id": agent_id,
                "company": company,
            },
            "ConditionExpression": "attribute_not_exists(pk) OR agent_id = :me",
            "ExpressionAttributeValues": {":me": agent_id},
        }
        meta = {
            "TableName": self.table,
            "Key": {"pk": _room_pk(room_id), "sk": "META"},
            "ConditionExpression": "attribute_exists(pk)",
        }
        entry = {
            **meta,
            "UpdateExpression": "SET agents.#a = :c",
            "ExpressionAttributeNames": {"#a": agent_id},
            "ExpressionAttributeValues": {":c": company},
        }
        if max_agents is not None:
            entry["ConditionExpression"] = (
                "attribute_exists(pk) AND (attribute_exists(agents.#a) OR size(agents) < :max)"
            )
            entry["ExpressionAttributeValues"] = {":c": company, ":max": max_agents}
        failed = transact(self.db, [{"Put": {"TableName": self.table, "Item": link}}, {"Put": name}, {"Update": entry}])
        if failed and failed[1]:
            return False  # another agent of that name
        if failed:
            if max_agents is not None and self._get(_room_pk(room_id), "META", True) is not None:
                raise LimitReached(f"room {room_id!r} holds {max_agents} agents", max_agents, "MAX_ROOM_AGENTS")
            raise ValueError(f"room {room_id!r} does not exist")
        return True

    def named_room_agents(self, room_id: str, refs: list[str]) -> dict[str, str]:
        """The agents of the room that ``refs`` name → their companies: a ref is an agent's full
        id (``acme.planner``: its link item) or its name, letter case aside (``Planner``: the
        room's name item, one agent per name). One consistent ``BatchGetItem`` whatever the
        room's size (a rights decision rests on the companies it returns), one per 99 distinct
        refs: the callers bound them (:data:`quayutec.logic.phases.decide_and_post.MAX_NAMED_REFS`).
        Raises TransientError as :meth:`run_reads`."""
        pk = _room_pk(room_id)
        keys = list(
            dict.fromkeys(
                (pk, f"AGENT#{ref}") if "." in ref else (pk, f"NAME#agent#{name_key(ref)}") for ref in refs if ref
            )
        )
        out: dict[str, str] = {}
        for start in range(0, len(keys), 99):
            found, _ = self._batch_get(keys[start : start + 99])
            out.update({str(i["agent_id"]): str(i["company"]) for i in found.values() if "company" in i})
        return out

    def room_agents(self, room_id: str) -> dict[str, str]:
        """The agents of a room → their companies: one query (each link carries its agent's
        company)."""
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": _room_pk(room_id), ":p": "AGENT#"},
        )
        return {str(i["agent_id"]): str(i["company"]) for i in items}

    def run_reads(
        self,
        *,
        agent_id: str,
        room_id: str,
        cause_kind: str,
        cause_id: str,
        task_id: str | None,
        index_pk: str,
        chain: tuple[str, dict[str, str]] | None = None,
    ) -> RunReads:
        """The key reads of a run in one consistent ``BatchGetItem`` (see :class:`RunReads`;
        ``index_pk``: the partition of the room's index pointer, :func:`quayutec.dal.files.files_pk`;
        ``chain``: ``(table, key)`` of the wake's chain counter in another table, read in the same
        call). Consistent: the agent's company and the wake's cause are what rights rest on
        (design §2). Raises TransientError when DynamoDB leaves keys unprocessed after a few attempts."""
        room_pk = _room_pk(room_id)
        keys = {"agent": (f"AGENT#{agent_id}", "META"), "room": (room_pk, "META"), "index": (index_pk, "INDEX")}
        if cause_kind == "message":
            keys["message"] = (message_pk(room_id), f"MSG#{cause_id}")
        else:
            keys["task"] = (room_pk, f"TASK#{task_id}")
            keys["task_event"] = (room_pk, f"TEV#{task_id}#{cause_id}")
        items, other = self._batch_get(list(keys.values()), chain)
        got = {name: items.get(key) for name, key in keys.items()}
        out = RunReads()
        if other is not None:
            out.chain_runs = int(other.get("runs", 0))
            out.chain_stopped = "stopped_at" in other
        if got["agent"]:
            out.agent = Agent.model_validate(_strip(got["agent"]))
        if got["room"]:
            out.room = _room_of(got["room"])
            out.agents = {str(a): str(c) for a, c in got["room"]["agents"].items()}
            out.memory = {str(k) for k in got["room"]["memory"]}
        if message := got.get("message"):
            out.message = Message.model_validate(_strip(message))
        if task := got.get("task"):
            out.task = Task.model_validate(_strip(task))
        if task_event := got.get("task_event"):
            out.task_event = TaskEvent.model_validate(_strip(task_event))
        if got["index"]:
            out.index = (int(got["index"]["version"]), str(got["index"]["key"]))
        return out

    def _batch_get(
        self, keys: list[tuple[str, str]], also: tuple[str, dict[str, str]] | None = None
    ) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[str, Any] | None]:
        """Items by ``(pk, sk)`` (at most 99 keys), and ``also``'s item (``(table, key)`` of
        another table, or ``None``), read consistently in one call; keys DynamoDB leaves
        unprocessed are asked again with a short backoff (BatchGetItem, DynamoDB API reference)."""
        pending: dict[str, Any] = {
            self.table: {"Keys": [{"pk": pk, "sk": sk} for pk, sk in dict.fromkeys(keys)], "ConsistentRead": True}
        }
        if also is not None:
            pending[also[0]] = {"Keys": [also[1]], "ConsistentRead": True}
        found: dict[tuple[str, str], dict[str, Any]] = {}
        other: dict[str, Any] | None = None
        for attempt in range(_BATCH_ATTEMPTS):
            with transient_errors():
                resp = self.db.batch_get_item(RequestItems=pending)
            for table, table_items in resp.get("Responses", {}).items():
                for item in table_items:
                    if table == self.table:
                        found[(item["pk"], item["sk"])] = item
                    else:
                        other = item
            pending = resp.get("UnprocessedKeys") or {}
            if not pending:
                return found, other
            time.sleep(0.05 * 2**attempt)
        left = sum(len(v.get("Keys", [])) for v in pending.values())
        raise TransientError(f"BatchGetItem left {left} key(s) unprocessed")

    def room_agent_ids(self, room_id: str) -> list[str]:
        """The agents of a room (bounded by the number of agents registered in it)."""
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": _room_pk(room_id), ":p": "AGENT#"},
        )
        return [i["agent_id"] for i in items]

    # ------------------------------------------------------------------ messages
    def _message_item(self, message: Message, wakes: list[Wake] | None) -> dict[str, Any]:
        pk = message_pk(message.room_id)
        item = {
            "pk": pk,
            "sk": f"MSG#{message.id}",  # by id alone: the put's condition stops a repeat
            "type": "message",
            "gsi2pk": pk,
            "gsi2sk": _time_sk(message.created_at, message.id),
            **message.model_dump(mode="json", exclude_none=True),
        }
        if wakes:
            item.update(wakes_attrs(wakes))
        return item

    def put_message(self, message: Message, wakes: list[Wake] | None = None, guard: Guard | None = None) -> bool:
        """Write a message once (its id is the idempotency key); its wakes ride on the item.
        ``guard``: a run's stop guard (dal.ledger.stop_guard): raises RunStopped when the run
        was stopped (nothing written). Raises TransientError on throttling."""
        return put_guarded(self.db, self.table, self._message_item(message, wakes), guard)

    def put_messages_with(
        self, messages: list[tuple[Message, list[Wake] | None]], also: dict[str, Any], guard: Guard | None = None
    ) -> tuple[list[bool], bool] | None:
        """Write ``messages`` (each once, with its wakes) and ``also`` (one ``TransactWriteItems``
        entry of another table, e.g. the run's final ledger write) in one transaction (at most
        100 entries, ``guard``'s included). Returns ``None`` when all landed, else which
        conditions failed: ``([message existed already, ...], also's condition failed)``
        (nothing was written). Raises RunStopped when only ``guard`` failed, TransientError on
        throttling or a conflicting transaction."""
        items = [
            {"Put": {"TableName": self.table, "Item": self._message_item(m, w), "ConditionExpression": _NOT_EXISTS}}
            for m, w in messages
        ] + [also]
        failed = transact_guarded(self.db, items, guard)
        return None if failed is None else (failed[:-1], failed[-1])

    def get_message(self, room_id: str, message_id: str) -> Message | None:
        item = self._get(message_pk(room_id), f"MSG#{message_id}")
        return Message.model_validate(_strip(item)) if item else None

    def recent_messages(self, room_id: str, limit: int, *, reader: str) -> list[Message]:
        """The newest ``limit`` messages a person or agent of company ``reader`` may read, oldest
        first: bounded queries on the ``by_time`` GSI (eventually consistent: a message written a
        moment ago may be missing, design §14), reading past other companies' company-only
        notices (:func:`visible_messages`, design §12.5)."""
        query = {
            "TableName": self.table,
            "IndexName": "by_time",
            "KeyConditionExpression": "gsi2pk = :pk",
            "ExpressionAttributeValues": {":pk": message_pk(room_id)},
            "ScanIndexForward": False,
        }
        messages, _ = visible_messages(self.db, query, limit, reader)
        return messages[::-1]

    def all_messages(self, room_id: str) -> list[Message]:
        """Every message in time order, company-only notices included: the operator's view
        (the scenario player's transcript, tests; never a run's or a person's read, design §12.5)."""
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            IndexName="by_time",
            KeyConditionExpression="gsi2pk = :pk",
            ExpressionAttributeValues={":pk": message_pk(room_id)},
        )
        return [Message.model_validate(_strip(i)) for i in items]

    # ------------------------------------------------------------------ tasks
    def _task_item(self, task: Task) -> dict[str, Any]:
        item = {
            "pk": _room_pk(task.room_id),
            "sk": f"TASK#{task.id}",
            "type": "task",
            **task.model_dump(mode="json", exclude_none=True),
        }
        if task.status == "open":
            item["gsi1pk"] = f"OPEN#{task.room_id}#{task.to}"
            item["gsi1sk"] = f"{task.created_at}#{task.id}"
        return item

    def _event_item(self, event: TaskEvent, wakes: list[Wake] | None) -> dict[str, Any]:
        item = {
            "pk": _room_pk(event.room_id),
            "sk": f"TEV#{event.task_id}#{event.id}",
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
                            "ConditionExpression": _NOT_EXISTS,
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": self._event_item(event, wakes),
                            "ConditionExpression": _NOT_EXISTS,
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
                "Key": {"pk": _room_pk(event.room_id), "sk": f"TASK#{event.task_id}"},
                "ConditionExpression": "attribute_exists(pk) AND #s = :open",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {":open": "open", ":now": event.created_at},
                "UpdateExpression": "SET updated_at = :now",
            }
        }
        if event.kind == "close":
            upd = updates["Update"]
            upd["UpdateExpression"] = "SET updated_at = :now, #s = :closed, #r = :result REMOVE gsi1pk, gsi1sk"
            upd["ExpressionAttributeNames"]["#r"] = "result"
            upd["ExpressionAttributeValues"].update({":closed": "closed", ":result": event.text})
        failed = transact_guarded(
            self.db,
            [
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": self._event_item(event, wakes),
                        "ConditionExpression": _NOT_EXISTS,
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
        item = self._get(_room_pk(room_id), f"TASK#{task_id}")
        return Task.model_validate(_strip(item)) if item else None

    def open_tasks_for(self, room_id: str, agent_id: str, limit: int) -> list[Task]:
        """The newest ``limit`` open tasks sent to an agent, oldest first (a bounded query on the
        sparse GSI, continued past a page DynamoDB cut short: :meth:`_query_up_to`)."""
        items = self._query_up_to(
            limit,
            IndexName="open_tasks",
            KeyConditionExpression="gsi1pk = :pk",
            ExpressionAttributeValues={":pk": f"OPEN#{room_id}#{agent_id}"},
            ScanIndexForward=False,
        )
        return [Task.model_validate(_strip(i)) for i in reversed(items)]

    def all_tasks(self, room_id: str) -> list[Task]:
        """Every task of a room in creation order: one consistent query of the room's ``TASK#``
        items (by id), put in order here; no index (design §14)."""
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": _room_pk(room_id), ":p": "TASK#"},
            ConsistentRead=True,
        )
        return sorted((Task.model_validate(_strip(i)) for i in items), key=lambda t: (t.created_at, t.id))

    def task_events(self, room_id: str, task_id: str, limit: int = 100) -> list[TaskEvent]:
        items = self._query(
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": _room_pk(room_id), ":p": f"TEV#{task_id}#"},
            Limit=limit,
        )
        return sorted((TaskEvent.model_validate(_strip(i)) for i in items), key=lambda e: e.created_at)

    def get_task_event(self, room_id: str, task_id: str, event_id: str) -> TaskEvent | None:
        item = self._get(_room_pk(room_id), f"TEV#{task_id}#{event_id}")
        return TaskEvent.model_validate(_strip(item)) if item else None

    # ------------------------------------------------------------------ memory
    def put_memory(self, line: MemoryLine, guard: Guard | None = None, *, marked: bool = False) -> bool:
        """Write a memory line once. Its partition is marked in the room item's ``memory`` map (a
        run then queries only partitions that hold lines) by a write of its own before the line,
        unless ``marked`` (the caller read the map and found it there): so lines of one room are
        never written in a transaction with the room item, and runs writing memory do not
        conflict with each other or with agent placement (docs/design.md §2). A crash between the
        two leaves a marked partition without lines: one query that finds none. ``False`` when
        the line existed already. ``guard``: a run's stop guard (raises RunStopped). Raises
        ValueError when the room does not exist (nothing written)."""
        if not marked:
            self.mark_memory_partition(line.room_id, line.visibility, line.company)
        pk = _mem_pk(line.room_id, line.visibility, line.company)
        item = {
            "pk": pk,
            "sk": f"MEM#{line.id}",  # by id alone: the put's condition stops a repeat
            "type": "memory",
            "gsi2pk": pk,
            "gsi2sk": _time_sk(line.created_at, line.id),
            **line.model_dump(mode="json", exclude_none=True),
        }
        return put_guarded(self.db, self.table, item, guard)

    def mark_memory_partition(self, room_id: str, visibility: str, company: str) -> None:
        """Mark the partition of ``(visibility, company)`` lines in the room item's ``memory``
        map (idempotent). Raises ValueError when the room does not exist, TransientError on
        throttling."""
        if not update_if(
            self.db,
            TableName=self.table,
            Key={"pk": _room_pk(room_id), "sk": "META"},
            UpdateExpression="SET memory.#k = :t",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#k": _mem_key(visibility, company)},
            ExpressionAttributeValues={":t": True},
        ):
            raise ValueError(f"room {room_id!r} does not exist")

    def get_memory(self, room_id: str, visibility: str, company: str, line_id: str) -> MemoryLine | None:
        item = self._get(_mem_pk(room_id, visibility, company), f"MEM#{line_id}")
        return MemoryLine.model_validate(_strip(item)) if item else None

    def memory_for(self, room_id: str, company: str, limit: int, present: set[str] | None = None) -> list[MemoryLine]:
        """The newest ``limit`` memory lines a company may read (room-wide and its own
        company-only lines), oldest first. A bounded query per partition on the ``by_time`` GSI
        (eventually consistent, design §14), only those the room item's ``memory`` map names
        (``present``, from :meth:`run_reads`; ``None``: both), each continued past a page
        DynamoDB cut short (:meth:`_query_up_to`)."""
        lines: list[MemoryLine] = []
        for visibility in ("room", "company"):
            if present is not None and _mem_key(visibility, company) not in present:
                continue
            items = self._query_up_to(
                limit,
                IndexName="by_time",
                KeyConditionExpression="gsi2pk = :pk",
                ExpressionAttributeValues={":pk": _mem_pk(room_id, visibility, company)},
                ScanIndexForward=False,
            )
            lines += [MemoryLine.model_validate(_strip(i)) for i in items]
        lines.sort(key=lambda m: m.created_at)
        return lines[-limit:]

    def all_memory(self, room_id: str, companies: list[str]) -> list[MemoryLine]:
        out: list[MemoryLine] = []
        pks = [_mem_pk(room_id, "room", "")] + [_mem_pk(room_id, "company", c) for c in companies]
        for pk in pks:
            out += [
                MemoryLine.model_validate(_strip(i))
                for i in paginate_query(
                    self.db.query,
                    TableName=self.table,
                    KeyConditionExpression="pk = :pk",
                    ExpressionAttributeValues={":pk": pk},
                )
            ]
        return sorted(out, key=lambda m: m.created_at)

    # ------------------------------------------------------------------ approvals
    def put_approval(self, approval: ApprovalRequest, task_token: str, guard: Guard | None = None) -> ApprovalRequest:
        """Record an approval request once; a repeat (a retried waitForTaskToken task, which
        gets a new token) only refreshes the token while the request is pending. Returns
        ``approval`` itself when it was recorded now, else the stored request. ``guard``: the
        run's stop guard (raises RunStopped: a stopped run asks for nothing)."""
        key = {"pk": _room_pk(approval.room_id), "sk": f"APPROVAL#{approval.run_id}#{approval.index:03d}"}
        item = {
            **key,
            "type": "approval",
            "gsi3pk": f"APPROVALS#{approval.room_id}#{approval.company}",
            "gsi3sk": f"{approval.created_at}#{approval.run_id}#{approval.index:03d}",
            "task_token": task_token,
            **approval.model_dump(mode="json", exclude_none=True),
        }
        if put_guarded(self.db, self.table, item, guard):
            return approval
        try:
            with transient_errors():
                self.db.update_item(
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET task_token = :t",
                    ConditionExpression="#s = :pending",
                    ExpressionAttributeNames={"#s": "status"},
                    ExpressionAttributeValues={":t": task_token, ":pending": "pending"},
                )
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
        return ApprovalRequest.model_validate(_strip(item)), str(item["task_token"])

    def run_approvals(self, room_id: str, run_id: str) -> list[tuple[ApprovalRequest, str]]:
        """The approval requests of one run, each with its task token, by index (one query:
        the run's held actions are at most 25). Raises TransientError on throttling."""
        with transient_errors():
            items = list(
                paginate_query(
                    self.db.query,
                    TableName=self.table,
                    KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                    ExpressionAttributeValues={":pk": _room_pk(room_id), ":p": f"APPROVAL#{run_id}#"},
                    ConsistentRead=True,
                )
            )
        return [(ApprovalRequest.model_validate(_strip(i)), str(i["task_token"])) for i in items]

    def set_approval_status(
        self,
        room_id: str,
        run_id: str,
        index: int,
        status: str,
        by: str | None,
        from_statuses: tuple[str, ...] = ("pending",),
    ) -> bool:
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
            self.db,
            TableName=self.table,
            Key={"pk": _room_pk(room_id), "sk": f"APPROVAL#{run_id}#{index:03d}"},
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def approvals(self, room_id: str, company: str | None = None) -> list[ApprovalRequest]:
        """The approval requests of a room, oldest first: those of ``company``'s agents, read from
        the ``approvals_by_company`` GSI (only that company's rows; eventually consistent: a
        listing, no decision rests on it, design §14); ``company=None``: every company's (the
        operator's view: the scenario player, the chaos lab, tests)."""
        if company is None:
            query = {
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
                "ExpressionAttributeValues": {":pk": _room_pk(room_id), ":p": "APPROVAL#"},
            }
        else:
            query = {
                "IndexName": "approvals_by_company",
                "KeyConditionExpression": "gsi3pk = :pk",
                "ExpressionAttributeValues": {":pk": f"APPROVALS#{room_id}#{company}"},
            }
        items = paginate_query(self.db.query, TableName=self.table, **query)
        return sorted((ApprovalRequest.model_validate(_strip(i)) for i in items), key=lambda a: (a.created_at, a.index))

    # ------------------------------------------------------------------ outbox
    def put_outbox(
        self, room_id: str, outbox_id: str, run_id: str, wakes: list[Wake], guard: Guard | None = None
    ) -> bool:
        """The wakes of a run's action writes, as one item (sent by the stream dispatcher).
        ``guard``: the run's stop guard (raises RunStopped)."""
        return put_guarded(
            self.db,
            self.table,
            {
                "pk": _room_pk(room_id),
                "sk": f"OUTBOX#{outbox_id}",
                "type": "outbox",
                "run_id": run_id,
                **wakes_attrs(wakes),
            },
            guard,
        )
