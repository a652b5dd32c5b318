"""Fault injection for the chaos tests: "never twice, proven" (design §2.1, §6). OFF by default.

This module lives with the local stack, not in the deployed package: it reaches the runtime
through :mod:`quayutec.seams` (a client hook puts the write points on every factory client, a
part hook fires the points around each part of a merged phase): :data:`INSTRUMENTS`, which the
chaos lab installs into the local stacks it builds (``LocalStack(instruments=...)``) and removes
when it stops them; nothing registers on import, and the engine never imports this module.

Two switches, both needed:

1. ``QUAY_FAULTS_ENABLED=1`` in the process environment. Only the local stack's chaos tooling
   sets it (``quaylab.chaos`` passes it as a LocalStack setting). It is not in
   ``quayutec.resources.ENVIRONMENT_VARIABLES``, so the CDK app never gives it to a deployed
   function (a test checks). Without it :func:`instrument` registers nothing and every hook
   returns at once.
2. A plan armed in-process with :func:`arm` (module state). No API route, event field, queue
   message or environment variable carries a plan: only Python code in the same process (a
   test, ``quay chaos``) can arm one.

Injection points (names are stable, so a plan can name them):

* ``{phase}:before:{write}`` / ``{phase}:after:{write}`` — around every write a phase makes.
  The hook sits on the boto3 clients of :mod:`quayutec.dal.aws` (``instrument``, a client hook), so every
  DynamoDB / S3 / SQS write is covered, present and future, without a hook per DAL method.
  ``{write}`` is ``{op} {what}``: op ``put`` / ``update`` / ``tx`` / ``delete`` / ``s3put`` /
  ``send``; what ``{table}:{sort-key prefix}`` (``room:MSG``, ``ledger:ACT``,
  ``claims:CLAIM+ledger:RUN+ledger:CHAIN+room:META``), ``s3:{name}`` or ``sqs:wakes``. A write repeated inside one
  invocation gets ``#2``, ``#3`` … (``apply_actions:after:update ledger:ACT#2``). An ``after``
  point fires only when the write succeeded (it landed).
* ``{phase}:start`` / ``{phase}:end`` — the invocation boundaries, called by the Lambda seam
  of the local stack (``quaylab.chaos``) through :func:`boundary`: ``end`` is "the handler
  returned, its writes landed, the response has not reached Step Functions yet".

``{phase}`` is the handler module (``claim``, ``load_context``, ``call_model``,
``decide_rights``, ``post_reply``, ``request_approval``, ``apply_actions``, ``finish``,
``record_failure``, ``wake_relay``, ``wake_consumer``, ``reconciler``), set per invocation
by :func:`scope` (thread-local: each Step Functions task runs in its own thread).

Fault kinds and how Step Functions sees them (the Lambda seam reports ``errorType`` = the
exception's class name, which is the ASL error name):

* ``crash`` — raises :class:`InjectedFault` (a ``RuntimeError``; not in any ``Retry``): the
  state's ``Catch`` → RecordFailure. Inside RecordFailure (no Catch) the execution fails and
  the reconciler gives the run its final status.
* ``die`` — raises ``quayutec.errors.TransientError`` at the point: the write before an
  ``after`` point landed, the step reports an error and the ASL retries it (backoff, jitter).
  (A dotted Lambda service name such as ``Lambda.Unknown`` cannot be a class name: that is
  what ``die_end`` gives, through the seam.)
* ``die_end`` (at ``{phase}:end`` only) — raises :class:`LambdaDied`; the seam reports it as the
  Lambda service does for a function that died (``Lambda.Unknown``), retried by the ASL.
* ``stop`` — ``StopExecution`` of the run's own execution at the point, then carries on (as on
  AWS, a running Lambda is not interrupted): the execution is ABORTED outside any Catch → the
  reconciler. Used at ``{phase}:end``, so what landed is known.
* ``sleep`` — sleeps ``arg`` seconds (to cross the run's active-time limit).
* ``drop`` — raises :class:`InjectedFault` (use on ``wake_relay``: the record's
  processing fails mid-batch; the batch reports it and the stream retries it).
* ``dup`` — on an SQS send: every message is sent ``arg`` times (a wake delivered N times).
* ``pause`` / ``stop_chain`` — a person pauses the run's agent (ann of acme, whose agents the
  chaos lab's runs are) or stops the run's chain (bob of bolt) at the point, through the API's
  own domain service, with clients of its own (not the function's), then the phase carries on:
  what a pause or a stop answered while the run is inside that step does (design §12.2).
* ``conflict`` (at a ``{phase}:before:tx …`` point only) — the transaction is not sent and the
  call raises what botocore makes of DynamoDB's answer to a transaction that met another one on
  an item (a hot counter): ``TransactionCanceledException`` whose ``CancellationReasons`` say
  ``TransactionConflict`` for the entry at index ``arg`` (``-1``: the last) and ``None`` for the
  rest (:func:`transaction_conflict`). moto never raises it; DynamoDB writes nothing of a
  cancelled transaction, so the point has no ``after``. ``times`` > 1 makes the retried step meet
  it again (design §3: the claim's bounded retry takes it).
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from quayutec import seams
from quayutec.errors import TransientError

ENV_VAR = "QUAY_FAULTS_ENABLED"
KINDS = ("crash", "die", "die_end", "stop", "sleep", "drop", "dup", "conflict", "pause", "stop_chain")

_WRITE_OPS = {
    ("dynamodb", "PutItem"): "put",
    ("dynamodb", "UpdateItem"): "update",
    ("dynamodb", "DeleteItem"): "delete",
    ("dynamodb", "TransactWriteItems"): "tx",
    ("dynamodb", "BatchWriteItem"): "batch",
    ("s3", "PutObject"): "s3put",
    ("s3", "DeleteObject"): "s3delete",
    ("sqs", "SendMessage"): "send",
    ("sqs", "SendMessageBatch"): "send",
}


class InjectedFault(RuntimeError):
    """A crash injected at a fault point (not retried by the ASL: ``Catch`` → RecordFailure)."""


class LambdaDied(TransientError):
    """The function died after its writes landed; the local seam reports ``Lambda.Unknown``."""


@dataclass
class Fault:
    """One fault of a plan: ``kind`` at ``point``, for ``run_id`` (or any run / no run when
    ``None``), at most ``times`` times, once the point has passed ``skip`` times (e.g. a retried
    claim's transaction: the first attempt lands, the retries meet a conflict)."""

    point: str
    kind: str
    run_id: str | None = None
    times: int = 1
    arg: float = 0.0
    skip: int = 0
    fired: int = 0
    passed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r} (one of {', '.join(KINDS)})")
        if self.kind == "conflict" and ":before:tx " not in self.point:
            raise ValueError(f"a conflict cancels a transaction before it lands: not at {self.point!r}")


