"""What the API needs of the room table beyond :class:`~quayutec.dal.room.RoomStore`: creating
companies, rooms, memberships and agents once (conditional writes, so a second create is a
conflict, not an overwrite), the per-company indexes, and paged reads.

Items written here use RoomStore's layout (see ``quayutec.dal.room``), plus:

* ``COMPANY#{company}`` / ``ROOM#{room}`` — a room the company is a member of
* ``COMPANY#{company}`` / ``AGENT#{agent}`` — an agent the company owns
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field

from quayutec.dal.aws import is_condition_failure, paginate_query, transact_new, transient_errors, update_if
from quayutec.dal.room import MESSAGE_KEY, RoomStore, message_pk, visible_messages
from quayutec.errors import InvalidInput, NotFound
from quayutec.models import Agent, Company, Message, RightsPolicy, Room

_NOT_EXISTS = "attribute_not_exists(pk)"


def encode_cursor(key: dict[str, Any] | None) -> str | None:
    if not key:
        return None
    return base64.urlsafe_b64encode(json.dumps(key, sort_keys=True).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, *, pk: str, prefix: str) -> dict[str, str]:
    """A page cursor back to DynamoDB's ``ExclusiveStartKey``, checked to belong to this
    partition and index (``pk`` is also the index's partition: a cursor can never reach
    another room). Raises InvalidInput."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = _CursorKey.model_validate_json(raw)  # pydantic's parser: bounded depth, never a RecursionError
    except (binascii.Error, ValueError):  # pydantic's ValidationError is a ValueError
        raise InvalidInput("cursor is not a cursor this API returned") from None
    if key.pk != pk or key.gsi2pk != pk or not key.sk.startswith(prefix):
        raise InvalidInput("cursor is not a cursor this API returned")
    return key.model_dump()


