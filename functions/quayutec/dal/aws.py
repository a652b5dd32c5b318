"""AWS clients, built lazily on first use and cached per process (never at import time).

Tests and the local stack call :func:`reset_clients` after changing the environment.
DynamoDB uses the resource layer's client, which (de)serializes Python values.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import boto3
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from quayutec import seams
from quayutec.errors import RunStopped, TransientError

#: DynamoDB/AWS error codes that mean "try again later" (AWS API reference, common errors).
TRANSIENT_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
        # botocore's own retry of a TransactWriteItems still in flight with the same token
        # (DynamoDB API reference, TransactWriteItems): the first attempt's outcome is not known.
        "TransactionInProgressException",
        "SlowDown",
        "TooManyRequestsException",  # API Gateway's management API (a company's API key)
    }
)


def _cached(key: str, build: Callable[[], Any]) -> Any:
    """The client cached under ``key``, built again once the seam's client hooks have changed
    (:func:`quayutec.seams.client_generation`), so each client carries the hooks installed when it was
    built."""
    global _built_at
    with _clients_lock:
        if _built_at != seams.client_generation():
            _clients.clear()
            _built_at = seams.client_generation()
        found = _clients.get(key)
    if found is None:
        found = seams.hook_client(build())
        with _clients_lock:
            found = _clients.setdefault(key, found)
    return found


_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()
_built_at = -1


def client(service: str) -> Any:
    """A plain (low-level) boto3 client for ``service``, through the seam (its calls announced,
    the client hooks run); cached per process. For the libraries that take a client (Powertools
    idempotency and parameters) and services with no helper below."""
    return _cached(service, lambda: boto3.client(service))


def dynamodb() -> Any:
    """A DynamoDB client that takes and returns plain Python values (Decimal for numbers)."""
    return _cached("dynamodb (resource layer)", lambda: boto3.resource("dynamodb").meta.client)


def s3() -> Any:
    return client("s3")


def sqs() -> Any:
    return client("sqs")


def stepfunctions() -> Any:
    return client("stepfunctions")


def secretsmanager() -> Any:
    return client("secretsmanager")


def reset_clients() -> None:
    """Forget the cached clients (after an environment change)."""
    with _clients_lock:
        _clients.clear()


def error_code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


@contextmanager
def transient_errors() -> Iterator[None]:
    """Re-raise throttling and service faults as :class:`TransientError` (retried by the ASL)."""
    try:
        yield
    except ClientError as exc:
        if error_code(exc) in TRANSIENT_CODES:
            raise TransientError(f"{error_code(exc)}: retry later") from exc
        raise


def is_condition_failure(exc: ClientError) -> bool:
    return error_code(exc) == "ConditionalCheckFailedException"


T = TypeVar("T")


def put_new(db: Any, table: str, item: dict[str, Any], key_attr: str = "pk") -> bool:
    """Conditional put (``attribute_not_exists``): ``True`` when written, ``False`` when an item
    with that key exists already (the caller's deterministic id makes a repeat a no-op).
    Raises TransientError on throttling, ClientError otherwise."""
    try:
        with transient_errors():
            db.put_item(TableName=table, Item=item, ConditionExpression=f"attribute_not_exists({key_attr})")
        return True
    except ClientError as exc:
        if is_condition_failure(exc):
            return False
        raise


def update_if(db: Any, **update: Any) -> bool:
    """Conditional ``UpdateItem`` (``update``: its API parameters, ConditionExpression included):
    ``True`` when written, ``False`` when the condition failed (nothing written). Raises
    TransientError on throttling, ClientError otherwise."""
    try:
        with transient_errors():
            db.update_item(**update)
        return True
    except ClientError as exc:
        if is_condition_failure(exc):
            return False
        raise


#: Cancellation reasons that mean "try the whole transaction again later" (TransactWriteItems,
#: DynamoDB API reference: CancellationReasons).
TRANSIENT_CANCELLATIONS = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})


@dataclass(frozen=True)
class Refused:
    """One entry of a ``TransactWriteItems`` whose condition failed: ``item`` is the item as it
    stood (plain Python values) when the entry asked for it with
    ``ReturnValuesOnConditionCheckFailure: ALL_OLD`` and it existed, else ``None``."""

    item: dict[str, Any] | None = None


def transact_refusals(db: Any, items: list[dict[str, Any]]) -> list[Refused | None] | None:
    """``TransactWriteItems`` of ``items``: ``None`` when all landed; when a condition failed
    (nothing written), one value per entry, in order: :class:`Refused` where that entry's
    condition failed, ``None`` where it held. DynamoDB evaluates every entry's condition and
    reports each in ``CancellationReasons`` (DynamoDB API reference, TransactWriteItems).
    Raises TransientError on throttling, a conflicting transaction or one still in progress,
    ClientError otherwise (a ValidationException, a cancellation for another reason)."""
    try:
        with transient_errors():
            db.transact_write_items(TransactItems=items)
        return None
    except ClientError as exc:
        if error_code(exc) != "TransactionCanceledException":
            raise
        reasons = exc.response.get("CancellationReasons") or []
        codes = [str(r.get("Code", "None")) for r in reasons]
        if "ConditionalCheckFailed" in codes and len(codes) == len(items):
            return [
                Refused(plain_item(r.get("Item"))) if c == "ConditionalCheckFailed" else None
                for c, r in zip(codes, reasons, strict=True)
            ]
        if TRANSIENT_CANCELLATIONS & set(codes):
            raise TransientError(f"transaction cancelled ({', '.join(codes)}): retry later") from exc
        raise


def plain_item(item: dict[str, Any] | None) -> dict[str, Any] | None:
    """A cancellation reason's ``Item`` (wire format: the resource layer does not deserialize
    error bodies) as plain Python values."""
    if not item:
        return None
    deserializer = TypeDeserializer()
    return {k: deserializer.deserialize(v) for k, v in item.items()}


def transact(db: Any, items: list[dict[str, Any]]) -> list[bool] | None:
    """``TransactWriteItems`` of ``items``: ``None`` when all landed; when a condition failed
    (nothing written), one flag per entry, in order, telling whose condition failed. Raises
    TransientError on throttling or a conflicting transaction, ClientError otherwise
    (:func:`transact_refusals`)."""
    refusals = transact_refusals(db, items)
    return None if refusals is None else [r is not None for r in refusals]


#: A run's stop guard (design §12.2): ``ConditionCheck`` entries that hold while the run's agent is
#: not paused since its claim and its chain not stopped. Guarded writes append them to their
#: transaction.
Guard = list[dict[str, Any]]


def transact_guarded(db: Any, items: list[dict[str, Any]], guard: Guard | None) -> list[bool] | None:
    """:func:`transact` of ``items`` plus the ``guard`` entries: ``None`` when all landed, else
    one flag per entry of ``items`` telling whose condition failed (nothing written). Raises
    RunStopped when only the guard failed (the run was stopped: nothing of it was written; a
    write that landed before, a repeat, reports its own condition instead), TransientError on
    throttling or a conflicting transaction, ClientError otherwise."""
    refusals = transact_refusals(db, items + (guard or []))
    if refusals is None:
        return None
    own = [r is not None for r in refusals[: len(items)]]
    if not any(own):
        raise RunStopped("the run's agent was paused or taken out of the room, or its chain stopped: nothing written")
    return own


def put_guarded(db: Any, table: str, item: dict[str, Any], guard: Guard | None) -> bool:
    """Put ``item`` once (its key is the idempotency key), under ``guard`` when given: ``True``
    when written, ``False`` when it existed. Raises RunStopped, TransientError, ClientError as
    :func:`transact_guarded`."""
    if not guard:
        return put_new(db, table, item)
    put = {"Put": {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}
    return transact_guarded(db, [put], guard) is None


def transact_new(db: Any, items: list[dict[str, Any]]) -> bool:
    """``TransactWriteItems`` whose conditions guard against a repeat: ``True`` when written,
    ``False`` when a condition failed (nothing written). Raises TransientError on throttling or
    conflicts, ClientError otherwise (:func:`transact`)."""
    return transact(db, items) is None


def paginate_query(fn: Callable[..., dict], **kwargs: Any) -> Iterator[dict]:
    """Every item of a query, page by page."""
    while True:
        page = fn(**kwargs)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
