"""Messages in the room table (their own partition per room; GSI ``by_time``), read a page at a
time or as a run's recent context, without other companies' company-only notices (design §12.5,
§14); a page cursor is the last item's key, checked to belong to the room."""

from __future__ import annotations

from typing import Any

from quayutec.dal import keys
from quayutec.dal.aws import (
    Guard,
    paginate_query,
    put_guarded,
    transact_guarded,
    transient_errors,
)
from quayutec.dal.pages import KeySpec, Page, decode_cursor, query_rows
from quayutec.dal.table import NOT_EXISTS, RoomTable, strip, wakes_attrs
from quayutec.models import (
    Message,
    Wake,
)

#: What a company may read of the room's messages (design §12.5): those for the whole room and its
#: own company-only notices. A FilterExpression: DynamoDB applies it after ``Limit``, so a query
#: may return fewer items than it evaluated (:func:`visible_messages` reads on).
_VISIBLE = "attribute_not_exists(visible_to) OR visible_to = :reader"
#: A page of messages reads at most this many times to fill itself past hidden notices...
VISIBLE_READS = 8
#: ...each read after the first evaluating at least this many items.
_READ_AHEAD = 100


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
    return [Message.model_validate(strip(i)) for i in items], start


def _message_key(item: dict[str, Any]) -> dict[str, Any]:
    """A message item's key on the ``by_time`` GSI (an ``ExclusiveStartKey``: the index's key
    and the table's)."""
    return {k: item[k] for k in keys.MESSAGE_KEY}


class MessageRecords(RoomTable):
    """A room's messages: ``ROOM#{id}#MSG`` / ``MSG#{msg}``."""

    def _message_item(self, message: Message, wakes: list[Wake] | None) -> dict[str, Any]:
        key = keys.message_key(message.room_id, message.id)
        item = {
            **key,
            "type": "message",
            "gsi2pk": key["pk"],
            "gsi2sk": keys.time_sk(message.created_at, message.id),
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
            {"Put": {"TableName": self.table, "Item": self._message_item(m, w), "ConditionExpression": NOT_EXISTS}}
            for m, w in messages
        ] + [also]
        failed = transact_guarded(self.db, items, guard)
        return None if failed is None else (failed[:-1], failed[-1])

    def get_message(self, room_id: str, message_id: str) -> Message | None:
        item = self._item(keys.message_key(room_id, message_id))
        return Message.model_validate(strip(item)) if item else None

    def recent_messages(self, room_id: str, limit: int, *, reader: str) -> list[Message]:
        """The newest ``limit`` messages a person or agent of company ``reader`` may read, oldest
        first: bounded queries on the ``by_time`` GSI (eventually consistent: a message written a
        moment ago may be missing, design §14), reading past other companies' company-only
        notices (:func:`visible_messages`, design §12.5)."""
        query = {
            "TableName": self.table,
            "IndexName": "by_time",
            "KeyConditionExpression": "gsi2pk = :pk",
            "ExpressionAttributeValues": {":pk": keys.message_pk(room_id)},
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
            ExpressionAttributeValues={":pk": keys.message_pk(room_id)},
        )
        return [Message.model_validate(strip(i)) for i in items]

    def messages_page(
        self, room_id: str, limit: int, cursor: str | None = None, newest_first: bool = False, *, reader: str
    ) -> Page:
        """One page of the room's messages that a person of company ``reader`` may read, in time
        order (``newest_first``: newest first), from ``cursor`` on; one part, ``messages``. Other
        companies' company-only notices are left out and the page is read on past them,
        boundedly (:func:`quayutec.dal.pages.query_rows`, filtered: a page is short only when it
        has a next position, design §12.5, §14). The cursor binds the room and the order.
        Raises InvalidInput (a cursor this listing did not hand out)."""
        pk = keys.message_pk(room_id)
        listing = f"messages:{'desc' if newest_first else 'asc'}:{room_id}"
        spec = KeySpec({"pk": pk, "gsi2pk": pk}, {"sk": keys.MESSAGE_PREFIX, "gsi2sk": ""})
        start = decode_cursor(cursor, listing, {"messages": spec})["messages"]
        query: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "by_time",
            "KeyConditionExpression": "gsi2pk = :pk",
            "FilterExpression": _VISIBLE,
            "ExpressionAttributeValues": {":pk": pk, ":reader": reader},
            "ScanIndexForward": not newest_first,
        }
        rows = query_rows(self.db, query, limit, start, keys.MESSAGE_KEY, filtered=True)
        return Page(listing, {"messages": rows.map(lambda i: Message.model_validate(strip(i)))})
