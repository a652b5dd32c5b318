"""Bounded pages of DynamoDB queries and their cursors (docs/design.md §14).

Every listing reads a page with ``Query`` (``Limit``, ``ExclusiveStartKey``), never the whole
history: :func:`query_rows` reads at most ``limit`` items (a page DynamoDB cut short at 1 MB is
continued, each query asking for what is still missing) or, for a listing with a
``FilterExpression``, at most :data:`FILTERED_READS` queries. What it read comes back as
:class:`Rows`: the items, each item's key (the ``ExclusiveStartKey`` that reads on after it) and
where the read stopped, so the API can cut a page short (its byte bound,
:mod:`quayutec.api.pages`) and still hand out the exact position to continue at.

A cursor (:func:`encode_cursor`, :func:`decode_cursor`) is opaque to clients: base64url of a small
JSON document ``{"v": 1, "l": listing, "p": {part: key | "end"}}``: a version, the listing it
belongs to, and per part of the page (a page of runs has two: ``runs`` and ``not_started``;
memory one per partition) the key of the last item handed out or ``"end"``. Decoding checks the
version and listing, and every key against the partition the caller may read (its attributes,
their fixed values and sort-key prefixes): a cursor from another listing, room or company, or a
tampered one, is refused with InvalidInput (400), never used and never a 500.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from quayutec.dal.aws import transient_errors
from quayutec.errors import InvalidInput

T = TypeVar("T")
U = TypeVar("U")

#: A listing's page size: at least 1, at most this many items.
MAX_LIMIT = 200
#: A filtered listing (hidden notices, a status) reads at most this many queries per page...
FILTERED_READS = 8
#: ...each after the first evaluating at least this many items.
READ_AHEAD = 100
#: The version of the cursor document; another version is refused.
CURSOR_VERSION = 1
#: A key attribute value in a cursor: at most this many characters.
_MAX_KEY_VALUE = 1024


class _End:
    """The position past a part's last item (its query ended)."""

    _instance: _End | None = None

    def __new__(cls) -> _End:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "END"


END = _End()
#: Where a part of a page starts or stops: ``None`` its beginning, a key (read on after it), or
#: :data:`END`.
Position = dict[str, Any] | _End | None


@dataclass(frozen=True)
class Rows(Generic[T]):
    """What one bounded read found: ``items`` in the query's order, ``keys[i]`` the key that
    reads on after ``items[i]``, ``start`` the position the read started at and ``end`` the one
    after everything read (:data:`END`: the query ended; else a key to read on from)."""

    items: list[T]
    keys: list[dict[str, Any]] = field(default_factory=list)
    start: Position = None
    end: Position = END

    def head(self, n: int) -> Rows[T]:
        """The first ``n`` rows, ending where the ``n``-th ends."""
        return Rows(self.items[:n], self.keys[:n], self.start, self.position(n))

    def position(self, n: int) -> Position:
        """The position after the first ``n`` items (``n == len(items)``: :attr:`end`)."""
        if n >= len(self.items):
            return self.end
        return self.start if n <= 0 else self.keys[n - 1]

    def map(self, fn: Callable[[T], U]) -> Rows[U]:
        """The same rows with each item passed through ``fn`` (keys and positions kept)."""
        return Rows([fn(i) for i in self.items], self.keys, self.start, self.end)


def key_of(item: Mapping[str, Any], attrs: tuple[str, ...]) -> dict[str, Any]:
    """An item's key: its ``attrs`` (the table's key and the index's)."""
    return {a: item[a] for a in attrs}


def query_rows(
    db: Any, query: dict[str, Any], limit: int, start: Position, attrs: tuple[str, ...], *, filtered: bool = False
) -> Rows[dict[str, Any]]:
    """Up to ``limit`` items of one DynamoDB ``Query`` (``query``: its keyword arguments,
    ``TableName`` included, no ``Limit`` or ``ExclusiveStartKey``) from ``start`` on, as
    :class:`Rows` keyed by ``attrs`` (the table's key attributes and the index's).

    Unfiltered, each query asks for what is still missing, so nothing past ``limit`` is read; a
    page DynamoDB cut short (1 MB) is read on. ``filtered`` (the query has a
    ``FilterExpression``, which DynamoDB applies after ``Limit``): at most
    :data:`FILTERED_READS` queries, the first of ``limit`` items, later ones of at least
    :data:`READ_AHEAD`; a page may then be short and still have a next position (it is the
    last item's key, or, when the reads found nothing, the last evaluated key: a position only).
    Raises TransientError on throttling."""
    if start is END:
        return Rows([], [], END, END)
    kwargs = dict(query)
    items: list[dict[str, Any]] = []
    last: dict[str, Any] | None = start if isinstance(start, dict) else None
    reads = 0
    with transient_errors():
        while len(items) < limit:
            if last is not None:
                kwargs["ExclusiveStartKey"] = last
            wanted = limit - len(items)
            kwargs["Limit"] = wanted if not filtered or reads == 0 else max(wanted, READ_AHEAD)
            page = db.query(**kwargs)
            reads += 1
            items += page.get("Items", [])
            last = page.get("LastEvaluatedKey")
            if last is None or (filtered and reads >= FILTERED_READS):
                break
    end: Position = END if last is None else last
    if len(items) > limit:
        items = items[:limit]
        end = key_of(items[-1], attrs)
    elif items and last is not None:
        end = key_of(items[-1], attrs)  # the last item's key: nothing past it is skipped
    return Rows(items, [key_of(i, attrs) for i in items], start, end)


