"""The one place where errors become HTTP responses (design §5/issue 4): domain exceptions
(:class:`quayutec.errors.QuayError` and its ``http_status``), request validation, unknown routes,
the idempotency layer's errors, and anything unexpected (500, logged, never the exception text).

Every error body is ``{"error": code, "message": text, "fields": [...]}`` (``fields`` may be
empty). :data:`ERRORS` is the one table of error codes, their status and when they are answered:
the OpenAPI document declares its rows per route, docs/api.md's error table is checked against it,
and ``quay dev``'s gateway (like the deployed API Gateway's Gateway Responses) answers its
``gateway`` rows in the same shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from quayutec.api.body import MalformedJson, UnsupportedMediaType
from quayutec.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    LimitReached,
    Misconfigured,
    NotFound,
    PayloadTooLarge,
    QuayError,
    TransientError,
)


class Unauthenticated(QuayError):
    """No caller identity reached the handler (the authorizer's context is missing)."""

    http_status = 401


class MethodNotAllowed(QuayError):
    """The path exists, not with this method."""

    http_status = 405

    def __init__(self, message: str, allow: list[str]) -> None:
        super().__init__(message)
        self.allow = allow


class IdempotencyInProgress(QuayError):
    """A request with the same Idempotency-Key is still being handled."""

    http_status = 409
    retry_after_s = 2


class IdempotencyKeyReused(QuayError):
    """The Idempotency-Key was used before with a different request."""

    http_status = 422


@dataclass(frozen=True)
class ErrorCode:
    status: int
    when: str
    #: Answered by the gateway (API Gateway / quay dev) before the function, not by the handler.
    gateway: bool = False


#: Every error code the API answers: code -> status and when (docs/api.md's error table).
ERRORS: dict[str, ErrorCode] = {
    "invalid_input": ErrorCode(
        400, "a value the domain refuses (unknown recipient, bad cursor, malformed Idempotency-Key, ...)"
    ),
    "malformed_json": ErrorCode(
        400,
        "the body (or a cursor) is not valid JSON, is nested too deep, or holds a "
        "number out of range: the message names the line and column",
    ),
    "bad_request": ErrorCode(400, "a request the router refuses before any route"),
    "unauthenticated": ErrorCode(401, "no, unknown or revoked token", gateway=True),
    "forbidden": ErrorCode(
        403,
        "an operator-only call, a company's own resource of another company, deciding another company's approval",
        gateway=True,
    ),
    "not_found": ErrorCode(404, "an unknown id (or a room you are not in)"),
    "no_route": ErrorCode(404, "an unknown path"),
    "method_not_allowed": ErrorCode(405, "a known path with another method (`Allow` names the methods)"),
    "conflict": ErrorCode(409, "the id exists, the task is closed, the approval was decided"),
    "limit_reached": ErrorCode(
        409, "a room's agents or member companies, a company's people or policy rules at their limit (named)"
    ),
    "request_in_progress": ErrorCode(409, "a repeat of an Idempotency-Key still running (`Retry-After`)"),
    "payload_too_large": ErrorCode(
        413, "a body over 64 KiB (10 MiB at the gateway), a message text over 32 KiB of UTF-8", gateway=True
    ),
    "unsupported_media_type": ErrorCode(415, "a body whose Content-Type is not application/json"),
    "validation_error": ErrorCode(
        422,
        "the body, query or path does not fit the model: `fields` names each "
        "(`body.text`, `query.limit`, `path.room_id`)",
    ),
    "idempotency_key_reused": ErrorCode(422, "an Idempotency-Key used before with a different request"),
    "throttled": ErrorCode(429, "the gateway's rate limit (`Retry-After`)", gateway=True),
    "internal_error": ErrorCode(500, "a fault of the service (logged); never caused by client input", gateway=True),
    "misconfigured": ErrorCode(
        500, "the deployed function lacks a setting it reads (the message names it): the operator's to fix"
    ),
    "bad_gateway": ErrorCode(502, "the API function failed or gave no answer", gateway=True),
    "unavailable": ErrorCode(503, "a transient fault (throttling, a busy store): retry after `Retry-After`"),
    "gateway_timeout": ErrorCode(504, "the function took longer than the gateway waits (29 s)", gateway=True),
}


_CODES: list[tuple[type[QuayError], str]] = [
    (MalformedJson, "malformed_json"),
    (UnsupportedMediaType, "unsupported_media_type"),
    (Unauthenticated, "unauthenticated"),
    (MethodNotAllowed, "method_not_allowed"),
    (PayloadTooLarge, "payload_too_large"),
    (IdempotencyInProgress, "request_in_progress"),
    (IdempotencyKeyReused, "idempotency_key_reused"),
    (LimitReached, "limit_reached"),
    (NotFound, "not_found"),
    (Forbidden, "forbidden"),
    (Conflict, "conflict"),
    (InvalidInput, "invalid_input"),
    (TransientError, "unavailable"),
    (Misconfigured, "misconfigured"),
]


def code_of(exc: QuayError) -> str:
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    return "bad_request"


def error_payload(status: int, code: str, message: str, fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"error": code, "message": message, "fields": list(fields or [])}


def fields_of(exc: Exception) -> list[dict[str, Any]]:
    fields = getattr(exc, "fields", None)
    return list(fields()) if callable(fields) else []


def headers_for(exc: Exception) -> dict[str, str]:
    if isinstance(exc, IdempotencyInProgress):
        return {"Retry-After": str(exc.retry_after_s)}
    if isinstance(exc, TransientError):
        return {"Retry-After": "1"}
    if isinstance(exc, MethodNotAllowed):
        return {"Allow": ", ".join(exc.allow)}
    return {}


def status_of(exc: QuayError) -> int:
    status = int(getattr(exc, "http_status", 400) or 400)
    return status if 400 <= status <= 599 else 400


def field_problems(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pydantic/Powertools validation errors as ``{"field", "problem", "type"}`` (never the
    rejected input itself)."""
    out = []
    for e in errors:
        loc = [str(x) for x in e.get("loc", ())]
        problem = str(e.get("msg") or e.get("type", "invalid"))
        if e.get("type") == "value_error":  # a validator's own words, without pydantic's "Value error, "
            problem = problem.removeprefix("Value error, ")
        elif loc[:1] == ["query"] and isinstance(e.get("input"), list):  # Powertools: a repeated parameter
            problem = f"given {len(e['input'])} times: give it once"
        out.append({"field": ".".join(loc) or "body", "problem": problem, "type": str(e.get("type", "invalid"))})
    return out


def validation_message(fields: list[dict[str, Any]]) -> str:
    if not fields:
        return "the request is not valid"
    first = fields[0]
    more = f" (and {len(fields) - 1} more)" if len(fields) > 1 else ""
    return f"{first['field']}: {first['problem']}{more}"


def proxy_response(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    """An API Gateway proxy (v1) response, for errors raised outside the resolver."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "multiValueHeaders": {},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


def exception_response(exc: QuayError) -> dict[str, Any]:
    status = status_of(exc)
    return proxy_response(
        status,
        error_payload(status, code_of(exc), str(exc) or HTTPStatus(status).phrase, fields_of(exc)),
        headers_for(exc),
    )
