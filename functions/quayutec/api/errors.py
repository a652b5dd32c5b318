"""The one place where errors become HTTP responses (SPEC §5/issue 4): domain exceptions
(:class:`quayutec.errors.QuayError` and its ``http_status``), request validation, unknown routes,
the idempotency layer's errors, and anything unexpected (500, logged, never the exception text).

Every error body is ``{"error": code, "message": text, "fields": [...]?}``.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from quayutec.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    QuayError,
    TransientError,
)


class Unauthenticated(QuayError):
    """No caller identity reached the handler (the authorizer's context is missing)."""

    http_status = 401


class PayloadTooLarge(QuayError):
    http_status = 413


class IdempotencyInProgress(QuayError):
    """A request with the same Idempotency-Key is still being handled."""

    http_status = 409
    retry_after_s = 2


class IdempotencyKeyReused(QuayError):
    """The Idempotency-Key was used before with a different request."""

    http_status = 422


_CODES: list[tuple[type[QuayError], str]] = [
    (Unauthenticated, "unauthenticated"),
    (PayloadTooLarge, "payload_too_large"),
    (IdempotencyInProgress, "request_in_progress"),
    (IdempotencyKeyReused, "idempotency_key_reused"),
    (NotFound, "not_found"),
    (Forbidden, "forbidden"),
    (Conflict, "conflict"),
    (InvalidInput, "invalid_input"),
    (TransientError, "unavailable"),
]


def code_of(exc: QuayError) -> str:
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    return "bad_request"


def error_payload(status: int, code: str, message: str, fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"error": code, "message": message}
    if fields:
        body["fields"] = fields
    return body


def headers_for(exc: Exception) -> dict[str, str]:
    if isinstance(exc, IdempotencyInProgress):
        return {"Retry-After": str(exc.retry_after_s)}
    if isinstance(exc, TransientError):
        return {"Retry-After": "1"}
    return {}


def status_of(exc: QuayError) -> int:
    status = int(getattr(exc, "http_status", 400) or 400)
    return status if 400 <= status <= 599 else 400


def field_problems(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pydantic/Powertools validation errors as ``{"field", "problem", "type"}`` (never the
    rejected input itself)."""
    out = []
    for e in errors:
        loc = [str(x) for x in e.get("loc", ())]
        out.append({"field": ".".join(loc) or "body", "problem": str(e.get("msg") or e.get("type", "invalid")),
                    "type": str(e.get("type", "invalid"))})
    return out


def validation_message(fields: list[dict[str, Any]]) -> str:
    if not fields:
        return "the request is not valid"
    first = fields[0]
    more = f" (and {len(fields) - 1} more)" if len(fields) > 1 else ""
    return f"{first['field']}: {first['problem']}{more}"


def proxy_response(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    """An API Gateway proxy (v1) response, for errors raised outside the resolver."""
    return {"statusCode": status, "headers": {"Content-Type": "application/json", **(headers or {})},
            "multiValueHeaders": {}, "body": json.dumps(body), "isBase64Encoded": False}


def exception_response(exc: QuayError) -> dict[str, Any]:
    status = status_of(exc)
    return proxy_response(status, error_payload(status, code_of(exc), str(exc) or HTTPStatus(status).phrase),
                          headers_for(exc))
