"""The local stack: every resource of ``quayutec.resources`` created on moto in-process, the real
ASL executed by moto's Step Functions, Lambda tasks dispatched in-process to the deployed handler
functions, and pollers that give the DynamoDB stream, the SQS wake queue and execution status
changes the real services' semantics (see shared notes LOCAL-AWS.md).

Use as a context manager::

    with LocalStack() as stack:
        ...   # boto3 calls here go to moto

or, on the resources of the synthesized CDK template deployed on moto's CloudFormation
(``cdk synth`` output; the same pollers and seams, the deployed functions' environment)::

    with LocalStack.from_deployed("cdk.out") as stack:
        ...
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import json
import logging
import os
import re
import sys
import threading
import time
import traceback
import uuid
import warnings
import zipfile
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

# isort: split
# Before moto's modules: moto_imports defers what they need not import (ruff keeps this order).
from quaylocal import moto_imports  # noqa: F401
from quaylocal.stream_filter import StreamFilter

# isort: split
from moto import mock_aws
from moto.awslambda.models import LambdaFunction
from moto.core.botocore_stubber import BotocoreStubber
from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction
from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

from quaylocal import calls, moto_patches
from quaylocal import metrics as local_metrics
from quayutec import deps as quay_deps
from quayutec import resources as r
from quayutec import seams
from quayutec.settings import HANDLER_ENV, function_environment

REGION = "us-east-1"
ACCOUNT = "123456789012"
ROOT = Path(__file__).resolve().parents[2]
ASL_PATH = ROOT / "statemachines" / r.STATE_MACHINE_FILE
LAMBDA_RUNTIME = "python3.13"


class _ForegroundFirstLock:
    """The one lock around moto, reentrant like an ``RLock``; when it is released, a waiting
    foreground thread (one serving an API request, :func:`foreground`) gets it before the waiting
    background ones (executions, the pump): under a burst, a request's few moto calls then wait
    for the call in progress only, not behind every execution's queue of calls. Background
    threads are woken one at a time (no thundering herd with many executions waiting)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._fg = threading.Condition(self._mutex)
        self._bg = threading.Condition(self._mutex)
        self._owner: int | None = None
        self._count = 0
        self._fg_waiting = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = threading.get_ident()
        with self._mutex:
            if self._owner == me:
                self._count += 1
                return True
            if self._owner is not None and not blocking:
                return False
            if _FOREGROUND.active:
                self._fg_waiting += 1
                try:
                    while self._owner is not None:
                        self._fg.wait()
                finally:
                    self._fg_waiting -= 1
            else:
                while self._owner is not None or self._fg_waiting:
                    self._bg.wait()
            self._owner, self._count = me, 1
            return True

    def release(self) -> None:
        with self._mutex:
            if self._owner != threading.get_ident():
                raise RuntimeError("cannot release un-acquired lock")
            self._count -= 1
            if self._count:
                return
            self._owner = None
            (self._fg if self._fg_waiting else self._bg).notify()

    __enter__ = acquire

    def __exit__(self, *exc: Any) -> None:
        self.release()


class _Foreground(threading.local):
    active = 0


_FOREGROUND = _Foreground()


@contextmanager
def foreground() -> Iterator[None]:
    """Calls made in this thread meanwhile serve an interactive request (``quay dev``'s API):
    they go first at the moto lock and pass the background invocation gate."""
    _FOREGROUND.active += 1
    try:
        yield
    finally:
        _FOREGROUND.active -= 1


class _InvocationGate:
    """At most ``slots`` background Lambda invocations (Step Functions tasks, the pollers'
    event source mappings) run at once, admitted first come first served, as a concurrency limit
    does; foreground invocations and nested ones pass. In one process every running invocation
    competes for the same interpreter: fewer at once means each finishes sooner and the API's
    invocations get their share."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._mutex = threading.Lock()
        self._busy = 0
        self._queue: deque[threading.Event] = deque()
        self._held = threading.local()

    @contextmanager
    def slot(self) -> Iterator[None]:
        if _FOREGROUND.active or getattr(self._held, "n", 0):
            yield
            return
        with self._mutex:
            turn = None
            if self._busy < self.slots and not self._queue:
                self._busy += 1
            else:
                turn = threading.Event()
                self._queue.append(turn)
        if turn is not None:
            turn.wait()  # the slot is handed over by the invocation that ends (_busy unchanged)
        self._held.n = 1
        try:
            yield
        finally:
            self._held.n = 0
            with self._mutex:
                if self._queue:
                    self._queue.popleft().set()
                else:
                    self._busy -= 1


#: ``quay dev`` sets it (:meth:`LocalStack.start` with ``background_invocations``); ``None``: no
#: limit (the tests and plays, whose timing it would change).
_GATE: _InvocationGate | None = None

_INVOKE_LOCK = threading.Lock()
_MOTO_LOCK = _ForegroundFirstLock()
_installed = False

#: The started stacks, whose pumps a write through the seam wakes (see :func:`_poke`).
_ACTIVE: list[LocalStack] = []
_ACTIVE_LOCK = threading.Lock()

#: Operations after which a poller may have work: a write to a table (its stream), a message
#: sent or made visible again, an execution started or stopped. The pollers' own calls (stream
#: and queue reads, deletes of handled messages, execution listings) are not in it, so an idle
#: pump does not wake itself.
_WAKING_OPERATIONS = frozenset(
    {
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "TransactWriteItems",
        "BatchWriteItem",
        "SendMessage",
        "SendMessageBatch",
        "ChangeMessageVisibility",
        "ChangeMessageVisibilityBatch",
        "StartExecution",
        "StopExecution",
        "SendTaskSuccess",
        "SendTaskFailure",
    }
)


#: The pollers a poke can give work to (the executions poller runs in every pump round).
STREAM, QUEUES = "stream", "queues"
ALL_POLLERS = frozenset({STREAM, QUEUES})


def _poke(execution: Any = None, *, pollers: frozenset[str] | None = ALL_POLLERS) -> None:
    """Wake every started stack's pump now (instead of its next fallback poll) for ``pollers``
    (an empty set: a round of the executions poller only; ``None``: no round, a write no poller
    reads, which still counts as an event for :meth:`LocalStack.wait_quiet`); ``execution``:
    moto's execution that just ended."""
    with _ACTIVE_LOCK:
        stacks = list(_ACTIVE)
    for stack in stacks:
        stack._poke(execution, pollers=pollers)


def _request_parts(request: Any) -> tuple[str | None, bytes, str]:
    """A botocore request's ``X-Amz-Target`` (text), body (bytes) and URL."""
    target = request.headers.get("X-Amz-Target")
    if isinstance(target, bytes):
        target = target.decode()
    body = request.body or b""
    if isinstance(body, str):
        body = body.encode()
    return target or None, body if isinstance(body, bytes) else b"", request.url or ""


def _is_s3(url: str) -> bool:
    return ".s3." in url or "//s3." in url or "s3.amazonaws.com" in url


def _wakes_pollers(request: Any) -> bool:
    """Whether ``request`` (a botocore request moto just answered) may give a poller work."""
    target, body, url = _request_parts(request)
    if target:
        return target.rsplit(".", 1)[-1] in _WAKING_OPERATIONS
    if (request.method or "GET").upper() in ("GET", "HEAD"):
        return False
    if _is_s3(url):
        return True  # a write to a bucket: its event notification (uploads/ -> the ingest queue)
    match = re.search(rb"(?:^|&)Action=([A-Za-z]+)", body)  # the query protocol (SQS before JSON)
    return match is not None and match.group(1).decode() in _WAKING_OPERATIONS


