"""Who is calling: only what the API Gateway Lambda authorizer put in
``event.requestContext.authorizer`` (company, member, admin). Nothing the client sends in
headers or bodies can change it."""

from __future__ import annotations

import hashlib
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import BaseRouter

from quayutec.api.errors import Unauthenticated
from quayutec.logic.access import Caller

IDEMPOTENCY_HEADER = "idempotency-key"


def _flag(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def caller_of(event: dict[str, Any]) -> Caller:
    """The caller of a REST proxy event, from the authorizer's context. Raises Unauthenticated."""
    ctx = ((event.get("requestContext") or {}).get("authorizer") or {}) if isinstance(event, dict) else {}
    if not isinstance(ctx, dict):
        raise Unauthenticated("no caller identity: the request did not pass the authorizer")
    member = ctx.get("member")
    company = ctx.get("company") or None
    admin = _flag(ctx.get("admin"))
    if not isinstance(member, str) or not member or (not company and not admin):
        raise Unauthenticated("no caller identity: the request did not pass the authorizer")
    return Caller(company=str(company) if company else None, member=member, admin=admin)


def current_event() -> dict[str, Any]:
    return BaseRouter.current_event.raw_event


def caller() -> Caller:
    return caller_of(current_event())


def header(event: dict[str, Any], name: str) -> str | None:
    for k, v in (event.get("headers") or {}).items():
        if isinstance(k, str) and k.lower() == name:
            return v if isinstance(v, str) else None
    return None


def request_path(event: dict[str, Any]) -> str:
    """The request's path as the routes match it: the resolver ignores a trailing ``/`` on the
    REST API (Powertools' ``APIGatewayRestResolver``), so ``/rooms/r1/messages/`` is the same
    request as ``/rooms/r1/messages`` and must share its Idempotency-Key scope (design §6)."""
    path = str(event.get("path") or "")
    return path.rstrip("/") or path[:1]


def scoped_idempotency_key(event: dict[str, Any], who: Caller) -> str | None:
    """The Idempotency-Key of a request scoped to its caller, method and path (design §6), as
    handed to the domain services (whose ids derive from it), or ``None`` without a key."""
    key = header(event, IDEMPOTENCY_HEADER)
    if not key:
        return None
    scope = "\x00".join(
        [who.company or "", who.member, str(event.get("httpMethod", "")).upper(), request_path(event), key]
    )
    return hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()


def idempotency_key() -> str | None:
    event = current_event()
    return scoped_idempotency_key(event, caller_of(event))