@dataclass
class _Scope:
    phase: str = ""
    run_id: str | None = None
    execution_arn: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


_lock = threading.Lock()
_plan: list[Fault] = []
_trace: list[tuple[str | None, str]] | None = None
_local = threading.local()


def enabled() -> bool:
    """The environment switch (``QUAY_FAULTS_ENABLED=1``)."""
    return os.environ.get(ENV_VAR) == "1"


def _active() -> bool:
    return enabled() and (bool(_plan) or _trace is not None)


# ----------------------------------------------------------------------------- plans
def arm(*faults: Fault) -> None:
    """Replace the plan. Raises RuntimeError when the environment switch is off."""
    if not enabled():
        raise RuntimeError(f"fault injection is off: {ENV_VAR}=1 is set only by the local stack's chaos tooling")
    with _lock:
        _plan[:] = list(faults)


def add(*faults: Fault) -> None:
    """Add faults to the plan (cases running side by side, each scoped to its run)."""
    if not enabled():
        raise RuntimeError(f"fault injection is off: {ENV_VAR}=1 is set only by the local stack's chaos tooling")
    with _lock:
        _plan.extend(faults)


def disarm() -> None:
    global _trace
    with _lock:
        _plan.clear()
        _trace = None


def fired() -> list[Fault]:
    with _lock:
        return [f for f in _plan if f.fired]


