"""Counted figures of a plain run on the local stack (design §10): AWS calls, writes, Step
Functions transitions and Lambda invocations, from the call recorder (:mod:`quaylocal.calls`,
the same hook the IAM check uses) and the execution history. Counts, not timings: a test pins
them, ``make bench`` prints them.

A plain run: one wake (a person's message @mentioning an agent), one model request, the reply
posted, no action. The person's post itself (the API's write) is not part of the run; the stream
dispatch and wake consumer invocations it causes are. Event source polling (stream reads, SQS
receive/delete, queue attributes) is the Lambda service's, not a call of the run.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from quaylocal import calls as C

T = TypeVar("T")

#: Calls the local pollers make for the event source mappings: not the run's.
POLLING = frozenset(
    {("dynamodb-streams", op) for op in ("DescribeStream", "GetShardIterator", "GetRecords", "ListStreams")}
    | {("sqs", op) for op in ("ReceiveMessage", "DeleteMessage", "DeleteMessageBatch", "GetQueueAttributes")}
)
#: Write API calls to the tables (a transaction is one; design §10 counts five in a plain run).
WRITES = frozenset(
    {("dynamodb", op) for op in ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")}
)


@dataclass
class RunFigures:
    aws_calls: int = 0
    writes: int = 0
    transitions: int = 0
    lambda_invocations: int = 0
    by_operation: dict[str, int] = field(default_factory=dict)
    #: The largest state payload (a state's input or output, UTF-8 bytes) the run's executions
    #: handed between states: what Step Functions' 256 KiB quota bounds (docs/design.md §2).
    state_bytes: int = 0


def of_calls(recorded: list[C.Call]) -> RunFigures:
    """Figures of the calls recorded during one run (set-up and polling left out)."""
    out = RunFigures()
    for call in recorded:
        if call.owner in (None, C.SETUP) or (call.service, call.operation) in POLLING:
            continue
        if call.owner.startswith("local:"):
            if call.service == "lambda":  # an event source / API Gateway invocation of a function
                out.lambda_invocations += 1
            continue
        if call.owner == C.STATE_MACHINE and call.service == "lambda":
            out.lambda_invocations += 1  # a Lambda task: the state machine's, not a function's call
            continue
        out.aws_calls += 1
        out.writes += (call.service, call.operation) in WRITES
        key = f"{call.service}.{call.operation}"
        out.by_operation[key] = out.by_operation.get(key, 0) + 1
    return out


def _history(stack: Any, execution_arn: str) -> list[dict[str, Any]]:
    sfn = stack.client("stepfunctions")
    return sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]


def transitions(stack: Any, execution_arn: str) -> int:
    """States entered by one execution (Step Functions Standard bills state transitions)."""
    return sum(1 for e in _history(stack, execution_arn) if e["type"].endswith("StateEntered"))


def largest_state_bytes(stack: Any, execution_arn: str) -> int:
    """The largest state input or output of one execution, in UTF-8 bytes (its history's
    ``stateEnteredEventDetails.input`` and ``stateExitedEventDetails.output``)."""
    sizes = [0]
    for e in _history(stack, execution_arn):
        for details, field_name in (("stateEnteredEventDetails", "input"), ("stateExitedEventDetails", "output")):
            text = (e.get(details) or {}).get(field_name)
            if isinstance(text, str):
                sizes.append(len(text.encode()))
    return max(sizes)


def plain_runs(
    stack: Any, server: Any, n: int, agent: str = "a1", room: str = "r1", actions: list[dict[str, Any]] | None = None
) -> list[RunFigures]:
    """Play ``n`` plain runs one after another (each waits for quiet) and count each one.
    Needs the recorder installed (:func:`quaylocal.calls.install`) and a room with ``agent``
    (tests/run/runhelpers.make_room). ``actions``: what each reply declares (none: a plain run;
    with an allowed action: a run with actions, counted the same way)."""
    from quayutec import deps as quay_deps
    from quayutec.logic.room_service import RoomService
    from quayutec.models import Author

    recorder = C.RECORDER
    if recorder is None:
        raise RuntimeError("no call recorder installed (quaylocal.calls.install)")
    rooms = RoomService(quay_deps.default_deps().room)
    person = Author(kind="person", id="ann", company="acme")
    sfn = stack.client("stepfunctions")
    out: list[RunFigures] = []
    for i in range(n):
        server.set_script(
            agent,
            [
                {
                    "reply": {
                        "text": f"plain {i}",
                        "actions": [
                            {**a, **({"text": f"{a['text']} {i}"} if "text" in a else {})} for a in actions or []
                        ],
                    }
                }
            ],
        )
        stack.wait_quiet()
        before = len(recorder.calls)
        known = {e["executionArn"] for e in sfn.list_executions(stateMachineArn=stack.state_machine_arn)["executions"]}
        contextvars.copy_context().run(_post, rooms, room, person, f"@{agent} plain {i}")
        stack.wait_quiet()
        figures = of_calls(recorder.calls[before:])
        new = [
            e["executionArn"]
            for e in sfn.list_executions(stateMachineArn=stack.state_machine_arn)["executions"]
            if e["executionArn"] not in known
        ]
        figures.transitions = sum(transitions(stack, arn) for arn in new)
        figures.state_bytes = max([largest_state_bytes(stack, arn) for arn in new] or [0])
        out.append(figures)
    return out


def _post(rooms: Any, room: str, person: Any, text: str) -> None:
    with C.owner(C.SETUP):  # the person's post is the API's write, not the run's
        rooms.post_message(room, person, text, [])


#: The function whose calls retrieval makes (the ClaimAndRead phase ranks the passages).
RETRIEVAL_OWNER = C.function_owner("ClaimAndReadFunction")


def retrieval_reads(
    stack: Any, server: Any, room: str, agent: str = "a1", text: str = "what does the file say?"
) -> int:
    """AWS reads retrieval makes in one run of ``agent`` in ``room``, with a cold index cache (a
    cold Lambda): the calls the recorder attributes to ClaimAndReadFunction that read the room's
    index (its version pointer, ``sk = INDEX`` of the files partition — read in the run's one
    BatchGetItem, counted as a read of its own — and the files bucket's objects). Needs the
    recorder installed and ``room`` holding ``agent``."""
    from quayutec import deps as quay_deps
    from quayutec import seams
    from quayutec.dal.keys import files_pk
    from quayutec.logic import retrieval
    from quayutec.logic.room_service import RoomService
    from quayutec.models import Author

    if C.RECORDER is None:
        raise RuntimeError("no call recorder installed (quaylocal.calls.install)")
    d = quay_deps.default_deps()
    reads: list[str] = []

    def observe(service: str, operation: str, params: dict[str, Any]) -> None:
        if C.OWNER.get() != RETRIEVAL_OWNER:
            return
        keys: list[Any] = [params.get("Key")] if service == "dynamodb" else []
        for request in (params.get("RequestItems") or {}).values() if service == "dynamodb" else []:
            keys += request.get("Keys", [])  # the pointer read with the run's other keys counts too
        keys = [
            {k: v.get("S") if isinstance(v, dict) else v for k, v in key.items()}  # {"S": ...} or plain
            for key in keys
            if isinstance(key, dict)
        ]
        if (service == "s3" and params.get("Bucket") == d.files.bucket) or any(
            key.get("pk") == files_pk(room) and key.get("sk") == "INDEX" for key in keys
        ):
            reads.append(f"{service}.{operation}")

    server.set_script(agent, [{"reply": {"text": "read the files", "actions": []}}])
    stack.wait_quiet()
    retrieval.CACHE.clear()  # a cold Lambda: no index version held
    with seams.installed(seams.Instruments("retrieval reads", call=observe)):
        contextvars.copy_context().run(
            _post, RoomService(d.room), room, Author(kind="person", id="ann", company="acme"), f"@{agent} {text}"
        )
        stack.wait_quiet()
    return len(reads)


def seed_room_runs(ledger: Any, room_id: str, runs: dict[str, int], at: str = "2026-11-30T00:00:00.000000Z") -> None:
    """Write ``runs[company]`` finished run entries of ``company``'s agent ``{company}.a1`` in
    ``room_id`` straight into the ledger (as the claim writes them, then ``completed``): the
    fixture of the per-company runs page (design §14). Run ``i`` of each company starts ``i``
    seconds after ``at`` (the companies' runs interleaved)."""
    from datetime import timedelta

    from quayutec.models import RunRecord, Wake, iso, parse_iso

    with C.owner(C.SETUP):
        for company, n in runs.items():
            for i in range(n):
                agent, wake_id, run_id = f"{company}.a1", f"w-{company}-{i}", f"run-{room_id}-{company}-{i}"
                started = iso(parse_iso(at) + timedelta(seconds=i))
                wake = Wake(
                    wake_id=wake_id,
                    agent_id=agent,
                    room_id=room_id,
                    cause_kind="message",
                    cause_id=f"m-{company}-{i}",
                    hop=0,
                    chain_id=f"m-{company}-{i}",
                    by_kind="person",
                    by_company=company,
                )
                record = RunRecord(
                    run_id=run_id,
                    agent_id=agent,
                    company=company,
                    room_id=room_id,
                    wake_id=wake_id,
                    wake=wake,
                    hop=0,
                    chain_id=wake.chain_id,
                    execution_arn=f"arn:aws:states:us-east-1:123456789012:execution:sm:{run_id}",
                    status="completed",
                    started_at=started,
                    updated_at=started,
                )
                ledger.db.put_item(TableName=ledger.table, Item=ledger._run_item(record))


def counted_reads(db: Any, read: Callable[[], T]) -> tuple[T, dict[str, int]]:
    """Call ``read`` and count the queries it made through the DynamoDB client ``db``:
    ``queries`` and ``items_read`` (the responses' ``ScannedCount``: the items DynamoDB read and
    billed, before any filter)."""
    scanned: list[int] = []

    def count(parsed: dict[str, Any], **_: Any) -> None:
        scanned.append(int(parsed.get("ScannedCount", 0)))

    events = db.meta.events
    events.register("after-call.dynamodb.Query", count, unique_id="quay-counted-reads")
    try:
        with C.owner(C.SETUP):
            result = read()
    finally:
        events.unregister("after-call.dynamodb.Query", unique_id="quay-counted-reads")
    return result, {"queries": len(scanned), "items_read": sum(scanned)}


def runs_page_reads(ledger: Any, room_id: str, company: str, limit: int) -> dict[str, int]:
    """What one page of ``company``'s runs in ``room_id`` (``GET /rooms/{room}/runs``'s runs
    part: :meth:`~quayutec.dal.ledger.LedgerStore.runs_page`) reads: :func:`counted_reads`'
    figures and ``runs``, the page's length."""
    page, reads = counted_reads(ledger.db, lambda: ledger.runs_page(room_id, company, limit).parts["runs"])
    return {**reads, "runs": len(page.items)}
