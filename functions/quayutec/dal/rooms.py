"""Rooms in the room table: a room and its ``agents`` and ``memory`` maps, its members and their
companies' index of their rooms, the agents placed in it (one per name), a run's key reads
(:class:`RunReads`) and the outbox of a run's action writes (design §2, §3, §14)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from quayutec.dal import keys
from quayutec.dal.aws import (
    Guard,
    paginate_query,
    put_guarded,
    put_new,
    transact,
    transient_errors,
    update_if,
)
from quayutec.dal.files import IndexView, pointer_of
from quayutec.dal.pages import KeySpec, Page, decode_cursor, query_rows
from quayutec.dal.table import RoomTable, strip, wakes_attrs
from quayutec.errors import LimitReached
from quayutec.models import (
    Agent,
    Message,
    Room,
    Task,
    TaskEvent,
    Wake,
)


def room_of(item: dict[str, Any]) -> Room:
    return Room.model_validate({k: v for k, v in strip(item).items() if k not in ("agents", "memory")})


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
    index: IndexView = field(default=(0, None, frozenset()))
    #: The wake's chain as its counter item stood (design §12.1): runs started, and whether stopped.
    chain_runs: int = 0
    chain_stopped: bool = False
    #: The agent's placement in the room (its link item's ``placement``; ``None``: not placed, or
    #: a link written before placements): the run's stop guard holds only while it is the same.
    placement: str | None = None


def _invitation(room_id: str, room_name: str | None, company: str, by: str, at: str) -> dict[str, Any]:
    """The fields of an invitation's item and of its index entry under the company (design §5),
    with the room's name when it has one: the invited company cannot read the room yet."""
    fields = {"type": "invitation", "room_id": room_id, "company": company, "invited_by": by, "invited_at": at}
    return fields | ({"room_name": room_name} if room_name else {})


