"""The room API Lambda (API Gateway REST proxy, payload v1). The caller is what the Lambda
authorizer put in ``requestContext.authorizer``; POSTs with an ``Idempotency-Key`` run at most once
(:mod:`quayutec.api.idempotency`); routes live in :mod:`quayutec.api.app`."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from quayutec.api import errors
from quayutec.api.app import resolve
from quayutec.api.body import parse_json, require_json
from quayutec.api.context import caller_of, header
from quayutec.api.idempotency import idempotency_key_of, run_idempotent
from quayutec.api.public import is_public
from quayutec.api.schemas import MAX_BODY_BYTES
from quayutec.deps import Deps, default_deps
from quayutec.errors import InvalidInput, Misconfigured, QuayError

logger = Logger()


def _check_body(event: dict[str, Any]) -> None:
    """Every body is JSON, parsed before anything else reads it (:mod:`quayutec.api.body`): 413
    for a body over the limit; 415 for one that is not ``application/json``; 400 for one that is
    not UTF-8 text or not JSON the API accepts (broken, nested too deep, numbers out of range)."""
    body = event.get("body") or ""
    if not isinstance(body, str):
        raise InvalidInput("body: not text")
    raw: bytes | None = None
    if event.get("isBase64Encoded") and body:
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInput("body: not valid base64") from None
    size = len(raw) if raw is not None else len(body.encode("utf-8", "surrogatepass"))
    if size > MAX_BODY_BYTES:
        raise errors.PayloadTooLarge(f"request body larger than {MAX_BODY_BYTES} bytes")
    if not body:
        return
    canonical = require_json(header(event, "content-type"))
    for name in ("headers", "multiValueHeaders"):  # what the resolver reads is what was checked
        for key in [k for k in (event.get(name) or {}) if isinstance(k, str) and k.lower() == "content-type"]:
            event[name][key] = canonical if name == "headers" else [canonical]
    if raw is not None:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput("body: not UTF-8 text (the API takes JSON)") from None
    parse_json(raw if raw is not None else body)


def _check_path(event: dict[str, Any]) -> None:
    """400 for a path holding a line break or another non-printable character (``%0a``): the
    resolver's route patterns end in ``$``, which matches before a final newline, so
    ``/rooms/%0a`` answered as ``/rooms``."""
    if not str(event.get("path") or "").isprintable():
        raise InvalidInput("path: holds a line break or another non-printable character")


def _resolve(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return resolve(event, context)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext, deps: Deps | None = None) -> dict[str, Any]:
    try:
        if not isinstance(event, dict):
            raise errors.Unauthenticated("not an API Gateway proxy event")
        _check_path(event)
        _check_body(event)
        if is_public(str(event.get("httpMethod", "")), str(event.get("path") or "")):
            return _resolve(event, context)
        who = caller_of(event)
        logger.append_keys(company=who.company, member=who.member)
        key = idempotency_key_of(event)
        if key is None:
            return _resolve(event, context)
        return run_idempotent(deps or default_deps(), event, context, who, key, _resolve)
    except QuayError as exc:
        if isinstance(exc, Misconfigured):  # the operator's to fix (docs/deploy.md, settings)
            logger.error(str(exc), extra={"error": "Misconfigured", "variables": exc.variables})
        return errors.exception_response(exc)
