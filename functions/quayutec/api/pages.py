"""The byte bound of every listing's page (docs/design.md §14), in the API's own serializer.

The resolver serializes answers with :data:`SERIALIZER` (``quayutec.api.app`` passes it), and
:func:`fit` measures each item of a page with the same function, escapes included (``\\x01`` is
six bytes, an emoji twelve: the answer is ASCII): it keeps items while the items of the page
stay within :data:`PAGE_BYTES` and stops before the first that would pass it, and the page's
cursor then continues at that item. A page always holds at least one item (one item is at most
a DynamoDB item, 400 KB, six bytes a character at worst: still well under Lambda's 6 MB answer),
so every listing's answer stays under Lambda's 6 MB and API Gateway's 10 MB whatever the content.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.shared.json_encoder import Encoder
from pydantic import BaseModel

from quayutec.dal.pages import Page

#: The API's JSON serializer (Powertools' default, named here so the byte bound measures what
#: the resolver writes): compact separators, ASCII only.
SERIALIZER = functools.partial(json.dumps, separators=(",", ":"), cls=Encoder)
#: The items of one page serialize to at most this many bytes (the answer's envelope, its
#: ``next_cursor`` and field names, a few KB more), unless its first item alone is larger.
PAGE_BYTES = 1_000_000


def serialized_bytes(item: Any) -> int:
    """How many bytes ``item`` (a pydantic model or a JSON value) takes in the API's answer."""
    value = item.model_dump(mode="json") if isinstance(item, BaseModel) else item
    return len(SERIALIZER(value).encode("utf-8"))


@dataclass(frozen=True)
class Fitted:
    """What a page hands out: each part's items (``parts``), all of them in the page's order
    (``items``) and the next page's cursor (``None``: the last page)."""

    parts: dict[str, list[Any]]
    items: list[Any]
    next_cursor: str | None


def fit(page: Page, budget: int | None = None) -> Fitted:
    """The items of ``page`` that the page hands out, in its order
    (:meth:`quayutec.dal.pages.Page.sequence`), from one budget (``None``: :data:`PAGE_BYTES`):
    once an item does not fit, no later item is added, and the cursor continues at it."""
    budget = PAGE_BYTES if budget is None else budget
    used = 0
    kept = dict.fromkeys(page.parts, 0)
    items: list[Any] = []
    for name in page.sequence():
        item = page.parts[name].items[kept[name]]
        size = serialized_bytes(item) + (1 if items else 0)  # the comma before it
        if items and used + size > budget:
            break
        used += size
        kept[name] += 1
        items.append(item)
    return Fitted({n: page.parts[n].items[:k] for n, k in kept.items()}, items, page.cursor(kept))