def _pollers_fed(request: Any) -> frozenset[str] | None:
    """Which pollers a waking write (:func:`_wakes_pollers`) can give work (see :func:`_poke`).
    A DynamoDB write feeds the stream poller only when its body names a table whose stream a
    started stack reads: the claim, ledger and idempotency tables have none, and their writes
    were half of a run's pokes, each a pump round beside the run. An SQS call or an S3 write
    (its notification) feeds the queue pollers; Step Functions calls, the executions poller."""
    target, body, url = _request_parts(request)
    if target and target.startswith("DynamoDB_"):
        with _ACTIVE_LOCK:
            names = [stack._stream_table for stack in _ACTIVE]
        return frozenset({STREAM}) if any(name is None or name in body for name in names) else None
    if target and target.startswith("AWSStepFunctions."):
        return frozenset()
    if (target and target.startswith("AmazonSQS.")) or body.startswith(b"Action=") or _is_s3(url):
        return frozenset({QUEUES})
    return ALL_POLLERS


# ----------------------------------------------------------------------------- the seams
class LocalLambdaContext:
    """What Powertools reads of a Lambda context."""

    def __init__(self, fn: LambdaFunction) -> None:
        self.function_name = fn.function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = fn.function_arn
        self.memory_limit_in_mb = int(fn.memory_size or 512)
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{fn.function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + float(fn.timeout or 30)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def resolve_handler(handler: str) -> Any:
    """Import ``module.attr`` from the deployed package (the function's ``Handler`` string)."""
    module, _, attr = handler.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def invoke_in_process(self: LambdaFunction, event: Any = None) -> tuple[str, bool, str]:
    """Replacement for ``LambdaFunction._invoke_lambda``: run the deployed handler in this
    process. Errors come back in the Lambda runtime's shape, so Step Functions sees
    ``errorType`` = the exception's class name, as on AWS."""
    if isinstance(event, (bytes, str)):
        event = json.loads(event or "{}")
    if self.handler is None:
        raise ValueError(f"{self.function_name} has no Handler")
    handler = resolve_handler(self.handler)
    calls.record_lambda_invoke(self.function_arn)
    gate = _GATE
    global _invocations_in_flight
    with _in_flight_lock:
        _invocations_in_flight += 1
    try:
        with gate.slot() if gate is not None else nullcontext():
            return _invoke_handler(self, handler, event)
    finally:
        with _in_flight_lock:
            _invocations_in_flight -= 1
        if _ACTIVE:
            _poke(pollers=None)  # an event for wait_quiet (e.g. a run just parked), no pump round


#: Lambda invocations under way in this process (a stack with one is not quiet: wait_quiet).
_invocations_in_flight = 0
_in_flight_lock = threading.Lock()


def _invoke_handler(self: LambdaFunction, handler: Any, event: Any) -> tuple[str, bool, str]:
    try:
        # This function's own Lambda environment (the template's or the local one), as on AWS:
        # its settings model sees only these, so a variable it reads but was not given fails.
        with function_environment(function_env(self)):
            result = handler(event if event is not None else {}, LocalLambdaContext(self))
        return json.dumps(result), False, ""
    except Exception as exc:  # noqa: BLE001 - the runtime's error contract
        local_metrics.RECORDER.error(self.function_name)  # Lambda's Errors (quaylocal.metrics)
        return (
            json.dumps(
                {
                    "errorMessage": str(exc),
                    "errorType": type(exc).__name__,
                    "stackTrace": traceback.format_exception(exc),
                }
            ),
            True,
            "",
        )
    finally:
        _drop_disabled_metrics()


def function_env(fn: LambdaFunction) -> dict[str, str]:
    """What the Lambda runtime gives ``fn``: its configured variables and ``_HANDLER``."""
    return {**(fn.environment_vars or {}), HANDLER_ENV: fn.handler}


def _drop_disabled_metrics() -> None:
    """Powertools keeps metrics while they are switched off (POWERTOOLS_METRICS_DISABLED, as
    here) and serializes them anyway at 100 values, which fails for a Metrics made before the
    namespace was set: in one long-lived process, drop them before that, as the flush at the end
    of each invocation does on AWS (the metric set is shared by every instance)."""
    global _metrics
    if os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() == "true":
        if _metrics is None:
            from aws_lambda_powertools.metrics import Metrics

            _metrics = Metrics(namespace="QuayutecLocal")
        held = _metrics.provider.metric_set
        if len(held) >= 50 or any(len(m.get("Value", ())) >= 50 for m in list(held.values())):
            _metrics.clear_metrics()


_metrics: Any = None


#: moto's own method, kept for the guard test (its signature is the seam's contract).
ORIGINAL_INVOKE_LAMBDA = LambdaFunction._invoke_lambda
_original_process_request = BotocoreStubber.process_request


def _serialised_process_request(self: BotocoreStubber, request: Any) -> Any:
    """moto is not atomic under threads (conditional puts, execution names): one lock around
    every call into it, except Lambda invocations, whose handlers make their own calls."""
    if "/functions/" in request.url and request.url.rstrip("/").endswith("/invocations"):
        return _original_process_request(self, request)
    with _MOTO_LOCK:
        response = _original_process_request(self, request)
    if _ACTIVE and _wakes_pollers(request):  # after the write: the woken pump sees it
        _poke(pollers=_pollers_fed(request))
    return response


def _terminated_and_poke(self: Any) -> None:
    """An execution ended (moto's worker reflects its status): wake the executions poller, the
    local stand-in for EventBridge's "Execution Status Change" event."""
    _original_terminated(self)
    moto_patches.forget_finished_threads()
    _poke(getattr(self, "execution", None))


_original_terminated = BaseExecutionWorkerCommunication.terminated


#: Modules to import in the background when an execution next waits (:func:`warm_during_waits`).
_warm_ups: deque[str] = deque()
_warm_ups_lock = threading.Lock()


def warm_during_waits(*modules: str) -> None:
    """Import ``modules`` in a background thread when a Step Functions Wait state next begins,
    e.g. the provider SDKs a play's agents use, which the CallModel handler imports at its first
    request (``openai``: ~0.3 s of CPU, ``anthropic``: ~0.9 s). In a play the process is
    otherwise idle then (a throttled or failing model call waits to be retried), so an import
    the next run would do on its way is done in time that costs nothing. Modules already
    imported are skipped; an import that fails is left to the code that needs it."""
    with _warm_ups_lock:
        _warm_ups.extend(m for m in modules if m not in sys.modules and m not in _warm_ups)


def _import_quietly(names: list[str]) -> None:
    for name in names:
        # Whatever it raises, the handler that needs it imports it again and fails there.
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def _wait_warming(self: Any, env: Any) -> None:
    """Replacement for moto's ``WaitFunction._eval_body``: start the pending warm-ups, then
    wait as moto does (its ``_wait_interval``, scaled in tests), counted in
    :data:`_waits_under_way` (a stack with an execution in a Wait state is not quiet)."""
    global _waits_under_way
    if _warm_ups:
        with _warm_ups_lock:
            names = list(_warm_ups)
            _warm_ups.clear()
        if names:
            threading.Thread(target=_import_quietly, args=(names,), name="quay-warm-up", daemon=True).start()
    with _in_flight_lock:
        _waits_under_way += 1
    try:
        _original_wait_eval_body(self, env)
    finally:
        with _in_flight_lock:
            _waits_under_way -= 1
        if _ACTIVE:
            _poke(pollers=None)  # an event for wait_quiet, no pump round


#: Step Functions Wait states waiting in this process (wait_quiet takes no look meanwhile).
_waits_under_way = 0


_original_wait_eval_body = WaitFunction._eval_body


def install_seams() -> None:
    global _installed
    if not _installed:
        # Metrics are switched off locally (POWERTOOLS_METRICS_DISABLED); don't warn about it.
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        # moto's ASL interpreter logs every Fail state as an ERROR with its internals; the run's
        # ledger entry already says what failed and why.
        logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
        LambdaFunction._invoke_lambda = invoke_in_process  # type: ignore[method-assign]
        BotocoreStubber.process_request = _serialised_process_request  # type: ignore[method-assign]
        BaseExecutionWorkerCommunication.terminated = _terminated_and_poke  # type: ignore[method-assign]
        WaitFunction._eval_body = _wait_warming  # type: ignore[method-assign]
        moto_patches.install()  # what keeps moto small and fast (no seam of the stack's)
        local_metrics.install()  # the metrics the alarms watch, counted here (quaylocal.metrics)
        _installed = True


def scale_time(factor: float) -> None:
    """Tests only: make Step Functions Wait states and Retry intervals ``factor`` times as long
    (e.g. 0.01). Patches moto's private wait/retry sleeps; the definition stays unchanged."""
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function import wait_function

    original = getattr(wait_function.WaitFunction, "_quay_original", wait_function.WaitFunction._wait_interval)
    wait_function.WaitFunction._quay_original = original  # type: ignore[attr-defined]

    def _wait(self: Any, env: Any, wait_seconds: int) -> None:
        # as moto's own: an Event wait, so StopExecution still wakes the Wait state
        env.program_state_event.wait(max(0.0, wait_seconds * factor))

    wait_function.WaitFunction._wait_interval = _wait  # type: ignore[method-assign]

    class _ScaledTime:
        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

        @staticmethod
        def sleep(seconds: float) -> None:
            time.sleep(seconds * factor)

    retrier_decl.time = _ScaledTime()  # type: ignore[assignment]  # the module's time, scaled


# ----------------------------------------------------------------------------- the stack
def local_environment(overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The local stack's process environment: every variable any function reads (each function
    is created with its own subset: :func:`function_variables`)."""
    env = {
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "MOTO_ALLOW_NONEXISTENT_REGION": "true",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
        **r.SETTING_DEFAULTS,
    }
    for t in r.TABLES:
        env[t.env_var] = t.default_name
    for b in r.BUCKETS:
        env[b.env_var] = b.default_name
    env.update(overrides or {})
    return env


def function_variables(fdef: r.FunctionDef, env: dict[str, str]) -> dict[str, str]:
    """``fdef``'s own variables out of ``env`` (what it reads, as the CDK app gives it) and the
    local-only ones every local function needs (region, test credentials, Powertools switches)."""
    own = {k: env[k] for k in r.environment_of(fdef) if k in env}
    local = {k: v for k, v in env.items() if k in LOCAL_ONLY_ENVS}
    return {**local, **own}


#: Set on every local function on top of its own variables (not part of the deployed contract).
LOCAL_ONLY_ENVS = frozenset(
    {
        "AWS_DEFAULT_REGION",
        "AWS_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE",
        "MOTO_ALLOW_NONEXISTENT_REGION",
        "POWERTOOLS_TRACE_DISABLED",
        "POWERTOOLS_METRICS_DISABLED",
        "POWERTOOLS_LOG_LEVEL",
    }
)


@dataclass
class Deployment:
    """What :meth:`LocalStack.from_deployed` deployed: the stack, logical id -> physical id, the
    template, the event source mappings it deleted, each function's environment."""

    stack_name: str
    physical_ids: dict[str, str]
    template: dict[str, Any]
    event_source_mappings: list[dict[str, Any]]
    function_environments: dict[str, dict[str, str]]

    def process_environment(self) -> dict[str, str]:
        """The process environment of the local stack (the CLI, the tests' own reads): every
        deployed function's variables merged; each invocation still runs with its function's
        own (:func:`invoke_in_process`). They must agree on every shared variable."""
        merged: dict[str, str] = {}
        for logical_id, env in self.function_environments.items():
            for k, v in env.items():
                if merged.setdefault(k, v) != v:
                    raise ValueError(f"deployed functions disagree on {k} ({logical_id}: {v!r}, before: {merged[k]!r})")
        return merged


def remove_event_source_mappings(lam: Any, *, account: str, region: str) -> list[dict[str, Any]]:
    """Delete every event source mapping (returned as listed before). moto runs them
    synchronously inside ``send_message`` / ``put_item`` (the stream one consuming the shard's
    records and ignoring ``Enabled``), and moto 5.2.5's DeleteEventSourceMapping leaves the
    mapping attached to its queue or table: detach those too (moto internals, pinned version)."""
    from moto.awslambda.models import lambda_backends
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.table import Table
    from moto.sqs.models import Queue, sqs_backends

    mappings: list[dict[str, Any]] = []
    for page in lam.get_paginator("list_event_source_mappings").paginate():
        mappings += page["EventSourceMappings"]
    for m in mappings:
        lam.delete_event_source_mapping(UUID=m["UUID"])
    live = {id(e) for e in lambda_backends[account][region]._event_source_mappings.values()}
    holders: list[Queue | Table] = [
        *sqs_backends[account][region].queues.values(),
        *dynamodb_backends[account][region].tables.values(),
    ]
    for holder in holders:
        attached = holder.lambda_event_source_mappings
        for key in [k for k, esm in attached.items() if id(esm) not in live]:
            del attached[key]
    return mappings


@dataclass(frozen=True)
class Retention:
    """What a long-lived local stack keeps of what is over (``None``: everything, as the tests
    and plays want, e.g. the chaos checker reads the whole stream): the histories of the newest
    ``executions`` finished executions (older ones keep their description, their history is
    dropped), the newest ``stream_records`` stream records the pump has handled (older ones are
    trimmed, as DynamoDB Streams trims after 24 h), the newest ``wake_bodies`` wake bodies seen."""

    executions: int | None = None
    stream_records: int | None = None
    wake_bodies: int | None = None


#: ``quay dev``: bounded, so its memory comes back down once the rooms are quiet.
DEV_RETENTION = Retention(executions=100, stream_records=1000, wake_bodies=1000)

#: ``quay dev``: background Lambda invocations at once (:class:`_InvocationGate`).
DEV_BACKGROUND_INVOCATIONS = 2

#: The pump waits on events (a write through the seam, an execution's end); with none, it polls
#: this often anyway (a message whose delay or visibility timeout ran out, anything missed).
FALLBACK_POLL_S = 1.0
#: How often the executions poller lists every ended execution instead of only those whose end
#: it was told about.
FULL_SCAN_S = 5.0
#: The ends the reconciler is fed (the EventBridge rule's statuses, quayinfra.reconciler): a
#: SUCCEEDED execution needs nothing, so no scan lists those, which only grow with history.
RECONCILED_STATUSES = ("FAILED", "TIMED_OUT", "ABORTED")
#: :meth:`LocalStack.wait_quiet`: the least time between two looks when the first found work.
LOOK_GAP_S = 0.05


@dataclass
class PumpStats:
    stream_records: int = 0
    wakes_received: int = 0
    executions_reconciled: int = 0
    errors: list[str] = field(default_factory=list)


class LocalStack:
    """The runtime on moto, in this process. ``settings``: overrides of the functions'
    environment (e.g. ``{"HOP_LIMIT": "3"}``); ``time_scale``: tests only, see :func:`scale_time`;
    ``visibility_timeout_s``: the wake queue's visibility timeout here (short, so a failed wake
    is retried within a play; 60 s in the deployed stack); ``background_invocations``: at most
    this many background Lambda invocations at once (``quay dev``: its API's invocations pass
    first, see :func:`foreground`; ``None``: no limit); ``instruments``: hooks of the deployed
    code's seam (:mod:`quayutec.seams`) installed while the stack runs, e.g. the lab's fault points
    (the engine itself imports no lab); ``allow_loopback_model_urls``: owners' model addresses may
    be loopback ones (the local provider server is on 127.0.0.1), a switch the stack sets on the
    deps the functions build (:func:`quayutec.seams.hook_deps`), never a function's setting."""

    def __init__(
        self,
        settings: dict[str, str] | None = None,
        time_scale: float | None = None,
        visibility_timeout_s: int = 1,
        retention: Retention | None = None,
        background_invocations: int | None = None,
        instruments: Sequence[seams.Instruments] = (),
        allow_loopback_model_urls: bool = True,
    ) -> None:
        self.settings = settings or {}
        self.allow_loopback_model_urls = allow_loopback_model_urls
        # The stack's own switches on the deps of its functions, then whatever it was given.
        own = [seams.Instruments("local stack", deps=self._local_deps)] if allow_loopback_model_urls else []
        self.instruments = (*own, *instruments)
        self._installed: list[seams.Instruments] = []
        self.background_invocations = background_invocations
        self._gate: _InvocationGate | None = None
        self.retention = retention or Retention()
        self.time_scale = time_scale
        self.visibility_timeout_s = visibility_timeout_s
        self._mock = mock_aws(config={"stepfunctions": {"execute_state_machine": True}})
        self._saved_env: dict[str, str | None] = {}
        self.env: dict[str, str] = {}
        self.function_arns: dict[str, str] = {}
        self.usage_plan_id = self.shared_api_key_id = ""  # start(): _usage_plan
        self.stats = PumpStats()
        self._stop = threading.Event()
        self._pump: threading.Thread | None = None
        self._busy = threading.Event()
        self._paused = threading.Event()
        self._clients: dict[str, Any] = {}
        self._clients_lock = threading.Lock()
        self._shard_iterators: dict[str, str] = {}
        self._pending_stream = False
        self._finished_executions: set[str] = set()
        self._wake = threading.Event()  # set by _poke: the pump has (maybe) work
        self._round_done = threading.Condition()  # notified after each pump round and poke (wait_quiet)
        self._rounds_done = 0
        self._events = 0  # pokes and pump rounds begun or done, under _round_done (wait_quiet)
        self._stream_table: bytes | None = None  # set by start(): see _pollers_fed
        self._shards: list[dict[str, Any]] | None = None  # the stream's, as last described
        self._stream_filter = StreamFilter.of_resources()  # from_deployed: the template's
        self._shards_at = 0.0
        self._due: set[str] = set(ALL_POLLERS)  # pollers poked since the round began (under _round_done)
        self._ended: deque[tuple[str, Any]] = deque()  # (execution ARN, moto's execution) ended
        self._kept_histories: deque[Any] = deque()  # moto executions whose history is still kept
        self._last_full_scan = 0.0
        self.pump_rounds = 0
        self.last_wake_body: str | None = None
        self.wake_bodies: deque[str] = deque(maxlen=self.retention.wake_bodies)
        self.assembly: Path | None = None  # set by from_deployed()
        self.deployment: Deployment | None = None

    @classmethod
    def from_deployed(
        cls, assembly: str | Path, *, settings: dict[str, str] | None = None, time_scale: float | None = None
    ) -> LocalStack:
        """The local stack on the resources of the CDK app's synthesized template (the cloud
        assembly directory, e.g. ``cdk.out``), deployed on moto's CloudFormation, instead of its
        own. ``start()`` deploys it (:func:`quayinfra.localdeploy.deploy`: bootstrap, assets,
        ``create_stack``, definition substitutions), deletes the deployed event source mappings
        (moto would run them synchronously inside ``put_item`` / ``send_message``; the pollers
        play their part, as for the plain local stack), puts ``settings`` into every deployed
        function's environment and then runs the handlers with that environment, so table,
        bucket, queue and state machine names are the deployed physical ones. Queues keep their
        deployed visibility timeout. Owners' model addresses are checked as deployed (no loopback).
        What was deployed: :attr:`deployment`."""
        stack = cls(settings=settings, time_scale=time_scale, allow_loopback_model_urls=False)
        stack.assembly = Path(assembly)
        return stack

    def _local_deps(self, deps: quay_deps.Deps) -> quay_deps.Deps:
        """A function's default deps on this stack (the seam's deps hook): loopback model addresses
        allowed."""
        return dataclasses.replace(deps, allow_loopback_model_urls=self.allow_loopback_model_urls)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        install_seams()
        # only those not installed already (a stack inside another leaves the outer one's)
        self._installed = [i for i in self.instruments if not seams.is_installed(i)]
        for instruments in self._installed:
            seams.install(instruments)
        if self.time_scale is not None:
            scale_time(self.time_scale)
        self.env = local_environment(self.settings)
        for k, v in self.env.items():
            self._saved_env[k] = os.environ.get(k)
            os.environ[k] = v
        self._mock.start()
        local_metrics.RECORDER.reset()
        quay_deps.reset()
        if self.assembly is not None:
            self._adopt_deployed()
        else:
            self._provision()
        calls.register_names(self.canonical_names(), self.state_machine_arn)
        os.environ[r.WAKE_QUEUE_ENV] = self.queue_urls[r.WAKE_QUEUE.logical_id]
        os.environ[r.STATE_MACHINE_ENV] = self.state_machine_arn
        quay_deps.reset()
        self._execution_prefix = self.state_machine_arn.replace(":stateMachine:", ":execution:", 1) + ":"
        # the table whose stream the pump reads (arn:...:table/NAME/stream/...): _pollers_fed
        self._stream_table = self.stream_arn.split(":table/", 1)[1].split("/", 1)[0].encode()
        with _ACTIVE_LOCK:
            _ACTIVE.append(self)
        if self.background_invocations is not None:
            global _GATE
            self._gate = _GATE = _InvocationGate(self.background_invocations)
        self._pump = threading.Thread(target=self._pump_loop, name="quay-pump", daemon=True)
        self._pump.start()

    def stop(self) -> None:
        with _ACTIVE_LOCK:
            if self in _ACTIVE:
                _ACTIVE.remove(self)
        self._stop.set()
        self._wake.set()
        if self._pump:
            self._pump.join(timeout=10)
        sfn = self.client("stepfunctions")
        running = sfn.list_executions(stateMachineArn=self.state_machine_arn, statusFilter="RUNNING")["executions"]
        for ex in running:
            with contextlib.suppress(Exception):  # best effort on shutdown, whatever moto raises
                sfn.stop_execution(executionArn=ex["executionArn"], error="LocalStackStopped")
        if running:
            time.sleep(0.05)  # the stopped ones wind down before moto's state goes
        self._mock.stop()
        global _GATE
        if self._gate is not None and _GATE is self._gate:
            _GATE = None
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for instruments in reversed(self._installed):
            seams.uninstall(instruments)
        self._installed = []
        quay_deps.reset()

    def client(self, service: str) -> Any:
        """A boto3 client for moto (cached per service: clients are thread-safe)."""
        with self._clients_lock:
            if service not in self._clients:
                self._clients[service] = seams.observe(boto3.client(service, region_name=REGION))
            return self._clients[service]

    # ------------------------------------------------------------------ resources
    def _provision(self) -> None:
        ddb = self.client("dynamodb")
        for t in r.TABLES:
            attrs = {t.partition_key.name: t.partition_key.type}
            keys = [{"AttributeName": t.partition_key.name, "KeyType": "HASH"}]
            if t.sort_key:
                attrs[t.sort_key.name] = t.sort_key.type
                keys.append({"AttributeName": t.sort_key.name, "KeyType": "RANGE"})
            kwargs: dict[str, Any] = {"TableName": t.default_name, "KeySchema": keys, "BillingMode": "PAY_PER_REQUEST"}
            gsis: list[dict[str, Any]] = []
            for idx in t.indexes:
                attrs[idx.partition_key.name] = idx.partition_key.type
                attrs[idx.sort_key.name] = idx.sort_key.type
                spec = {
                    "IndexName": idx.name,
                    "Projection": {"ProjectionType": "ALL"}
                    if idx.include is None
                    else {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(idx.include)},
                    "KeySchema": [
                        {"AttributeName": idx.partition_key.name, "KeyType": "HASH"},
                        {"AttributeName": idx.sort_key.name, "KeyType": "RANGE"},
                    ],
                }
                gsis.append(spec)  # global only: no table has an LSI (design §14)
            if gsis:
                kwargs["GlobalSecondaryIndexes"] = gsis
            if t.stream:
                kwargs["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": t.stream}
            kwargs["AttributeDefinitions"] = [{"AttributeName": k, "AttributeType": v} for k, v in attrs.items()]
            ddb.create_table(**kwargs)
            if t.ttl_attribute:  # as deployed (moto keeps the setting, it expires nothing)
                ddb.update_time_to_live(
                    TableName=t.default_name,
                    TimeToLiveSpecification={"Enabled": True, "AttributeName": t.ttl_attribute},
                )
        s3 = self.client("s3")
        for b in r.BUCKETS:
            s3.create_bucket(Bucket=b.default_name)
        # versioned as deployed (infra/quayinfra/storage.py, design §8)
        s3.put_bucket_versioning(Bucket=r.FILES_BUCKET.default_name, VersioningConfiguration={"Status": "Enabled"})
        sqs = self.client("sqs")
        self.queue_urls: dict[str, str] = {}
        for q in r.QUEUES:
            attrs_q: dict[str, str] = {"VisibilityTimeout": str(self.visibility_timeout_s)}
            if q.dead_letter:
                dlq_arn = sqs.get_queue_attributes(
                    QueueUrl=self.queue_urls[q.dead_letter], AttributeNames=["QueueArn"]
                )["Attributes"]["QueueArn"]
                attrs_q["RedrivePolicy"] = json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": q.max_receive_count}
                )
            self.queue_urls[q.logical_id] = sqs.create_queue(QueueName=q.default_name, Attributes=attrs_q)["QueueUrl"]
        role = self.client("iam").create_role(
            RoleName="quayutec-local", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []})
        )
        role_arn = role["Role"]["Arn"]
        lam = self.client("lambda")
        zipped = io.BytesIO()
        with zipfile.ZipFile(zipped, "w") as z:
            z.writestr("README.txt", "local stack: handlers run in-process from the quayutec package")
        env = {**self.env, r.WAKE_QUEUE_ENV: self.queue_urls[r.WAKE_QUEUE.logical_id], **self._usage_plan()}
        for f in r.FUNCTIONS:
            resp = lam.create_function(
                FunctionName=f"quayutec-{f.logical_id}",
                Runtime=LAMBDA_RUNTIME,
                Role=role_arn,
                Handler=f.handler,
                Code={"ZipFile": zipped.getvalue()},
                Timeout=f.timeout_s,
                MemorySize=f.memory_mb,
                Environment={"Variables": function_variables(f, env)},
            )
            self.function_arns[f.logical_id] = resp["FunctionArn"]
        definition = ASL_PATH.read_text()
        for sub, value in self.definition_substitutions().items():
            definition = definition.replace("${" + sub + "}", value)
        self.state_machine_arn = self.client("stepfunctions").create_state_machine(
            name=r.STATE_MACHINE_DEFAULT_NAME, definition=definition, roleArn=role_arn, type="STANDARD"
        )["stateMachineArn"]
        for f in r.FUNCTIONS:  # the run starters' STATE_MACHINE_ARN, as bind_state_machine does
            if r.STATE_MACHINE_ENV in f.reads:
                lam.update_function_configuration(
                    FunctionName=self.function_arns[f.logical_id],
                    Environment={
                        "Variables": function_variables(f, {**env, r.STATE_MACHINE_ENV: self.state_machine_arn})
                    },
                )
        desc = ddb.describe_table(TableName=r.ROOM_TABLE.default_name)["Table"]
        self.stream_arn = desc["LatestStreamArn"]
        self.files_bucket = r.FILES_BUCKET.default_name
        self.notify_ingest()

    def _adopt_deployed(self) -> None:
        """Deploy the assembly's template on this moto and take its resources as the stack's."""
        from quayinfra import localdeploy  # the CDK app's deployer; imports no CDK

        assert self.assembly is not None
        account = self.client("sts").get_caller_identity()["Account"]
        cfn, lam = self.client("cloudformation"), self.client("lambda")
        sfn = self.client("stepfunctions")
        name, template_path, assets = localdeploy.stack_artifact(self.assembly)
        # localdeploy.deploy() step by step, to put the state machine where moto executes it
        localdeploy.bootstrap(self.client("ssm"), self.client("s3"), account=account, region=REGION)
        localdeploy.publish_assets(self.client("s3"), assets, account=account, region=REGION)
        created = localdeploy.create_stack(cfn, name, template_path)
        if created["StackStatus"] != "CREATE_COMPLETE":
            raise RuntimeError(f"{name}: {created['StackStatus']} {created.get('StackStatusReason', '')}")
        ids = localdeploy.physical_ids(cfn, name)
        template = json.loads(template_path.read_text())
        machines = [k for k, v in template["Resources"].items() if v["Type"] == "AWS::StepFunctions::StateMachine"]
        if len(machines) != 1:
            raise ValueError(f"{name}: expected one state machine, found {machines}")
        self._mirror_state_machine(template["Resources"][machines[0]]["Properties"], ids[machines[0]], ids)
        localdeploy.apply_definition_substitutions(cfn, sfn, lam, name, template_path)
        mappings = remove_event_source_mappings(lam, account=account, region=REGION)

        envs: dict[str, dict[str, str]] = {}
        # moto's CloudFormation skips the usage plan and the shared key (AWS::ApiGateway::UsagePlan,
        # ApiKey, UsagePlanKey): made here, as the template has them, and named in the functions.
        plan_env = self._usage_plan()
        for f in r.FUNCTIONS:
            conf = lam.get_function_configuration(FunctionName=ids[f.logical_id])
            variables = dict(conf.get("Environment", {}).get("Variables", {}))
            overrides = {k: v for k, v in {**plan_env, **self.settings}.items() if k in r.environment_of(f)}
            if overrides:  # only what the function reads, as a deployment would set it
                variables.update(overrides)
                conf = lam.update_function_configuration(
                    FunctionName=ids[f.logical_id], Environment={"Variables": variables}
                )
            self.function_arns[f.logical_id] = conf["FunctionArn"]
            envs[f.logical_id] = variables
        self._stream_filter = StreamFilter.of_template(template, "WakeRelayFunction")
        self.deployment = Deployment(
            stack_name=name,
            physical_ids=ids,
            template=template,
            event_source_mappings=mappings,
            function_environments=envs,
        )

        self.queue_urls = {q.logical_id: ids[q.logical_id] for q in r.QUEUES}
        self.state_machine_arn = ids[machines[0]]
        room = self.client("dynamodb").describe_table(TableName=ids[r.ROOM_TABLE.logical_id])["Table"]
        self.stream_arn = room["LatestStreamArn"]
        # moto's CloudFormation cannot run CDK's bucket-notification custom resource: set the
        # notification the template asks for (uploads/ → the ingest queue) here.
        self.files_bucket = ids[r.FILES_BUCKET.logical_id]
        self.notify_ingest()
        # The handlers run in this process: its environment becomes the deployed functions' one.
        for k, v in self.deployment.process_environment().items():
            self._saved_env.setdefault(k, os.environ.get(k))
            os.environ[k] = self.env[k] = v
        for k in (r.WAKE_QUEUE_ENV, r.STATE_MACHINE_ENV):  # start() sets them next
            self._saved_env.setdefault(k, os.environ.get(k))

    def _usage_plan(self) -> dict[str, str]:
        """The stage's usage plan with its per-key throttle and the shared API key in it, as
        infra/quayinfra/api.py deploys them (docs/design.md §5); returns the variables that name
        them (USAGE_PLAN_NAME, SHARED_API_KEY_ID), also set on this process."""
        stage = self.env.get(r.STAGE_ENV, r.DEFAULT_STAGE)
        api = self.client("apigateway")
        with calls.owner(calls.SETUP):
            plan = api.create_usage_plan(
                name=r.usage_plan_name(stage),
                throttle={"rateLimit": r.DEFAULT_COMPANY_THROTTLE_RATE, "burstLimit": r.DEFAULT_COMPANY_THROTTLE_BURST},
            )
            key = api.create_api_key(name=r.shared_api_key_name(stage), enabled=True)
            api.create_usage_plan_key(usagePlanId=plan["id"], keyId=key["id"], keyType="API_KEY")
        self.usage_plan_id, self.shared_api_key_id = plan["id"], key["id"]
        env = {r.USAGE_PLAN_NAME_ENV: r.usage_plan_name(stage), r.SHARED_API_KEY_ID_ENV: key["id"]}
        for k, v in env.items():
            self._saved_env.setdefault(k, os.environ.get(k))
            os.environ[k] = self.env[k] = v
        return env

    def notify_ingest(self) -> None:
        """The files bucket's S3 event notification: objects created or removed under uploads/
        → the ingest queue (as infra/quayinfra/files.py deploys it)."""
        sqs = self.client("sqs")
        queue_arn = sqs.get_queue_attributes(
            QueueUrl=self.queue_urls[r.INGEST_QUEUE.logical_id], AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        self.client("s3").put_bucket_notification_configuration(
            Bucket=self.files_bucket,
            NotificationConfiguration={
                "QueueConfigurations": [
                    {
                        "QueueArn": queue_arn,
                        "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"],
                        "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": r.UPLOADS_PREFIX}]}},
                    }
                ]
            },
        )

    def _mirror_state_machine(self, props: dict[str, Any], arn: str, ids: dict[str, str]) -> None:
        """moto's CloudFormation creates the state machine in the plain Step Functions backend,
        while with ``execute_state_machine`` the API (and so StartExecution) is served by the
        ASL interpreter's backend: create it there too, under the same name (so the same ARN)
        and role, with the template's definition (substituted next)."""
        sfn = self.client("stepfunctions")
        try:
            sfn.describe_state_machine(stateMachineArn=arn)
            return  # already visible where executions run
        except sfn.exceptions.StateMachineDoesNotExist:
            pass
        role = props["RoleArn"]
        if isinstance(role, dict):  # {"Fn::GetAtt": [role logical id, "Arn"]}
            role = self.client("iam").get_role(RoleName=ids[role["Fn::GetAtt"][0]])["Role"]["Arn"]
        made = sfn.create_state_machine(
            name=arn.rsplit(":", 1)[1],
            definition=props["DefinitionString"],
            roleArn=role,
            type=props.get("StateMachineType", "STANDARD"),
        )
        if made["stateMachineArn"] != arn:
            raise RuntimeError(f"mirrored state machine {made['stateMachineArn']} != deployed {arn}")

    def canonical_names(self) -> dict[str, str]:
        """Physical name -> logical id of the template, for every resource the functions call
        (the IAM check's canonical ARNs, :mod:`quaylocal.calls`)."""
        if self.deployment is not None:
            physical = self.deployment.physical_ids
        else:
            physical = {
                **{t.logical_id: t.default_name for t in r.TABLES},
                **{b.logical_id: b.default_name for b in r.BUCKETS},
                **self.queue_urls,
                **self.function_arns,
                r.STATE_MACHINE_LOGICAL_ID: self.state_machine_arn,
            }
        physical = {
            **physical,
            r.USAGE_PLAN_LOGICAL_ID: self.usage_plan_id,
            r.SHARED_API_KEY_LOGICAL_ID: self.shared_api_key_id,
        }
        out = {}
        for logical, phys in physical.items():
            name = phys.rstrip("/").rsplit("/", 1)[-1] if phys.startswith("https://") else phys
            name = name.rsplit(":", 1)[-1] if name.startswith("arn:") else name
            out[name] = logical
        return out

    def definition_substitutions(self) -> dict[str, str]:
        """``${Placeholder}`` → function ARN (and ``${Partition}`` → "aws"), the same mapping
        the CDK app provides."""
        subs = {f.asl_placeholder: self.function_arns[f.logical_id] for f in r.FUNCTIONS if f.asl_placeholder}
        subs[r.ASL_PARTITION_PLACEHOLDER] = "aws"
        return subs

    def invoke(self, logical_id: str, event: dict[str, Any]) -> dict[str, Any]:
        """Invoke a function through moto's Lambda (so through the in-process seam). From a
        poller, the invocation is the Lambda service's own (an event source mapping: no role)."""
        owner = calls.OWNER.get()
        as_service = owner is not None and owner.startswith("function:")
        with calls.owner("local:event-source-mapping") if as_service else nullcontext():
            resp = self.client("lambda").invoke(
                FunctionName=self.function_arns[logical_id], Payload=json.dumps(event).encode()
            )
        payload = json.loads(resp["Payload"].read() or b"null")
        if resp.get("FunctionError"):
            raise RuntimeError(f"{logical_id} failed: {payload.get('errorType')}: {payload.get('errorMessage')}")
        return payload

    @property
    def function_names(self) -> dict[str, str]:
        """Logical id -> the function's name (the last part of its ARN)."""
        return {lid: arn.rsplit(":", 1)[-1] for lid, arn in self.function_arns.items()}

    def alarm_metrics(self) -> dict[str, float]:
        """Each alarm's metric (quayinfra.alarms.ALARMS) as this stack counted it since its
        start (quaylocal.metrics: sums for ``Sum``, the largest value for ``Maximum``; queues as
        they are now). Compare with the alarm's ``threshold``."""
        from quayinfra.alarms import ALARMS

        names = self.function_names
        rec = local_metrics.RECORDER
        out: dict[str, float] = {}
        for a in ALARMS:
            if a.source == "app":
                out[a.name] = float(rec.app.get(a.metric, 0))
            elif a.source == "queue":
                depth, age = local_metrics.queue_depth_and_age(self.client("sqs"), self.queue_urls[str(a.target)])
                out[a.name] = float(depth) if a.metric == "ApproximateNumberOfMessagesVisible" else age
            elif a.metric == "Errors":
                out[a.name] = float(rec.errors.get(names[str(a.target)], 0))
            elif a.metric == "IteratorAge":
                out[a.name] = rec.iterator_age_ms.get(names[str(a.target)], 0.0)
            else:  # Throttles: the local invoker never throttles
                out[a.name] = 0.0
        return out

    # ------------------------------------------------------------------ pollers
    @contextmanager
    def paused(self) -> Iterator[None]:
        """Tests: hold the pollers (no wake relay, no wake consumption, no reconcile)."""
        self._paused.set()
        while self._busy.is_set():
            time.sleep(0.01)
        try:
            yield
        finally:
            self._paused.clear()
            self._poke()

    def _poke(self, execution: Any = None, *, pollers: frozenset[str] | None = ALL_POLLERS) -> None:
        """Something happened that ``pollers`` may have to handle (:func:`_poke`): wake the pump
        for them. ``execution``: moto's execution that just ended (for the executions poller)."""
        if execution is not None:
            arn = getattr(execution, "exec_arn", None)
            if isinstance(arn, str) and arn.startswith(getattr(self, "_execution_prefix", "\0")):
                self._ended.append((arn, execution))
        with self._round_done:
            if pollers is not None:
                self._due |= pollers
                self._wake.set()
            self._events += 1
            self._round_done.notify_all()

    def _pump_loop(self) -> None:
        """Rounds of every poller while there is work; then wait for a poke (a write through the
        seam, an execution's end), a queue message becoming visible, or the fallback poll."""
        while not self._stop.is_set():
            if self._paused.is_set():
                self._wake.wait(0.05)
                continue
            with self._round_done:  # before the round: a poke during it brings the next round
                self._wake.clear()
                due, self._due = frozenset(self._due), set()
                self._events += 1
                self._round_done.notify_all()
            try:
                did = self.pump_once(due)
            except Exception as exc:  # noqa: BLE001 - keep pumping, report at the end
                self.stats.errors.append(f"{type(exc).__name__}: {exc}")
                self._stop.wait(0.02)
                continue
            finally:
                with self._round_done:
                    self._rounds_done += 1
                    self._events += 1
                    self._round_done.notify_all()
            if did or self._pending_stream:
                with self._round_done:  # the same pollers again (more than one batch waiting)
                    self._due |= due | ({STREAM} if self._pending_stream else set())
                continue
            if not self._wake.wait(self._idle_wait()):
                with self._round_done:  # no poke: a message became visible, or the fallback poll
                    self._due |= ALL_POLLERS

    def _idle_wait(self) -> float:
        """Seconds until the pump must look again without a poke: the fallback poll, or sooner
        when a message of a polled queue becomes visible (delay or visibility timeout over)."""
        wait = FALLBACK_POLL_S
        try:
            from moto.sqs.models import sqs_backends

            now_ms = time.time() * 1000
            with _MOTO_LOCK:
                backend = sqs_backends[self._account()][REGION]
                for queue in (r.WAKE_QUEUE, r.INGEST_QUEUE):
                    q = backend.queues.get(self.queue_urls[queue.logical_id].rstrip("/").rsplit("/", 1)[-1])
                    for m in list(q._messages) if q is not None else ():
                        at = max(m.visible_at, m.delayed_until)
                        if at > now_ms:
                            wait = min(wait, (at - now_ms) / 1000 + 0.005)
        except Exception:  # noqa: BLE001 - moto internals (pinned version): the fallback poll
            pass
        return max(0.005, wait)

    def _account(self) -> str:
        return self.stream_arn.split(":")[4]

    def pump_once(self, pollers: frozenset[str] = ALL_POLLERS) -> bool:
        """One round of the executions poller and ``pollers`` (default: every poller); ``True``
        when anything was processed."""
        self._busy.set()
        self.pump_rounds += 1
        try:
            a = b = d = False
            # Each poller's calls count as those of the function whose event source it stands
            # in for (design §11, quaylocal.calls); the executions poller stands in for EventBridge.
            if STREAM in pollers:
                with calls.owner(calls.function_owner("WakeRelayFunction")):
                    a = self._poll_stream()
            if QUEUES in pollers:
                with calls.owner(calls.function_owner("WakeConsumerFunction")):
                    b = self._poll_queue()
            with calls.owner("local:eventbridge-status-events"):
                c = self._poll_executions()
            if QUEUES in pollers:
                with calls.owner(calls.function_owner("IngestFunction")):
                    d = self._poll_queue(r.INGEST_QUEUE, "IngestFunction")
            return a or b or c or d
        finally:
            self._busy.clear()

    def _stream_shards(self) -> list[dict[str, Any]]:
        """The stream's shards, described again every ``FULL_SCAN_S`` (the table keeps one)."""
        now = time.monotonic()
        if self._shards is None or now - self._shards_at >= FULL_SCAN_S:
            self._shards = self.client("dynamodbstreams").describe_stream(StreamArn=self.stream_arn)[
                "StreamDescription"
            ]["Shards"]
            self._shards_at = now
        return self._shards

    def _records_after(self, iterator: str) -> bool | None:
        """Whether the shard holds records from ``iterator`` on, read off moto's shard without a
        GetRecords call (which makes a new iterator each time); ``None``: not known (moto
        internals, pinned version)."""
        try:
            with _MOTO_LOCK:
                held = self._streams_backend().shard_iterators.get(iterator)
                if held is None:
                    return None
                shard = held.stream_shard
                return held.sequence_number - shard.starting_sequence_number < len(shard.items)
        except Exception:  # noqa: BLE001 - moto internals: ask GetRecords
            return None

    def _poll_stream(self) -> bool:
        streams = self.client("dynamodbstreams")
        did = False
        shards = self._stream_shards()
        self._pending_stream = False
        for shard in shards:
            sid = shard["ShardId"]
            known = self._shard_iterators.get(sid)
            if known is not None and self._records_after(known) is False:
                continue  # nothing new: no GetRecords
            it = (
                known
                or streams.get_shard_iterator(StreamArn=self.stream_arn, ShardId=sid, ShardIteratorType="TRIM_HORIZON")[
                    "ShardIterator"
                ]
            )
            resp = streams.get_records(ShardIterator=it, Limit=100)
            records = resp.get("Records", [])
            if not records:
                self._shard_iterators[sid] = resp.get("NextShardIterator", it)
                self._forget_iterators(it)
                continue
            self.stats.stream_records += len(records)
            # the mapping's iterator age: the records it read, the ones its filter drops too
            local_metrics.RECORDER.iterator_age(
                self.function_names["WakeRelayFunction"], local_metrics.newest_record_age_ms(records)
            )
            # The event source mapping's filter: records it drops never invoke the function.
            kept = [rec for rec in records if self._stream_filter.matches(rec)]
            if not kept:
                self._shard_iterators[sid] = resp["NextShardIterator"]
                self._forget_iterators(it)
                did = True
                continue
            event = {"Records": [{**rec, "eventSourceARN": self.stream_arn} for rec in kept]}
            result = self.invoke("WakeRelayFunction", _json_safe(event))
            failures = [f["itemIdentifier"] for f in (result or {}).get("batchItemFailures", [])]
            if failures:  # retry from the first failed record, as the event source mapping does
                self._shard_iterators[sid] = streams.get_shard_iterator(
                    StreamArn=self.stream_arn,
                    ShardId=sid,
                    ShardIteratorType="AT_SEQUENCE_NUMBER",
                    SequenceNumber=failures[0],
                )["ShardIterator"]
                self._pending_stream = True
                self._forget_iterators(it, resp.get("NextShardIterator"))
            else:
                self._shard_iterators[sid] = resp["NextShardIterator"]
                self._forget_iterators(it)
            did = True
        if did and self.retention.stream_records is not None:
            self._trim_stream(self.retention.stream_records)
        return did

    def _streams_backend(self) -> Any:
        from moto.dynamodbstreams.models import dynamodbstreams_backends

        return dynamodbstreams_backends[self._account()][REGION]

    def _forget_iterators(self, *iterators: str | None) -> None:
        """moto keeps every shard iterator it hands out (one per GetRecords): drop the used ones
        (never the pump's current one; moto internals, pinned version)."""
        current = set(self._shard_iterators.values())
        with _MOTO_LOCK:
            held = self._streams_backend().shard_iterators
            for it in iterators:
                if it is not None and it not in current:
                    held.pop(it, None)

    def _trim_stream(self, keep: int) -> None:
        """Drop the stream records the pump has handled, but the newest ``keep`` of them: moto
        keeps every record of the shard (moto internals, pinned version: the sequence numbers of
        the records kept do not change)."""
        with _MOTO_LOCK:
            backend = self._streams_backend()
            for it in list(self._shard_iterators.values()):
                held = backend.shard_iterators.get(it)
                if held is None:
                    continue
                shard = held.stream_shard
                table = backend._get_table_from_arn(self.stream_arn)
                if table.stream_shard is not shard:
                    continue
                excess = (held.sequence_number - shard.starting_sequence_number) - keep
                if excess > 0:
                    del shard.items[:excess]
                    shard.starting_sequence_number += excess

    def _poll_queue(self, queue: r.QueueDef = r.WAKE_QUEUE, function: str = "WakeConsumerFunction") -> bool:
        sqs = self.client("sqs")
        url = self.queue_urls[queue.logical_id]
        msgs = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
        ).get("Messages", [])
        if not msgs:
            return False
        queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        event = {
            "Records": [
                {
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                    "attributes": m.get("Attributes", {}),
                    "messageAttributes": {},
                    "md5OfBody": m["MD5OfBody"],
                    "eventSource": "aws:sqs",
                    "eventSourceARN": queue_arn,
                    "awsRegion": REGION,
                }
                for m in msgs
            ]
        }
        if queue is r.WAKE_QUEUE:
            for m in msgs:
                self.wake_bodies.append(m["Body"])
                self.last_wake_body = m["Body"]
            self.stats.wakes_received += len(msgs)
        result = self.invoke(function, event)
        failed = {f["itemIdentifier"] for f in (result or {}).get("batchItemFailures", [])}
        done = [m for m in msgs if m["MessageId"] not in failed]
        if done:  # delete only the successes: failed records come back after the visibility timeout
            sqs.delete_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)]
            )
        return True

    def _poll_executions(self) -> bool:
        """moto emits no EventBridge events: feed ended executions to the reconciler in the
        "Step Functions Execution Status Change" event shape. The executions whose end the seam
        reported (:func:`_terminated_and_poke`) at once; every ended one every ``FULL_SCAN_S``."""
        sfn = self.client("stepfunctions")
        did = False
        while self._ended:
            arn, execution = self._ended.popleft()
            if arn in self._finished_executions:
                continue
            desc = sfn.describe_execution(executionArn=arn)
            if desc["status"] == "RUNNING":
                continue  # not ended after all: the full scan sees it when it is
            self._finished_executions.add(arn)
            self._keep_history(execution)
            if desc["status"] != "SUCCEEDED":
                self._reconcile(arn, desc["name"], desc["status"], desc)
                did = True
        if time.monotonic() - self._last_full_scan >= FULL_SCAN_S:
            self._last_full_scan = time.monotonic()
            for ex in self._executions(*RECONCILED_STATUSES):
                arn = ex["executionArn"]
                if arn in self._finished_executions:
                    continue
                self._finished_executions.add(arn)
                self._reconcile(arn, ex["name"], ex["status"], sfn.describe_execution(executionArn=arn))
                did = True
        return did

    def _reconcile(self, arn: str, name: str, status: str, desc: dict[str, Any]) -> None:
        event = {
            "version": "0",
            "detail-type": "Step Functions Execution Status Change",
            "source": "aws.states",
            "account": ACCOUNT,
            "region": REGION,
            "resources": [arn],
            "detail": {
                "executionArn": arn,
                "stateMachineArn": self.state_machine_arn,
                "name": name,
                "status": status,
                "error": desc.get("error"),
                "cause": desc.get("cause"),
                "input": desc.get("input"),
            },
        }
        self.invoke("ReconcilerFunction", event)
        self.stats.executions_reconciled += 1

    def _keep_history(self, execution: Any) -> None:
        """Bound the histories kept (:class:`Retention`): the oldest finished execution past
        the limit keeps its description, moto drops its history (moto internals, pinned)."""
        keep = self.retention.executions
        if keep is None or execution is None:
            return
        self._kept_histories.append(execution)
        while len(self._kept_histories) > keep:
            old = self._kept_histories.popleft()
            worker = getattr(old, "exec_worker", None)
            if worker is not None:
                with _MOTO_LOCK:
                    worker.env = None

    def _executions(self, *statuses: str) -> list[dict[str, Any]]:
        """The state machine's executions in ``statuses``, every page (ListExecutions filters by
        one status at a time)."""
        pages = self.client("stepfunctions").get_paginator("list_executions")
        return [
            ex
            for status in statuses
            for page in pages.paginate(stateMachineArn=self.state_machine_arn, statusFilter=status)
            for ex in page["executions"]
        ]

    # ------------------------------------------------------------------ quiet
    def running_executions(self) -> list[dict[str, Any]]:
        return self.client("stepfunctions").list_executions(
            stateMachineArn=self.state_machine_arn, statusFilter="RUNNING"
        )["executions"]

    def is_parked(self, run_id: str) -> bool:
        """Parked: every held action of the run has a recorded approval request and at least one
        of them is still pending."""
        from quayutec.deps import default_deps

        d = default_deps()
        run = d.ledger.get_run(run_id)
        if run is None or run.status != "waiting_approval":
            return False
        held = [a.index for a in d.ledger.actions(run_id) if a.decision == "ask"]
        found = [d.room.get_approval(run.room_id, run_id, i) for i in held]
        if not held or any(f is None for f in found):
            return False
        return any(f[0].status == "pending" for f in found if f)

    def quiet(self) -> bool:
        """No stream record, SQS message or execution in progress, but executions parked on a
        recorded approval request, and every failed, timed-out or aborted execution fed to the
        reconciler. The running executions first: while runs go on, that is what is not quiet.
        Each listing is filtered by status, so none grows with the succeeded ones of the past."""
        if self._pending_stream:
            return False
        if not all(self.is_parked(ex["name"]) for ex in self._executions("RUNNING")):
            return False
        if not {ex["executionArn"] for ex in self._executions(*RECONCILED_STATUSES)} <= self._finished_executions:
            return False  # an end the reconciler has not been fed yet
        sqs = self.client("sqs")
        for queue in (r.WAKE_QUEUE, r.INGEST_QUEUE):
            attrs = sqs.get_queue_attributes(
                QueueUrl=self.queue_urls[queue.logical_id],
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
            )["Attributes"]
            if int(attrs["ApproximateNumberOfMessages"]) or int(attrs["ApproximateNumberOfMessagesNotVisible"]):
                return False
        streams = self.client("dynamodbstreams")
        for shard in self._stream_shards():
            it = self._shard_iterators.get(shard["ShardId"])
            if it is None:
                return False
            after = self._records_after(it)
            if after is not None:
                if after:
                    return False
                continue
            try:
                resp = streams.get_records(ShardIterator=it, Limit=1)
            except Exception:  # noqa: BLE001 - the pump moved on from that iterator meanwhile
                return False
            self._forget_iterators(resp.get("NextShardIterator"))
            if resp.get("Records"):
                return False
        return True

    def wait_quiet(self, timeout_s: float = 120.0, settle_s: float = 0.0) -> None:
        """Block until the stack is quiet (docs/scenarios.md: no stream record, SQS message or
        execution in progress, except executions parked on a recorded approval request), and has
        stayed so for ``settle_s``. Raises TimeoutError.

        A look counts only when it saw one state: :meth:`quiet` held, the pump was idle and no
        Lambda invocation or Wait state was under way before and after (with one, no look is
        taken: the stack is not quiet), and no poke (a write through the seam, an invocation's,
        a Wait state's or an execution's end) and no pump round happened while it looked.
        Between looks it waits for the next such event (at most 0.25 s), not a fixed interval,
        and looks again no sooner than ``LOOK_GAP_S`` after a look that found work in progress
        (runs write often; each look competes with them for the interpreter): it returns within
        that of the pump round that handled the last thing."""
        deadline = time.monotonic() + timeout_s
        calm: tuple[int, float] | None = None  # (events, since): quiet seen, nothing happened since
        while time.monotonic() < deadline:
            with self._round_done:
                seen = self._events
            if calm is not None and calm[0] != seen:
                calm = None
            began = time.monotonic()
            looked = (
                not self._busy.is_set()
                and not _invocations_in_flight
                and not _waits_under_way
                and self.quiet()
                and not self._busy.is_set()
                and not _invocations_in_flight
                and not _waits_under_way
            )
            with self._round_done:
                if looked and self._events == seen:
                    calm = calm or (seen, time.monotonic())
                    left = settle_s - (time.monotonic() - calm[1])
                    if left <= 0:
                        return
                    self._round_done.wait(min(left, 0.25))
                    continue
                if self._events == seen:
                    self._round_done.wait(min(0.25, max(0.0, deadline - time.monotonic())))
            time.sleep(max(0.0, min(began + LOOK_GAP_S, deadline) - time.monotonic()))
        raise TimeoutError(f"the local stack was not quiet within {timeout_s} s")


def _json_safe(value: Any) -> Any:
    """Stream records carry datetimes (ApproximateCreationDateTime): epoch seconds, as AWS sends."""
    import datetime as _dt

    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, _dt.datetime):
        return value.timestamp()
    return value
