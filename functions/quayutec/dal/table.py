"""The room table's store base: its client and table, the reads and writes every aggregate's
store uses (:mod:`quayutec.dal.store` composes them), and what an item says apart from its keys.
Keys: :mod:`quayutec.dal.keys`."""

from __future__ import annotations

import time
from typing import Any

from quayutec import resources as r
from quayutec.dal import keys
from quayutec.dal.aws import (
    dynamodb,
    put_new,
    transact_new,
    transient_errors,
)
from quayutec.errors import TransientError
from quayutec.models import (
    Wake,
)

NOT_EXISTS = "attribute_not_exists(pk)"
#: BatchGetItem attempts at the keys DynamoDB left unprocessed (throttling) before giving up.
_BATCH_ATTEMPTS = 5
#: What :func:`strip` drops: the keys, the wakes an item carries for the stream, its type.
_NOT_CONTENT = keys.KEY_ATTRS | {"wakes", r.HAS_WAKES_ATTR, "type"}


def wakes_attrs(wakes: list[Wake]) -> dict[str, Any]:
    """The attributes of an item that carries ``wakes``: the list, and the scalar marker the
    stream's event filter matches (``resources.ROOM_STREAM_FILTER``, docs/design.md §3)."""
    return {"wakes": [w.model_dump(mode="json") for w in wakes], r.HAS_WAKES_ATTR: True}


def strip(item: dict[str, Any]) -> dict[str, Any]:
    """What an item says: without its keys, wakes and type."""
    return {k: v for k, v in item.items() if k not in _NOT_CONTENT}


class RoomTable:
    """Reads and conditional writes of the room table. ``client``: a DynamoDB client taking
    Python values (defaults to :func:`quayutec.dal.aws.dynamodb`)."""

    def __init__(self, table_name: str, client: Any | None = None) -> None:
        self.table = table_name
        self._client = client

    @property
    def db(self) -> Any:
        return self._client or dynamodb()

    def _put_new(self, item: dict[str, Any]) -> bool:
        """Conditional put; ``True`` when written, ``False`` when the key already existed."""
        return put_new(self.db, self.table, item)

    def _item(self, key: dict[str, str], consistent: bool = True) -> dict[str, Any] | None:
        """The item of ``key`` (:mod:`quayutec.dal.keys`), ``None`` when there is none."""
        with transient_errors():
            resp = self.db.get_item(TableName=self.table, Key=key, ConsistentRead=consistent)
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

    def _transact(self, items: list[dict[str, Any]]) -> bool:
        """A transaction; ``False`` when one of its conditions failed."""
        return transact_new(self.db, items)

    def _put(self, item: dict[str, Any], condition: str | None = NOT_EXISTS) -> dict[str, Any]:
        put: dict[str, Any] = {"TableName": self.table, "Item": item}
        if condition:
            put["ConditionExpression"] = condition
        return {"Put": put}
