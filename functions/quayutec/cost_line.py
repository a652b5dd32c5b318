"""A run's cost line (SPEC §10, issue 13 item 2): each phase invocation counts its own AWS calls
(every call of a :mod:`quayutec.dal.aws` client is announced to the call observers), its time and
the states it knows the run entered; the counters travel in the state (``RunState.cost``) and are
written once, in the final ledger write (no write per phase).

Counted: the phases' AWS calls, invocations that returned. Estimated (and labelled so): billed
time (handler time, rounded up per invocation), state transitions (from the path the phases know:
the Map's iterations, the final states), the USD figure (:mod:`quayutec.pricing`). Not in it:
invocations that failed (their state is lost), the wake path before the run (the stream
dispatch, the SQS message, the wake consumer's StartExecution and delivery count), model tokens.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from quayutec import pricing
from quayutec.dal import aws
from quayutec.models import RunCost

ESTIMATED = ["billed_ms", "transitions", "usd"]
#: The run phases' memory (resources.FunctionDef's default): the GB-seconds of the estimate.
PHASE_MEMORY_MB = 512


class _Counter:
    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.started = time.perf_counter()


_CURRENT: ContextVar[_Counter | None] = ContextVar("quay_cost_counter", default=None)


def _observe(service: str, operation: str, params: dict[str, Any]) -> None:
    counter = _CURRENT.get()
    if counter is not None:
        key = f"{service}.{operation}"
        counter.calls[key] = counter.calls.get(key, 0) + 1


aws.add_call_observer(_observe)


@contextmanager
def counting() -> Iterator[None]:
    """Count the AWS calls of this invocation (this context only: concurrent invocations on
    other threads keep their own counts)."""
    token = _CURRENT.set(_Counter())
    try:
        yield
    finally:
        _CURRENT.reset(token)


def so_far(cost: RunCost | None, transitions: int, *, writes_to_come: dict[str, int] | None = None) -> RunCost:
    """``cost`` (the state's) plus this invocation so far: one invocation, its time, its calls,
    ``transitions`` states entered, and ``writes_to_come`` (the final write itself, about to be
    made)."""
    base = cost or RunCost()
    counter = _CURRENT.get()
    calls = dict(base.aws_requests)
    for source in ((counter.calls if counter else {}), (writes_to_come or {})):
        for k, n in source.items():
            calls[k] = calls.get(k, 0) + n
    ms = base.billed_ms + (pricing.ceil_ms(time.perf_counter() - counter.started) if counter else 0)
    out = RunCost(lambda_invocations=base.lambda_invocations + 1, billed_ms=ms,
                  transitions=base.transitions + transitions, aws_requests=calls, estimated=list(ESTIMATED))
    out.usd = round(pricing.estimate_usd(transitions=out.transitions, lambda_invocations=out.lambda_invocations,
                                         billed_ms=out.billed_ms, memory_mb=PHASE_MEMORY_MB,
                                         aws_requests=out.aws_requests), 8)
    return out


FINAL_WRITE = {"dynamodb.UpdateItem": 1}
#: The final write of a run that ends with its reply: one transaction (the reply, its notices, the run).
FINAL_TRANSACTION = {"dynamodb.TransactWriteItems": 1}