@contextmanager
def tracing() -> Iterator[list[tuple[str | None, str]]]:
    """Record every point reached (``(run_id, point)``), injecting nothing of its own."""
    global _trace
    trace: list[tuple[str | None, str]] = []
    with _lock:
        _trace = trace
    try:
        yield trace
    finally:
        with _lock:
            _trace = None


# ----------------------------------------------------------------------------- scope
def _current() -> _Scope | None:
    return getattr(_local, "scope", None)


@contextmanager
def scope(phase: str, run_id: str | None = None, execution_arn: str | None = None) -> Iterator[None]:
    """The invocation being run on this thread (set by the local Lambda seam)."""
    previous = _current()
    _local.scope = _Scope(phase=phase, run_id=run_id, execution_arn=execution_arn)
    try:
        yield
    finally:
        _local.scope = previous


def _match(point: str, sc: _Scope | None) -> Fault | None:
    run_id = sc.run_id if sc else None
    with _lock:
        if _trace is not None:
            _trace.append((run_id, point))
        for f in _plan:
            if f.point == point and f.fired < f.times and (f.run_id is None or f.run_id == run_id):
                if f.passed < f.skip:
                    f.passed += 1
                    continue
                f.fired += 1
                return f
    return None


def _fire(f: Fault, point: str, sc: _Scope | None, params: dict[str, Any] | None = None, call: Any = None) -> None:
    """Do what fault ``f`` does at ``point``; ``params`` and ``call`` (:class:`_Call`): the API
    call about to be made, at a ``before`` point."""
    where = f"injected {f.kind} at {point}" + (f" (run {sc.run_id})" if sc and sc.run_id else "")
    if f.kind in ("crash", "drop"):
        raise InjectedFault(where)
    if f.kind == "conflict":
        if call is None or params is None or call.model.name != "TransactWriteItems":
            raise InjectedFault(where + ": no transaction to cancel")
        raise transaction_conflict(call.model, call.exceptions, len(params["TransactItems"]), int(f.arg))
    if f.kind == "die":
        raise TransientError(where + ": the step died after its writes landed")
    if f.kind == "die_end":
        raise LambdaDied(where + ": the function died before returning")
    if f.kind == "sleep":
        time.sleep(f.arg)
    elif f.kind == "stop":
        _stop_execution(sc, where)
    elif f.kind in ("pause", "stop_chain"):
        person_stops((sc.run_id or "") if sc else "", f.kind, where)
    elif f.kind == "dup" and params is not None and "Entries" in params:
        entries = params["Entries"]
        n = max(1, min(int(f.arg), 10 // max(1, len(entries))))  # a batch holds at most 10 messages
        params["Entries"] = [{**e, "Id": f"{e['Id']}-{i}"} for i in range(n) for e in entries]


#: DynamoDB's cancellation reason for an entry whose item another transaction is writing
#: (DynamoDB API reference, TransactWriteItems: "Transaction Conflict").
CONFLICT_MESSAGE = "Transaction is ongoing for the item"


def transaction_conflict(operation: Any, exceptions: Any, entries: int, at: int) -> ClientError:
    """What a boto3 client raises when DynamoDB cancels a ``TransactWriteItems`` of ``entries``
    entries because entry ``at`` met another transaction: the wire answer DynamoDB sends (HTTP
    400, ``__type`` ``…#TransactionCanceledException``, one reason per entry in order, ``{"Code":
    "None"}`` for an entry that was not the reason, the codes listed in ``Message``) parsed by
    botocore's own parser for ``operation`` (its protocol, the modeled error fields), raised as
    the client's modeled exception class (``exceptions``: ``client.exceptions``), so code reading
    ``error.response`` sees exactly what it would on AWS."""
    from botocore import parsers
    from botocore.awsrequest import HeadersDict

    codes = ["None"] * entries
    codes[at] = "TransactionConflict"
    body = {
        "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
        "CancellationReasons": [
            {"Code": c} if c == "None" else {"Code": c, "Message": CONFLICT_MESSAGE} for c in codes
        ],
        "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons "
        f"[{', '.join(codes)}]",
    }
    response = {
        "status_code": 400,
        "headers": HeadersDict(
            {
                "x-amzn-RequestId": "quay-injected-conflict",
                "x-amzn-ErrorType": "TransactionCanceledException",
                "Content-Type": "application/x-amz-json-1.0",
            }
        ),
        "body": json.dumps(body).encode(),
        "context": {"operation_name": operation.name},
    }
    parser = parsers.create_parser(operation.service_model.protocol)
    parsed = parser.parse(response, operation.output_shape)
    code = parsed["Error"]["Code"]
    parsed.update(parser.parse(response, operation.service_model.shape_for_error_code(code)))
    error: ClientError = exceptions.from_code(code)(parsed, operation.name)
    return error


def _stop_execution(sc: _Scope | None, where: str) -> None:
    import boto3

    from quayutec.resources import STATE_MACHINE_ENV

    if sc is None or not sc.run_id:
        raise InjectedFault(where + ": no execution to stop")
    # The local stack's process environment (the phase functions do not read the ARN).
    machine = os.environ[STATE_MACHINE_ENV]
    arn = sc.execution_arn or machine.replace(":stateMachine:", ":execution:") + f":{sc.run_id}"
    # The chaos lab stops the execution as an operator would: a client of its own, not the
    # factory's (whose calls count as the function's own, design §11).
    boto3.client("stepfunctions").stop_execution(executionArn=arn, error="InjectedStop", cause=where)


def person_stops(run_id: str, kind: str, where: str = "") -> int:
    """A person pauses run ``run_id``'s agent (``kind`` ``pause``) or stops its chain
    (``stop_chain``) as the API would (quayutec.logic.stops), with clients of their own: the
    function's factory clients would count the calls as the function's and check them against
    its role. Returns how many runs waiting on approvals the request ended. Raises
    InjectedFault when the run has no ledger entry."""
    import boto3

    from quayutec.dal.ledger import LedgerStore
    from quayutec.dal.store import RoomStore
    from quayutec.deps import Deps, default_deps
    from quayutec.logic.stops import Stops
    from quayutec.models import Author

    ddb = boto3.resource("dynamodb").meta.client
    base = default_deps()
    deps = Deps(
        settings=base.settings,
        room=RoomStore(base.room.table, client=ddb),
        ledger=LedgerStore(base.ledger.table, base.ledger.claim_table, client=ddb),
        rundata=base.rundata,
        sfn=boto3.client("stepfunctions"),
    )
    run = deps.ledger.get_run(run_id) if run_id else None
    if run is None:
        raise InjectedFault(where + ": no run to stop")
    stops = Stops(deps)
    if kind == "stop_chain":
        return stops.stop_chain(run.room_id, run.chain_id, Author(kind="person", id="bob", company="bolt"))[1]
    agent = deps.room.get_agent(run.agent_id)
    if agent is None:
        raise InjectedFault(where + f": no agent {run.agent_id}")
    return stops.pause(agent, Author(kind="person", id="ann", company=agent.company)).stopping


@contextmanager
def subphase(name: str) -> Iterator[None]:
    """One phase run inside a merged invocation (``claim_and_read`` runs ``claim`` then
    ``load_context``): its writes' points keep the phase's own name, and its ``{name}:start`` /
    ``{name}:end`` points fire too (``die_end`` there: the function died between the two phases,
    which the seam reports as ``Lambda.Unknown``). Inert unless fault injection is on."""
    sc = _current()
    if not _active() or sc is None:
        yield
        return
    with scope(name, sc.run_id, sc.execution_arn):
        boundary("start")
        yield
        boundary("end")


def boundary(edge: str) -> None:
    """``{phase}:start`` / ``{phase}:end`` of the current invocation (called by the seam)."""
    if not _active():
        return
    sc = _current()
    if sc is None:
        return
    point = f"{sc.phase}:{edge}"
    f = _match(point, sc)
    if f is not None:
        _fire(f, point, sc)


# ----------------------------------------------------------------------------- write hooks
def _short_table(name: str) -> str:
    return name.rsplit("-", 1)[-1].lower()


def _prefix(item: dict[str, Any] | None) -> str:
    if not item:
        return "?"
    sk = item.get("sk")
    if isinstance(sk, dict):  # typed form
        sk = next(iter(sk.values()), "")
    if sk is None:
        return "CLAIM" if "wake_id" in item else "?"
    return str(sk).split("#", 1)[0]


def _what(service: str, op: str, params: dict[str, Any]) -> str:
    if service == "s3":
        key = str(params.get("Key", ""))
        return "s3:" + key.rsplit("/", 1)[-1].removesuffix(".json")
    if service == "sqs":
        return "sqs:wakes"
    if op == "TransactWriteItems":
        parts = []
        for t in params.get("TransactItems", []):
            ((_kind, spec),) = t.items()
            parts.append(f"{_short_table(spec.get('TableName', ''))}:{_prefix(spec.get('Item') or spec.get('Key'))}")
        return "+".join(parts)
    item = params.get("Item") or params.get("Key")
    return f"{_short_table(str(params.get('TableName', '')))}:{_prefix(item)}"


@dataclass(frozen=True)
class _Call:
    """The API call a ``before`` point sits on: its operation model and the client's modeled
    exceptions (what a ``conflict`` raises)."""

    model: Any
    exceptions: Any


def _before(params: dict[str, Any], model: Any, context: dict[str, Any], exceptions: Any = None, **_: Any) -> None:
    if not _active():
        return
    service = model.service_model.service_name
    op = _WRITE_OPS.get((service, model.name))
    if op is None:
        return
    sc = _current()
    write = f"{op} {_what(service, model.name, params)}"
    if sc is not None:
        n = sc.counts.get(write, 0) + 1
        sc.counts[write] = n
        if n > 1:
            write += f"#{n}"
    phase = sc.phase if sc else "-"
    context["quay_fault_write"] = write
    point = f"{phase}:before:{write}"
    f = _match(point, sc)
    if f is not None:
        _fire(f, point, sc, params, _Call(model, exceptions))


def _after(http_response: Any, context: dict[str, Any], **_: Any) -> None:
    write = context.get("quay_fault_write")
    if not write or not _active() or getattr(http_response, "status_code", 500) >= 300:
        return
    sc = _current()
    point = f"{sc.phase if sc else '-'}:after:{write}"
    f = _match(point, sc)
    if f is not None:
        _fire(f, point, sc)


def instrument(client: Any) -> Any:
    """Hook a boto3 client's writes (no-op unless ``QUAY_FAULTS_ENABLED=1``). Returns the client."""
    if enabled():
        service_id = client.meta.service_model.service_id.hyphenize()
        before = functools.partial(_before, exceptions=client.exceptions)
        client.meta.events.register(f"provide-client-params.{service_id}", before, unique_id="quay-faults-before")
        client.meta.events.register(f"after-call.{service_id}", _after, unique_id="quay-faults-after")
    return client


#: The fault points' hooks (:mod:`quayutec.seams`): installed by whoever builds a stack to inject
#: into (:class:`quaylab.chaos.ChaosLab`); inert even then unless the environment switch is on
#: and a plan or a trace is armed (``instrument`` and ``subphase`` check).
INSTRUMENTS = seams.Instruments("faults", client=instrument, part=subphase)
