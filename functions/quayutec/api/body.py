"""Request bodies (and anything else the client sends as JSON, e.g. page cursors) parsed by
pydantic's own JSON parser, which bounds nesting depth and number size, so no input can make
parsing fail inside (design §5, issue 10):

* a body is JSON only: any other ``Content-Type`` (or none) with a body is 415;
* broken JSON is 400 ``malformed_json`` naming the line and column;
* JSON nested deeper than the parser's limit is 400 (never a ``RecursionError``);
* a number that is not finite or beyond ±(2^53 - 1) is 400 naming where it is.

:func:`parse_json` is also the resolver's ``json_body_deserializer``: the routes' pydantic models
validate what it returned, and Powertools never calls ``json.loads`` on a body.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

from pydantic import JsonValue, TypeAdapter, ValidationError

from quayutec.errors import InvalidInput, QuayError

#: Largest integer magnitude a body may carry (JavaScript's safe integers: every client can
#: represent it exactly).
MAX_SAFE_INT = 2**53 - 1
JSON_MEDIA_TYPE = "application/json"
_WHERE = re.compile(r"at line (\d+) column (\d+)")


@lru_cache(maxsize=1)
def _json() -> TypeAdapter[Any]:
    """The JSON parser-validator, built when the first body is parsed (a GET never needs it)."""
    return TypeAdapter(JsonValue)


class MalformedJson(InvalidInput):
    """The text is not JSON the API accepts (broken, too deep, a number out of range)."""

    def __init__(
        self,
        message: str,
        *,
        field: str = "body",
        line: int | None = None,
        column: int | None = None,
        kind: str = "json_invalid",
    ) -> None:
        super().__init__(message)
        self.field = field
        self.line = line
        self.column = column
        self.kind = kind

    def fields(self) -> list[dict[str, Any]]:
        item: dict[str, Any] = {"field": self.field, "problem": str(self), "type": self.kind}
        if self.line is not None:
            item["line"] = self.line
            item["column"] = self.column
        return [item]


class UnsupportedMediaType(QuayError):
    """A request body that is not ``application/json``."""

    http_status = 415


def media_type(content_type: str | None) -> str:
    """``"application/json"`` of ``"Application/JSON; charset=utf-8"``; ``""`` for none."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def require_json(content_type: str | None) -> str:
    """The ``Content-Type`` with its media type in lower case (``"Application/JSON; charset=utf-8"``
    → ``"application/json; charset=utf-8"``: media types are case-insensitive, RFC 9110 §8.3.1,
    and Powertools' validation compares them as written). Raises :class:`UnsupportedMediaType`
    unless the body's media type is application/json."""
    kind = media_type(content_type)
    if kind != JSON_MEDIA_TYPE:
        shown = kind or "none"
        raise UnsupportedMediaType(f"Content-Type {shown!r} is not supported: send the body as {JSON_MEDIA_TYPE}")
    _, sep, parameters = (content_type or "").partition(";")
    return JSON_MEDIA_TYPE + sep + parameters


def parse_json(text: str | bytes, *, field: str = "body") -> Any:
    """The JSON value of ``text``, parsed by pydantic (bounded depth); raises :class:`MalformedJson`."""
    try:
        value = _json().validate_json(text)
    except ValidationError as exc:
        detail = str(exc.errors(include_url=False, include_input=False)[0].get("msg", "invalid JSON"))
        detail = detail.removeprefix("Invalid JSON: ")
        where = _WHERE.search(detail)
        line, column = (int(where.group(1)), int(where.group(2))) if where else (None, None)
        if "recursion limit" in detail:
            detail = detail.replace("recursion limit exceeded", "nested too deep")
        raise MalformedJson(f"{field}: not valid JSON: {detail}", field=field, line=line, column=column) from None
    _check_numbers(value, field)
    return value


def _check_numbers(value: Any, path: str) -> None:
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, int):
            if abs(item) > MAX_SAFE_INT:
                raise MalformedJson(
                    f"{where}: number out of range (at most {MAX_SAFE_INT} in magnitude)",
                    field=where,
                    kind="number_out_of_range",
                )
        elif isinstance(item, float):
            if not math.isfinite(item) or abs(item) > MAX_SAFE_INT:
                raise MalformedJson(
                    f"{where}: number out of range (finite, at most {MAX_SAFE_INT} in magnitude)",
                    field=where,
                    kind="number_out_of_range",
                )
        elif isinstance(item, dict):
            stack.extend((v, f"{where}.{k}") for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{where}.{i}") for i, v in enumerate(item))