@dataclass(frozen=True)
class Page:
    """A listing's page as read: its ``parts`` (name → :class:`Rows`, in the order a byte bound
    fills them) and the ``listing`` its cursor belongs to. :meth:`cursor` hands out the cursor
    of the next page once the caller knows how many items of each part it keeps."""

    listing: str
    parts: dict[str, Rows[Any]]
    #: The page's items in its order, as the part each comes from (each part's items in their
    #: own order): a page merged from several parts. ``None``: the parts one after another.
    order: list[str] | None = None

    def sequence(self) -> list[str]:
        """:attr:`order`, or the parts one after another."""
        if self.order is not None:
            return self.order
        return [name for name, rows in self.parts.items() for _ in rows.items]

    def cursor(self, kept: Mapping[str, int] | None = None) -> str | None:
        """The next page's cursor when the first ``kept[part]`` items of each part are handed
        out (``None``: all of them); ``None`` on the last page."""
        return encode_cursor(
            self.listing,
            {name: rows.position(len(rows.items) if kept is None else kept[name]) for name, rows in self.parts.items()},
        )

    def map(self, fn: Callable[[Any], Any]) -> Page:
        """The same page with every item of every part passed through ``fn``."""
        return Page(self.listing, {name: rows.map(fn) for name, rows in self.parts.items()}, self.order)

    def only(self) -> Rows[Any]:
        """The one part of a single-part page."""
        (rows,) = self.parts.values()
        return rows


# ----------------------------------------------------------------------------- cursors
@dataclass(frozen=True)
class KeySpec:
    """What a part's cursor key must be: exactly the attributes of ``fixed`` and ``prefixed``,
    strings, ``fixed`` ones equal to their values (the partitions the caller may read) and
    ``prefixed`` ones starting with theirs (a sort key in the caller's range)."""

    fixed: Mapping[str, str]
    prefixed: Mapping[str, str] = field(default_factory=dict)

    def check(self, key: Mapping[str, Any]) -> bool:
        if set(key) != set(self.fixed) | set(self.prefixed):
            return False
        if any(not isinstance(v, str) or len(v) > _MAX_KEY_VALUE for v in key.values()):
            return False
        return all(key[a] == v for a, v in self.fixed.items()) and all(
            str(key[a]).startswith(p) for a, p in self.prefixed.items()
        )


class _CursorDoc(BaseModel):
    """A cursor's document (pydantic's JSON parser: bounded depth, strings only in keys)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)
    v: int
    l: str = Field(max_length=256)  # noqa: E741 - the document's short field names keep cursors short
    p: dict[str, dict[str, str] | Literal["end"]] = Field(max_length=8)


def encode_cursor(listing: str, parts: Mapping[str, Position]) -> str | None:
    """The cursor of the next page: ``parts`` each at its position (``None``: not begun, left
    out). ``None`` when every part has ended (the last page)."""
    if all(p is END for p in parts.values()):
        return None
    doc = {
        "v": CURSOR_VERSION,
        "l": listing,
        "p": {name: ("end" if p is END else p) for name, p in parts.items() if p is not None},
    }
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, listing: str, specs: Mapping[str, KeySpec]) -> dict[str, Position]:
    """Each part's position (``specs``: the parts of ``listing``, each with what its keys must
    be) from a cursor :func:`encode_cursor` made; ``None``: every part from its beginning.
    Raises InvalidInput (``invalid cursor: ...``) for anything else: not base64url JSON,
    another version or listing, an unknown part, a key outside the caller's partition."""
    if cursor is None:
        return dict.fromkeys(specs)
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        doc = _CursorDoc.model_validate_json(raw)
    except (binascii.Error, ValueError):  # pydantic's ValidationError is a ValueError
        raise InvalidInput("invalid cursor: not a cursor this API returned") from None
    if doc.v != CURSOR_VERSION or doc.l != listing:
        raise InvalidInput(f"invalid cursor: not a cursor of this listing ({listing})")
    if not doc.p or not set(doc.p) <= set(specs):
        raise InvalidInput("invalid cursor: not a cursor this API returned")
    out: dict[str, Position] = dict.fromkeys(specs)
    for name, at in doc.p.items():
        if at == "end":
            out[name] = END
        elif isinstance(at, dict) and specs[name].check(at):
            out[name] = dict(at)
        else:
            raise InvalidInput("invalid cursor: it belongs to another room, company or listing")
    return out
