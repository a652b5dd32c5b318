"""A run's cost line (design §10, issue 13 item 2): each phase invocation counts its own AWS calls
(every call of a :mod:`quayutec.dal.aws` client is announced to the call observers), the
DynamoDB capacity its calls consumed, the model tokens its replies reported, its time and the
states it knows the run entered; the counters travel in the state (``RunState.cost``) and are
written once, in the final ledger write (no write per phase).

Counted: the phases' AWS calls; DynamoDB consumed capacity (every data call of a run phase asks
``ReturnConsumedCapacity=TOTAL``, injected by a client hook, and its response's
``ConsumedCapacity`` is summed; a response without one is counted under ``capacity_unknown``,
never as 0); model tokens from the provider's usage fields (:func:`count_tokens`, called by
:func:`quayutec.providers.call_model` after a reply is read; a reply without usage fields is
``unreported``, never guessed; a failed request has none); invocations that returned.
Estimated (and labelled so): billed time (handler time, rounded up per invocation), state
transitions (from the path the phases know: the Map's iterations, the final states), the USD
figures (:mod:`quayutec.cost.prices`; the model's share only when its price is known). Not in it:
invocations that failed (their state is lost, and with it their counts; but a reply's tokens are
stored with the reply, and the CallModel attempt that reuses it counts them), the wake path before
the run (the wake relay, the SQS message, the wake consumer's StartExecution, and the
count of a repeated delivery).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from quayutec import seams
from quayutec.cost import prices
from quayutec.models import RunCost, TokenCount

ESTIMATED = ["billed_ms", "transitions", "usd", "usd_model_excluded", "model_usd"]
#: The run phases' memory (resources.FunctionDef's default): the GB-seconds of the estimate.
PHASE_MEMORY_MB = 512
#: DynamoDB operations that take ``ReturnConsumedCapacity`` (DynamoDB API reference).
CAPACITY_OPERATIONS = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    }
)


class _Counter:
    def __init__(self, model_prices: prices.Overrides | None = None) -> None:
        self.calls: dict[str, int] = {}
        self.read_units = 0.0
        self.write_units = 0.0
        self.capacity_unknown: dict[str, int] = {}
        self.tokens: dict[str, TokenCount] = {}
        self.model_prices = model_prices
        self.started = time.perf_counter()


_CURRENT: ContextVar[_Counter | None] = ContextVar("quay_cost_counter", default=None)


def _observe(service: str, operation: str, params: dict[str, Any]) -> None:
    counter = _CURRENT.get()
    if counter is not None:
        key = f"{service}.{operation}"
        counter.calls[key] = counter.calls.get(key, 0) + 1


# ----------------------------------------------------------------------------- DynamoDB capacity
def _ask_capacity(params: dict[str, Any], model: Any, **_: Any) -> None:
    """botocore ``before-parameter-build`` (after boto3's DynamoDB layer copied the caller's
    parameters in ``provide-client-params``): a run phase's DynamoDB data call asks for its
    consumed capacity (a caller's own ``ReturnConsumedCapacity`` is kept)."""
    if _CURRENT.get() is not None and model.name in CAPACITY_OPERATIONS and isinstance(params, dict):
        params.setdefault("ReturnConsumedCapacity", "TOTAL")


def _read_capacity(parsed: Any, model: Any, **_: Any) -> None:
    """botocore ``after-call`` (errors included): sum the response's ``ConsumedCapacity`` (one
    object, or a list of them for the batch and transaction operations) into the invocation's
    counter; a response without one counts under ``capacity_unknown``."""
    counter = _CURRENT.get()
    if counter is None or model.name not in CAPACITY_OPERATIONS:
        return
    consumed = parsed.get("ConsumedCapacity") if isinstance(parsed, dict) else None
    entries = consumed if isinstance(consumed, list) else [consumed] if isinstance(consumed, dict) else []
    entries = [e for e in entries if isinstance(e, dict) and _number(e.get("CapacityUnits")) is not None]
    if not entries:
        key = f"dynamodb.{model.name}"
        counter.capacity_unknown[key] = counter.capacity_unknown.get(key, 0) + 1
        return
    for e in entries:
        read, write = _number(e.get("ReadCapacityUnits")), _number(e.get("WriteCapacityUnits"))
        if read is None and write is None:  # TOTAL names only CapacityUnits: the operation's kind
            units = _number(e.get("CapacityUnits")) or 0.0
            read, write = (0.0, units) if prices.ddb_kind(model.name) == "write" else (units, 0.0)
        counter.read_units += read or 0.0
        counter.write_units += write or 0.0


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _capacity_hook(client: Any) -> None:
    if client.meta.service_model.service_name == "dynamodb":
        client.meta.events.register("before-parameter-build.dynamodb", _ask_capacity, unique_id="quay-cost-ask")
        client.meta.events.register("after-call.dynamodb", _read_capacity, unique_id="quay-cost-read")


#: The cost line's hooks (:mod:`quayutec.seams`), installed when it first counts (:func:`counting`).
INSTRUMENTS = seams.Instruments("cost line", client=_capacity_hook, call=_observe)


# ----------------------------------------------------------------------------- model tokens
def count_tokens(provider: str, model: str, input_tokens: int | None, output_tokens: int | None) -> None:
    """One reply's usage fields into the running invocation's counter (nothing outside a run
    phase). Both ``None``: the reply reported no usage (``unreported``: not counted, not
    guessed)."""
    counter = _CURRENT.get()
    if counter is None:
        return
    t = counter.tokens.setdefault(model, TokenCount(provider=provider))
    if input_tokens is None and output_tokens is None:
        t.unreported += 1
        return
    t.input += input_tokens or 0
    t.output += output_tokens or 0
    t.replies += 1


# ----------------------------------------------------------------------------- the line
def model_prices_of(settings: Any) -> prices.Overrides | None:
    """The ``MODEL_PRICES`` overrides of a function's settings as (input, output) per model."""
    configured = getattr(settings, "model_prices", None)
    if not configured:
        return None
    return {
        m: (float(p.input), float(p.output)) if hasattr(p, "input") else (float(p["input"]), float(p["output"]))
        for m, p in configured.items()
    }


@contextmanager
def counting(model_prices: prices.Overrides | None = None) -> Iterator[None]:
    """Count the AWS calls, capacity and tokens of this invocation (this context only:
    concurrent invocations on other threads keep their own counts). ``model_prices``: the
    ``MODEL_PRICES`` overrides the estimate uses. The first count installs the cost line's hooks
    (:data:`INSTRUMENTS`: inert outside a count), so clients built from then on carry them."""
    seams.install(INSTRUMENTS)
    token = _CURRENT.set(_Counter(model_prices))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def so_far(cost: RunCost | None, transitions: int, *, writes_to_come: dict[str, int] | None = None) -> RunCost:
    """``cost`` (the state's) plus this invocation so far: one invocation, its time, its calls,
    their capacity, its replies' tokens, ``transitions`` states entered, and ``writes_to_come``
    (the final write itself, about to be made: its capacity is not known yet, so it counts under
    ``capacity_unknown``)."""
    base = cost or RunCost()
    counter = _CURRENT.get()
    calls = dict(base.aws_requests)
    for source in ((counter.calls if counter else {}), (writes_to_come or {})):
        for k, n in source.items():
            calls[k] = calls.get(k, 0) + n
    ms = base.billed_ms + (prices.ceil_ms(time.perf_counter() - counter.started) if counter else 0)
    capacity = dict(base.capacity)
    unknown = dict(base.capacity_unknown)
    tokens = {m: t.model_copy() for m, t in base.tokens.items()}
    if counter is not None:
        for name, units in (("read_units", counter.read_units), ("write_units", counter.write_units)):
            capacity[name] = round(capacity.get(name, 0.0) + units, 4)
        for k, n in counter.capacity_unknown.items():
            unknown[k] = unknown.get(k, 0) + n
        for m, t in counter.tokens.items():
            tokens.setdefault(m, TokenCount(provider=t.provider)).add(t)
    for k, n in (writes_to_come or {}).items():
        if k.startswith("dynamodb."):
            unknown[k] = unknown.get(k, 0) + n
    out = RunCost(
        lambda_invocations=base.lambda_invocations + 1,
        billed_ms=ms,
        transitions=base.transitions + transitions,
        aws_requests=calls,
        capacity=capacity,
        capacity_unknown=unknown,
        tokens=tokens,
        estimated=list(ESTIMATED),
    )
    return prices.price_cost(out, memory_mb=PHASE_MEMORY_MB, overrides=counter.model_prices if counter else None)


FINAL_WRITE = {"dynamodb.UpdateItem": 1}
#: A company turn given back after the final write (design §12.3): one transaction (a hand-off
#: to a run in line costs more: its query, its transaction and SendTaskSuccess, not counted).
TURN_END = {"dynamodb.TransactWriteItems": 1}


def plus(*counts: dict[str, int]) -> dict[str, int]:
    """The sum of call counts (``writes_to_come``)."""
    out: dict[str, int] = {}
    for c in counts:
        for k, n in c.items():
            out[k] = out.get(k, 0) + n
    return out


#: The final write of a run that ends with its reply: one transaction (the reply, its notices, the run).
FINAL_TRANSACTION = {"dynamodb.TransactWriteItems": 1}
