"""``Idempotency-Key`` on every POST (design §6), with the Powertools idempotency utility and its
DynamoDB persistence layer on the idempotency table.

* The key is scoped to the caller: the record's key hashes (company, member, method, path, key).
* The stored payload hash covers the request (body, canonical when JSON, and query): a repeat with
  a different request gets 422; a repeat while the first is still running gets 409 with
  ``Retry-After``; a repeat after it returns the first response (header
  ``Idempotent-Replayed: true``) and the route does not run again.
* Responses of 5xx are not kept (the record is deleted, so a retry runs again).
* Issued bearer tokens are never kept in the idempotency table: the kept copy has ``token: null``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyInconsistentStateError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.serialization.base import BaseIdempotencySerializer

from quayutec.api import errors
from quayutec.api.body import parse_json
from quayutec.api.context import IDEMPOTENCY_HEADER, Caller, header, request_path
from quayutec.dal import aws
from quayutec.deps import Deps
from quayutec.errors import InvalidInput, TransientError

EXPIRES_AFTER_S = 24 * 3600
MAX_KEY_LEN = 255
_STORE = "idempotency_store"


class _ServerError(Exception):
    """A 5xx response: raised through the idempotency layer so it deletes the record."""

    def __init__(self, response: dict[str, Any]) -> None:
        super().__init__("server error response")
        self.response = response


class _KeptResponse(BaseIdempotencySerializer):
    """What is kept of a response: as is, except an issued token's value."""

    def to_dict(self, data: Any) -> dict:
        body = data.get("body")
        if isinstance(body, str) and '"token"' in body and data.get("statusCode") == 201:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and "token" in parsed and "token_id" in parsed:
                parsed["token"] = None
                data = {**data, "body": json.dumps(parsed)}
        return data

    def from_dict(self, data: dict) -> Any:
        return data


def _persistence(deps: Deps) -> DynamoDBPersistenceLayer:
    store = deps.extra.get(_STORE)
    if store is None:
        store = deps.extra[_STORE] = DynamoDBPersistenceLayer(
            table_name=deps.settings.idempotency_table, boto3_client=aws.client("dynamodb")
        )
    return store


def request_fingerprint(event: dict[str, Any]) -> str:
    """sha256 of what makes two requests "the same": the body (decoded when the gateway sent it
    base64-encoded, then parsed and canonical when JSON) and the query parameters. The same JSON
    sent once base64-encoded and once plain is the same request."""
    body = event.get("body") or ""
    if event.get("isBase64Encoded") and body:
        # Refused before this by the handler; hashed as sent.
        with contextlib.suppress(binascii.Error, ValueError):
            body = base64.b64decode(body, validate=True).decode("utf-8")
    try:
        canonical: Any = parse_json(body) if body else None
    except InvalidInput:
        canonical = {"raw": body}
    query = sorted((event.get("queryStringParameters") or {}).items())
    text = json.dumps({"body": canonical, "query": query}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def idempotency_key_of(event: dict[str, Any]) -> str | None:
    """The Idempotency-Key of a POST, checked; ``None`` when the request has none."""
    if str(event.get("httpMethod", "")).upper() != "POST":
        return None
    key = header(event, IDEMPOTENCY_HEADER)
    if key is None:
        return None
    if not key or len(key) > MAX_KEY_LEN or not key.isprintable():
        raise InvalidInput(f"Idempotency-Key: 1 to {MAX_KEY_LEN} printable characters")
    return key


def _replayed(response: Any, idempotent_data: Any) -> Any:  # an IdempotentHookFunction
    if isinstance(response, dict):
        response = {**response, "headers": {**(response.get("headers") or {}), "Idempotent-Replayed": "true"}}
    return response


def run_idempotent(
    deps: Deps,
    event: dict[str, Any],
    context: Any,
    who: Caller,
    key: str,
    resolve: Callable[[dict[str, Any], Any], dict[str, Any]],
) -> dict[str, Any]:
    """``resolve(event, context)`` at most once per (caller, method, path, key)."""
    config = IdempotencyConfig(
        event_key_jmespath="[company, member, method, path, key]",
        payload_validation_jmespath="fingerprint",
        raise_on_no_idempotency_key=True,
        expires_after_seconds=EXPIRES_AFTER_S,
        response_hook=_replayed,
    )
    if context is not None and hasattr(context, "get_remaining_time_in_millis"):
        config.register_lambda_context(context)

    @idempotent_function(
        data_keyword_argument="request",
        persistence_store=_persistence(deps),
        config=config,
        output_serializer=_KeptResponse(),
    )
    def _once(request: dict[str, Any]) -> dict[str, Any]:
        response = resolve(event, context)
        if int(response.get("statusCode", 500)) >= 500:
            raise _ServerError(response)
        return response

    request = {
        "company": who.company or "",
        "member": who.member,
        "method": "POST",
        "path": request_path(event),
        "key": key,
        "fingerprint": request_fingerprint(event),
    }
    try:
        return _once(request=request)
    except _ServerError as exc:
        return exc.response
    except IdempotencyAlreadyInProgressError:
        return errors.exception_response(
            errors.IdempotencyInProgress("a request with this Idempotency-Key is still in progress: retry later")
        )
    except IdempotencyValidationError:
        return errors.exception_response(
            errors.IdempotencyKeyReused("Idempotency-Key was used before with a different request (body or query)")
        )
    except (IdempotencyPersistenceLayerError, IdempotencyInconsistentStateError):
        return errors.exception_response(TransientError("idempotency store unavailable: retry later"))