class RoomRecords(RoomTable):
    """A room's items: ``ROOM#{id}`` / ``META``, ``MEMBER#``, ``AGENT#``, ``NAME#agent#``, ``OUTBOX#``."""

    def put_room(self, room: Room) -> None:
        """Write a room's item (set-up and tests; the API creates rooms with :meth:`create_room`),
        its member items and each member's index entry. A new room item starts with empty
        ``agents`` and ``memory`` maps; a room written again keeps its maps."""
        fields = room.model_dump(mode="json", exclude_none=True)
        key = keys.room_key(room.id)
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
                    Item={**keys.member_key(room.id, company), "type": "member", "company": company},
                )
                # the company's index of its rooms, as create_room writes it (rooms_of)
                self.db.put_item(
                    TableName=self.table,
                    Item={
                        **keys.company_room_key(company, room.id),
                        "type": "company_room",
                        "room_id": room.id,
                    },
                )

    def create_room(self, room: Room, invited_at: str | None = None) -> bool:
        """Write a new room with its member items and the companies' room index, and an
        invitation (:meth:`invite`; ``invited_at``: ISO 8601) of each company of ``room.invited``,
        in one transaction; ``False`` when the room id is taken."""
        items = [
            self._put(
                {
                    **keys.room_key(room.id),
                    "type": "room",
                    "agents": {},
                    "memory": {},
                    **room.model_dump(mode="json", exclude_none=True),
                }
            )
        ]
        for company in room.members:
            items.append(self._put({**keys.member_key(room.id, company), "type": "member", "company": company}, None))
            items.append(
                self._put(
                    {**keys.company_room_key(company, room.id), "type": "company_room", "room_id": room.id},
                    None,
                )
            )
        for company, by in room.invited.items():
            fields = _invitation(room.id, room.name, company, by, invited_at or "")
            items.append(self._put({**keys.invitation_key(room.id, company), **fields}, None))
            items.append(self._put({**keys.company_invitation_key(company, room.id), **fields}, None))
        return self._transact(items)

    def get_room(self, room_id: str, consistent: bool = True) -> Room | None:
        """``consistent=False``: an eventually consistent read (half the read cost), for readers
        that no rights decision rests on (a run's context: members, hop limit)."""
        item = self._item(keys.room_key(room_id), consistent)
        return room_of(item) if item else None

    def add_member(self, room_id: str, company: str, max_members: int | None = None) -> bool:
        """Make a company a member of a room; ``False`` when it already is, also when the room
        holds ``max_members`` member companies already (the caller tells which: it read the room)."""
        condition = "attribute_exists(pk) AND NOT contains(members, :one)"
        values: dict[str, Any] = {":c": [company], ":one": company}
        if max_members is not None:
            condition += " AND size(members) < :max"
            values[":max"] = max_members
        return self._transact(
            [
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": keys.room_key(room_id),
                        "UpdateExpression": "SET members = list_append(members, :c)",
                        "ConditionExpression": condition,
                        "ExpressionAttributeValues": values,
                    }
                },
                self._put({**keys.member_key(room_id, company), "type": "member", "company": company}, None),
                self._put(
                    {**keys.company_room_key(company, room_id), "type": "company_room", "room_id": room_id},
                    None,
                ),
            ]
        )

    def invite(self, room_id: str, company: str, invited_by: str, invited_at: str, seen: Room) -> bool:
        """Invite a company to a room (design §5), in one transaction: the room's ``INVITE#`` item,
        the company's index entry and the room item's ``invited`` map (company → inviting
        company: a pending invitation holds a seat, so ``members`` and ``invited`` together stay
        within the room's member limit). ``seen``: the room as the caller read it (and checked
        the limit on); ``False`` when the company is a member or invited already, or the room
        gained members or invitations since (nothing written: read again; a room item without an
        ``invited`` map, written before invitations, gets an empty one for the next attempt)."""
        fields = _invitation(room_id, seen.name, company, invited_by, invited_at)
        room = {
            "Update": {
                "TableName": self.table,
                "Key": keys.room_key(room_id),
                "UpdateExpression": "SET invited.#c = :by",
                "ConditionExpression": "attribute_exists(pk) AND NOT contains(members, :one) "
                "AND attribute_not_exists(invited.#c) AND size(members) <= :m AND size(invited) <= :i",
                "ExpressionAttributeNames": {"#c": company},
                "ExpressionAttributeValues": {
                    ":by": invited_by,
                    ":one": company,
                    ":m": len(seen.members),
                    ":i": len(seen.invited),
                },
            }
        }
        items = [
            room,
            self._put({**keys.invitation_key(room_id, company), **fields}, None),
            self._put({**keys.company_invitation_key(company, room_id), **fields}, None),
        ]
        try:
            return self._transact(items)
        except ClientError:
            item = self._item(keys.room_key(room_id))
            if item is None or "invited" in item:
                raise
        # a room item written before invitations has no ``invited`` map (DynamoDB refuses a path
        # into it): give it an empty one, once and conditionally; the caller's next attempt holds the seat
        update_if(
            self.db,
            TableName=self.table,
            Key=keys.room_key(room_id),
            UpdateExpression="SET invited = :none",
            ConditionExpression="attribute_exists(pk) AND attribute_not_exists(invited)",
            ExpressionAttributeValues={":none": {}},
        )
        return False

    def get_invitation(self, room_id: str, company: str) -> dict[str, Any] | None:
        """A company's pending invitation to a room (``room_id``, ``room_name`` when the room has
        one, ``company``, ``invited_by``, ``invited_at``), ``None`` when there is none."""
        item = self._item(keys.invitation_key(room_id, company))
        return strip(item) if item else None

    def accept_invitation(self, room_id: str, company: str, max_members: int | None = None) -> bool:
        """A company accepts its invitation (design §5), in ONE transaction (no half state after a
        crash): its ``INVITE#`` item and index entry gone, out of the room item's ``invited`` map
        into its ``members``, its member item and its index entry of its rooms written. ``False``
        (nothing written) when there is no pending invitation, it is a member already, the room
        has no member left (its last one left) or holds ``max_members`` members already."""
        # a room whose last member left has no one who could have invited: its invitations are
        # being dropped (design §5), none is accepted meanwhile
        condition = (
            "attribute_exists(pk) AND attribute_exists(invited.#c) AND NOT contains(members, :one) "
            "AND size(members) > :none"
        )
        values: dict[str, Any] = {":c": [company], ":one": company, ":none": 0}
        if max_members is not None:
            condition += " AND size(members) < :max"
            values[":max"] = max_members
        return self._transact(
            [
                {
                    "Delete": {
                        "TableName": self.table,
                        "Key": keys.invitation_key(room_id, company),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
                {"Delete": {"TableName": self.table, "Key": keys.company_invitation_key(company, room_id)}},
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": keys.room_key(room_id),
                        "UpdateExpression": "SET members = list_append(members, :c) REMOVE invited.#c",
                        "ConditionExpression": condition,
                        "ExpressionAttributeNames": {"#c": company},
                        "ExpressionAttributeValues": values,
                    }
                },
                self._put({**keys.member_key(room_id, company), "type": "member", "company": company}, None),
                self._put(
                    {**keys.company_room_key(company, room_id), "type": "company_room", "room_id": room_id},
                    None,
                ),
            ]
        )

    def decline_invitation(self, room_id: str, company: str) -> bool:
        """Drop a pending invitation (declined), in one transaction: its ``INVITE#`` item, its
        index entry and its entry in the room item's ``invited`` map (the seat it held is free).
        ``False`` (nothing written) when there is none."""
        return self._transact(
            [
                {
                    "Delete": {
                        "TableName": self.table,
                        "Key": keys.invitation_key(room_id, company),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
                {"Delete": {"TableName": self.table, "Key": keys.company_invitation_key(company, room_id)}},
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": keys.room_key(room_id),
                        "UpdateExpression": "REMOVE invited.#c",
                        "ConditionExpression": "attribute_exists(pk)",
                        "ExpressionAttributeNames": {"#c": company},
                    }
                },
            ]
        )

    def invitations_of(self, company: str) -> list[dict[str, Any]]:
        """A company's pending invitations, in room id order."""
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": keys.company_pk(company), ":p": keys.INVITE_PREFIX},
        )
        return [strip(i) for i in items]

    def remove_member(self, room_id: str, company: str, members: list[str]) -> bool:
        """A company leaves a room: out of its ``members`` (``members`` as the caller read them),
        its member item and its index entry gone; ``False`` when the room changed meanwhile."""
        if company not in members:
            return False
        at = members.index(company)
        return self._transact(
            [
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": keys.room_key(room_id),
                        "UpdateExpression": f"REMOVE members[{at}]",
                        "ConditionExpression": f"members[{at}] = :c",
                        "ExpressionAttributeValues": {":c": company},
                    }
                },
                {"Delete": {"TableName": self.table, "Key": keys.member_key(room_id, company)}},
                {"Delete": {"TableName": self.table, "Key": keys.company_room_key(company, room_id)}},
            ]
        )

    def rooms_of(self, company: str) -> list[str]:
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": keys.company_pk(company), ":p": keys.ROOM_PREFIX},
        )
        return [i["room_id"] for i in items]

    def rooms_page(self, company: str, limit: int, cursor: str | None = None) -> Page:
        """One page of the ids of the rooms ``company`` is a member of, in id order (part
        ``rooms``): one bounded query of its ``ROOM#`` index entries (design §14), from
        ``cursor`` on (bound to the company). Raises InvalidInput, TransientError."""
        listing = "rooms"
        spec = KeySpec({"pk": keys.company_pk(company)}, {"sk": keys.ROOM_PREFIX})
        start = decode_cursor(cursor, listing, {"rooms": spec})["rooms"]
        query = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
            "ExpressionAttributeValues": {":pk": keys.company_pk(company), ":p": keys.ROOM_PREFIX},
        }
        rows = query_rows(self.db, query, limit, start, ("pk", "sk"))
        return Page(listing, {"rooms": rows.map(lambda i: str(i["room_id"]))})

    def room_agents_page(self, room_id: str, limit: int, cursor: str | None = None) -> Page:
        """One page of the agents placed in a room, in id order (part ``agents``: ``(agent id,
        company)``): one bounded query of its ``AGENT#`` links (design §14), from ``cursor`` on
        (bound to the room). Raises InvalidInput, TransientError."""
        listing = f"agents:{room_id}"
        spec = KeySpec({"pk": keys.room_pk(room_id)}, {"sk": keys.AGENT_PREFIX})
        start = decode_cursor(cursor, listing, {"agents": spec})["agents"]
        query = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
            "ExpressionAttributeValues": {":pk": keys.room_pk(room_id), ":p": keys.AGENT_PREFIX},
        }
        rows = query_rows(self.db, query, limit, start, ("pk", "sk"))
        return Page(listing, {"agents": rows.map(lambda i: (str(i["agent_id"]), str(i["company"])))})

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
            item = self._item(keys.agent_key(agent_id))
            company = str(item["company"]) if item else None
        if not company:
            raise ValueError(f"agent {agent_id!r} is not registered: no company to link")
        # each placement its own id (kept when the same agent is linked again): a run carries the
        # one its claim read, so a run from before a removal stays stopped once it is placed again
        link = {
            "TableName": self.table,
            "Key": keys.room_agent_key(room_id, agent_id),
            "UpdateExpression": "SET #t = :t, agent_id = :a, company = :c, placement = if_not_exists(placement, :p)",
            "ExpressionAttributeNames": {"#t": "type"},
            "ExpressionAttributeValues": {":t": "room_agent", ":a": agent_id, ":c": company, ":p": uuid.uuid4().hex},
        }
        name = {
            "TableName": self.table,
            "Item": {
                **keys.agent_name_key(room_id, agent_id),
                "type": "room_agent_name",
                "agent_id": agent_id,
                "company": company,
            },
            "ConditionExpression": "attribute_not_exists(pk) OR agent_id = :me",
            "ExpressionAttributeValues": {":me": agent_id},
        }
        meta = {
            "TableName": self.table,
            "Key": keys.room_key(room_id),
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
        failed = transact(self.db, [{"Update": link}, {"Put": name}, {"Update": entry}])
        if failed and failed[1]:
            return False  # another agent of that name
        if failed:
            if max_agents is not None and self._item(keys.room_key(room_id), True) is not None:
                raise LimitReached(f"room {room_id!r} holds {max_agents} agents", max_agents, "MAX_ROOM_AGENTS")
            raise ValueError(f"room {room_id!r} does not exist")
        return True

    def remove_room_agent(self, room_id: str, agent_id: str) -> bool:
        """Take an agent out of a room, in one transaction: its link item, the room's name item
        for it (only while it names this agent) and its entry in the room item's ``agents`` map.
        ``False`` when it was not in the room (nothing to do). Raises TransientError on
        throttling or a conflicting transaction."""
        link = self._item(keys.room_agent_key(room_id, agent_id), True)
        if link is None:
            return False
        unlink = {"Delete": {"TableName": self.table, "Key": keys.room_agent_key(room_id, agent_id)}}
        unlist = {
            "Update": {
                "TableName": self.table,
                "Key": keys.room_key(room_id),
                "UpdateExpression": "REMOVE agents.#a",
                "ConditionExpression": "attribute_exists(pk)",
                "ExpressionAttributeNames": {"#a": agent_id},
            }
        }
        unname = {
            "Delete": {
                "TableName": self.table,
                "Key": keys.agent_name_key(room_id, agent_id),
                "ConditionExpression": "attribute_not_exists(pk) OR agent_id = :me",
                "ExpressionAttributeValues": {":me": agent_id},
            }
        }
        failed = transact(self.db, [unlink, unname, unlist])
        if failed and failed[1]:  # the name names another agent: leave it, take out the rest
            transact(self.db, [unlink, unlist])
        return True

    def named_room_agents(self, room_id: str, refs: list[str]) -> dict[str, str]:
        """The agents of the room that ``refs`` name → their companies: a ref is an agent's full
        id (``acme.planner``: its link item) or its name, letter case aside (``Planner``: the
        room's name item, one agent per name). One consistent ``BatchGetItem`` whatever the
        room's size (a rights decision rests on the companies it returns), one per 99 distinct
        refs: the callers bound them (:data:`quayutec.logic.phases.decide_and_post.MAX_NAMED_REFS`).
        Raises TransientError as :meth:`run_reads`."""
        wanted = list(
            dict.fromkeys((key["pk"], key["sk"]) for key in (keys.room_ref_key(room_id, ref) for ref in refs if ref))
        )
        out: dict[str, str] = {}
        for start in range(0, len(wanted), 99):
            found, _ = self._batch_get(wanted[start : start + 99])
            out.update({str(i["agent_id"]): str(i["company"]) for i in found.values() if "company" in i})
        return out

    def room_agents(self, room_id: str) -> dict[str, str]:
        """The agents of a room → their companies: one query (each link carries its agent's
        company)."""
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": keys.room_pk(room_id), ":p": keys.AGENT_PREFIX},
        )
        return {str(i["agent_id"]): str(i["company"]) for i in items}

    def room_agent_ids(self, room_id: str) -> list[str]:
        """The agents of a room (bounded by the number of agents registered in it)."""
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": keys.room_pk(room_id), ":p": keys.AGENT_PREFIX},
        )
        return [i["agent_id"] for i in items]

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
        ``index_pk``: the partition of the room's index pointer, :func:`quayutec.dal.keys.files_pk`;
        ``chain``: ``(table, key)`` of the wake's chain counter in another table, read in the same
        call). Consistent: the agent's company and the wake's cause are what rights rest on
        (design §2). Raises TransientError when DynamoDB leaves keys unprocessed after a few attempts."""
        wanted = {
            "agent": keys.agent_key(agent_id),
            "room": keys.room_key(room_id),
            "index": {"pk": index_pk, "sk": "INDEX"},
            "link": keys.room_agent_key(room_id, agent_id),
        }
        if cause_kind == "message":
            wanted["message"] = keys.message_key(room_id, cause_id)
        else:
            wanted["task"] = keys.task_key(room_id, str(task_id))
            wanted["task_event"] = keys.task_event_key(room_id, str(task_id), cause_id)
        pairs = {name: (key["pk"], key["sk"]) for name, key in wanted.items()}
        items, other = self._batch_get(list(pairs.values()), chain)
        got = {name: items.get(pair) for name, pair in pairs.items()}
        out = RunReads()
        if other is not None:
            out.chain_runs = int(other.get("runs", 0))
            out.chain_stopped = "stopped_at" in other
        if got["agent"]:
            out.agent = Agent.model_validate(strip(got["agent"]))
        if got["room"]:
            out.room = room_of(got["room"])
            out.agents = {str(a): str(c) for a, c in got["room"]["agents"].items()}
            out.memory = {str(k) for k in got["room"]["memory"]}
        if message := got.get("message"):
            out.message = Message.model_validate(strip(message))
        if task := got.get("task"):
            out.task = Task.model_validate(strip(task))
        if task_event := got.get("task_event"):
            out.task_event = TaskEvent.model_validate(strip(task_event))
        if got["index"]:
            out.index = pointer_of(got["index"])
        if got["link"] and got["link"].get("placement"):
            out.placement = str(got["link"]["placement"])
        return out

    def put_outbox(
        self, room_id: str, outbox_id: str, run_id: str, wakes: list[Wake], guard: Guard | None = None
    ) -> bool:
        """The wakes of a run's action writes, as one item (sent by the stream dispatcher).
        ``guard``: the run's stop guard (raises RunStopped)."""
        return put_guarded(
            self.db,
            self.table,
            {
                **keys.outbox_key(room_id, outbox_id),
                "type": "outbox",
                "run_id": run_id,
                **wakes_attrs(wakes),
            },
            guard,
        )