class _CursorKey(BaseModel):
    """What a page cursor holds: the last item's key (strings only, nothing else)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)
    pk: str = Field(max_length=1024)
    sk: str = Field(max_length=1024)
    gsi2pk: str = Field(max_length=1024)
    gsi2sk: str = Field(max_length=1024)


class Directory:
    """Conditional creates and paged reads on the room table (the store's client and table)."""

    def __init__(self, store: RoomStore) -> None:
        self.store = store

    @property
    def db(self) -> Any:
        return self.store.db

    @property
    def table(self) -> str:
        return self.store.table

    def _transact(self, items: list[dict[str, Any]]) -> bool:
        """A transaction; ``False`` when one of its conditions failed."""
        return transact_new(self.db, items)

    def _put(self, item: dict[str, Any], condition: str | None = _NOT_EXISTS) -> dict[str, Any]:
        put: dict[str, Any] = {"TableName": self.table, "Item": item}
        if condition:
            put["ConditionExpression"] = condition
        return {"Put": put}

    # ------------------------------------------------------------------ companies
    def create_company(self, company: Company) -> bool:
        """Write a new company; ``False`` when the id is taken."""
        item = {"pk": f"COMPANY#{company.id}", "sk": "META", "type": "company", **company.model_dump(mode="json")}
        try:
            with transient_errors():
                self.db.put_item(TableName=self.table, Item=item, ConditionExpression=_NOT_EXISTS)
            return True
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise

    def add_person(self, company_id: str, person: str, max_people: int | None = None) -> bool:
        """Add a person to a company; ``False`` when already there (or no such company), also when
        it holds ``max_people`` people already (the caller tells which: it read the company)."""
        condition = "attribute_exists(pk) AND NOT contains(people, :one)"
        values: dict[str, Any] = {":p": [person], ":one": person}
        if max_people is not None:
            condition += " AND size(people) < :max"
            values[":max"] = max_people
        return update_if(
            self.db,
            TableName=self.table,
            Key={"pk": f"COMPANY#{company_id}", "sk": "META"},
            UpdateExpression="SET people = list_append(people, :p)",
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )

    def external_id(self, company_id: str, candidate: str) -> str:
        """The company's external id for its Bedrock roles (docs/design.md §5): the one it has, or
        ``candidate`` stored as its first (a conditional update: of two first roles at once, one id
        is kept). Raises ``NotFound`` for an unknown company, TransientError on throttling."""
        key = {"pk": f"COMPANY#{company_id}", "sk": "META"}
        stored = update_if(
            self.db,
            TableName=self.table,
            Key=key,
            UpdateExpression="SET external_id = :e",
            # A company written before it had one holds no attribute, or a null one.
            ConditionExpression="attribute_exists(pk) AND "
            "(attribute_not_exists(external_id) OR attribute_type(external_id, :null))",
            ExpressionAttributeValues={":e": candidate, ":null": "NULL"},
        )
        if stored:
            return candidate
        company = self.store.get_company(company_id)
        if company is None or company.external_id is None:
            raise NotFound(f"company {company_id!r} does not exist")
        return company.external_id

    def set_policy(self, company_id: str, policy: RightsPolicy) -> bool:
        return update_if(
            self.db,
            TableName=self.table,
            Key={"pk": f"COMPANY#{company_id}", "sk": "META"},
            UpdateExpression="SET rights = :r",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":r": policy.model_dump(mode="json")},
        )

    # ------------------------------------------------------------------ rooms
    def create_room(self, room: Room) -> bool:
        """Write a new room with its member items and the companies' room index, in one
        transaction; ``False`` when the room id is taken."""
        pk = f"ROOM#{room.id}"
        items = [
            self._put(
                {
                    "pk": pk,
                    "sk": "META",
                    "type": "room",
                    "agents": {},
                    "memory": {},
                    **room.model_dump(mode="json", exclude_none=True),
                }
            )
        ]
        for company in room.members:
            items.append(self._put({"pk": pk, "sk": f"MEMBER#{company}", "type": "member", "company": company}, None))
            items.append(
                self._put(
                    {"pk": f"COMPANY#{company}", "sk": f"ROOM#{room.id}", "type": "company_room", "room_id": room.id},
                    None,
                )
            )
        return self._transact(items)

    def add_member(self, room_id: str, company: str, max_members: int | None = None) -> bool:
        """Make a company a member of a room; ``False`` when it already is, also when the room
        holds ``max_members`` member companies already (the caller tells which: it read the room)."""
        pk = f"ROOM#{room_id}"
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
                        "Key": {"pk": pk, "sk": "META"},
                        "UpdateExpression": "SET members = list_append(members, :c)",
                        "ConditionExpression": condition,
                        "ExpressionAttributeValues": values,
                    }
                },
                self._put({"pk": pk, "sk": f"MEMBER#{company}", "type": "member", "company": company}, None),
                self._put(
                    {"pk": f"COMPANY#{company}", "sk": f"ROOM#{room_id}", "type": "company_room", "room_id": room_id},
                    None,
                ),
            ]
        )

    def rooms_of(self, company: str) -> list[str]:
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": f"COMPANY#{company}", ":p": "ROOM#"},
        )
        return [i["room_id"] for i in items]

    # ------------------------------------------------------------------ agents
    def create_agent(self, agent: Agent) -> bool:
        """Write a new agent and the company's agent index; ``False`` when the id is taken."""
        return self._transact(
            [
                self._put(
                    {
                        "pk": f"AGENT#{agent.id}",
                        "sk": "META",
                        "type": "agent",
                        **agent.model_dump(mode="json", exclude_none=True),
                    }
                ),
                self._put(
                    {
                        "pk": f"COMPANY#{agent.company}",
                        "sk": f"AGENT#{agent.id}",
                        "type": "company_agent",
                        "agent_id": agent.id,
                    },
                    None,
                ),
            ]
        )

    def agents_of(self, company: str) -> list[str]:
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": f"COMPANY#{company}", ":p": "AGENT#"},
        )
        return [i["agent_id"] for i in items]

    # ------------------------------------------------------------------ pages
    def messages_page(
        self, room_id: str, limit: int, cursor: str | None = None, newest_first: bool = False, *, reader: str
    ) -> tuple[list[Message], str | None]:
        """One page of the room's messages that a person of company ``reader`` may read, in time
        order, and the cursor of the next page (``None`` on the last page). Other companies'
        company-only notices are left out and the page is read on past them, boundedly: a page is
        short only when it has a next cursor (:func:`quayutec.dal.room.visible_messages`, design §12.5)."""
        pk = message_pk(room_id)
        query: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "by_time",
            "KeyConditionExpression": "gsi2pk = :pk",
            "ExpressionAttributeValues": {":pk": pk},
            "ScanIndexForward": not newest_first,
        }
        if cursor:
            query["ExclusiveStartKey"] = decode_cursor(cursor, pk=pk, prefix="MSG#")
        messages, last = visible_messages(self.db, query, limit, reader)
        return messages, encode_cursor({k: last[k] for k in MESSAGE_KEY} if last else None)
