"""Chaos on the local stack: "never twice, proven" (design §2.1, §6; issue 6).

A *case* is a run that posts a reply, writes a memory line, updates a task, creates a task and
holds one action (approved by the driver), with faults injected at points of its phases
(:mod:`quaylab.faults`); the runtime does what it does (Step Functions retries and catches,
the reconciler); the wake is delivered again; then a fresh message goes to the agent. The
tables then say (:meth:`ChaosLab.check`): no item written twice (by content, by key, and by the
room table's stream for items that are never rewritten), the reply at most once and under its
run-derived id, every held action requested and decided at most once, the ledger entry final
with the status design §2.1 names for the point, the ledger honest about each action ("written"
exactly when its write is in the room), no request left pending, the next run completed and saw
what the failed run wrote, each chain's counter counted exactly the runs the ledger holds of
it (design §12.1), and the agent's spend counters count each recorded model request exactly once:
its reserve until it is settled, its settled amount after (design §12.4). Chain cases
(:func:`chain_matrix`) bound the room's chains to 1 or 2 runs, so a wake is refused or a run
posts the chain's notice, and check the notices and the refused claim.

A clean case is traced alongside (the points its run passes, in order): the expected statuses
follow from it (:func:`expected_status`) and ``quay chaos --full`` builds every point from it
(:func:`full_matrix`); ``make test`` plays :func:`standard_matrix`. Cases run side by side (a
room and two agents each), in waves, each wave on a fresh local stack.

Used by ``tests/chaos`` and ``quay chaos``. Local only: nothing deployed imports it.
"""

from __future__ import annotations

import hashlib
import json
import time
import traceback
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from moto.awslambda.models import LambdaFunction

from quaylab import faults
from quaylocal.provider_server import ProviderServer
from quaylocal.stack import LocalStack, install_seams
from quayutec import deps as quay_deps
from quayutec import resources as r
from quayutec.dal.keys import KEY_ATTRS, budget_key, chain_key
from quayutec.logic import budgets
from quayutec.logic.access import OPERATOR, Caller
from quayutec.logic.approvals import decide_approval
from quayutec.logic.ids import (
    action_write_id,
    agent_name,
    chain_notice_id,
    execution_name,
    new_room_id,
    reply_message_id,
    run_wake_id,
)
from quayutec.logic.phases.spend import settlement
from quayutec.logic.room_service import RoomService
from quayutec.logic.services import Services
from quayutec.logic.stops import Stops
from quayutec.models import (
    DEFAULT_MAX_RUNS_PER_CHAIN,
    FINAL_STATUSES,
    Author,
    RightsPolicy,
    Task,
    TaskEvent,
    Wake,
)

CHAOS_SETTINGS = {faults.ENV_VAR: "1", "TURN_RECHECK_SECONDS": "1"}
PROVIDER_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL", "bedrock": "BEDROCK_ENDPOINT_URL"}
ANN = Author(kind="person", id="ann", company="acme")
BOB = Author(kind="person", id="bob", company="bolt")
NO_RUN = "no run"  # the expected "status" when the claim never landed: nothing was claimed

#: The writes that decide the expected final status (see :func:`expected_status`).
# the claim, its ledger entry, its chain's count, the agent not paused
CLAIM_TX = "claim:before:tx claims:CLAIM+ledger:RUN+ledger:CHAIN+room:META"
CLAIM_WRITE = CLAIM_TX.replace(":before:", ":after:")
#: A run's stop guard in each of its guarded writes' transactions (design §12.2): the chain not
#: stopped, the agent not paused, the agent still placed in the room (its link item).
GUARD = "+ledger:CHAIN+room:META+room:AGENT"
#: A model request's counts in its company's spend counters, day and month (design §12.4): its
#: reserve, with its record; its settlement, with its outcome.
SPEND = "+ledger:D+ledger:M"
#: The request's record (under the stop guard, with its reserve) and its outcome (the reply, the
#: settlement).
REQUEST_WRITE = f"call_model:after:tx ledger:REQ{GUARD}{SPEND}"
OUTCOME_WRITE = f"call_model:after:tx ledger:REQ{SPEND}"
REPLY_WRITE = f"post_reply:after:tx room:MSG{GUARD}"
FINISH_WRITE = "finish:after:update ledger:RUN"
#: A plain reply's end (Point.plain): the reply, its hop-limit notice and the run's final write.
PLAIN_END_WRITE = f"post_reply:after:tx room:MSG+room:MSG+ledger:RUN{GUARD}"
#: A wake its chain refuses (design §12.1): the chain's notice, then the wake claimed as not started.
REFUSAL_WRITE = "claim:after:tx claims:CLAIM+ledger:NOT_STARTED"
CLAIM_NOTICE_WRITE = "claim:after:put room:MSG"
#: A held action's approval request, and a memory line an action writes (each under the guard).
APPROVAL_WRITE = f"request_approval:after:tx room:APPROVAL{GUARD}"
MEMORY_WRITE = f"apply_actions:after:tx room:MEM{GUARD}"
#: The room item's mark of a memory partition, written before the partition's first line.
MEMORY_MARK = "apply_actions:after:update room:META"
#: A run that took its chain's last run and @mentions another agent: the chain's notice, after the
#: reply (a plain reply's transaction; with actions the reply's own transaction).
REPLY_NOTICE_WRITE = "post_reply:after:put room:MSG"
# Fair turns (design §12.3): the company's turn taken right after the claim; given back when the
# run parks on its approval, or after a plain run's final write; a run put in line (WaitForTurn);
# a turn handed to the oldest run in line by the run that ends.
TURN_TAKE_WRITE = "turn:after:tx ledger:TURNS+ledger:HOLD"
TURN_PARK_WRITE = "request_approval:after:tx ledger:HOLD+ledger:TURNS"
TURN_END_WRITE = "post_reply:after:tx ledger:HOLD+ledger:TURNS"
TURN_WAIT_WRITE = "wait_for_turn:after:tx ledger:WAIT+ledger:TURNS+ledger:RUN"
TURN_HANDOFF_WRITE = "post_reply:after:tx ledger:HOLD+ledger:HOLD+ledger:WAIT+ledger:TURNS"
#: The lab's own turns: its matrix companies never wait (a run's points stay those of the clean
#: run); the turn cases' company has one turn, and its waiting runs look again every second.
LAB_MAX_CONCURRENT_RUNS = 1000
TURN_COMPANY = "turnco"
#: The cases :func:`play_turn_cases` plays (one point each), after the matrix.
TURN_CASES = 3


def claim_retries(asl: dict[str, Any] | None = None) -> int:
    """How often the state machine retries ClaimAndRead after a TransientError (its Retry's
    ``MaxAttempts``: retries, not attempts; ``asl``: the definition, else the local stack's)."""
    from quaylocal.stack import ASL_PATH

    definition = asl if asl is not None else json.loads(ASL_PATH.read_text())
    for retrier in definition["States"]["ClaimAndRead"].get("Retry", []):
        if "TransientError" in retrier["ErrorEquals"]:
            return int(retrier.get("MaxAttempts", 3))
    return 0


# ----------------------------------------------------------------------------- the seam
def _error_shape(exc: BaseException, error_type: str | None = None) -> tuple[str, bool, str]:
    return (
        json.dumps(
            {
                "errorMessage": str(exc),
                "errorType": error_type or type(exc).__name__,
                "stackTrace": traceback.format_exception(exc),
            }
        ),
        True,
        "",
    )


def install_chaos_seam() -> None:
    """Wrap the local stack's in-process Lambda seam: each invocation runs in a fault scope
    (phase = handler module, run id and execution from the event), with the ``{phase}:start`` /
    ``{phase}:end`` points around it. :class:`faults.LambdaDied` at ``end`` is reported as the
    Lambda service reports a function that died: ``errorType`` ``Lambda.Unknown``. Inert while
    ``QUAY_FAULTS_ENABLED`` is off. Idempotent."""
    install_seams()
    inner = LambdaFunction._invoke_lambda
    if getattr(inner, "_quay_chaos", False):
        return

    def chaos_invoke(self: LambdaFunction, event: Any = None) -> tuple[str, bool, str]:
        if not faults.enabled():
            return inner(self, event)
        if isinstance(event, (bytes, str)):
            event = json.loads(event or "{}")
        ev = event if isinstance(event, dict) else {}
        if self.handler is None:
            raise ValueError(f"{self.function_name} has no Handler")
        phase = self.handler.rsplit(".", 2)[-2]
        run_id = ev.get("run_id") if isinstance(ev.get("run_id"), str) else None
        with faults.scope(phase, run_id, ev.get("execution_arn")):
            try:
                faults.boundary("start")
            except Exception as exc:  # noqa: BLE001 - reported as the runtime does
                return _error_shape(exc)
            result = inner(self, event)
            if result[1]:
                # A merged phase's part that died at its own end (faults.subphase): reported as
                # the Lambda service reports a function that died.
                try:
                    payload = json.loads(result[0])
                except (TypeError, ValueError):
                    return result
                if isinstance(payload, dict) and payload.get("errorType") == faults.LambdaDied.__name__:
                    return json.dumps({**payload, "errorType": "Lambda.Unknown"}), True, result[2]
                return result
            try:
                faults.boundary("end")
            except faults.LambdaDied as exc:
                return _error_shape(exc, "Lambda.Unknown")
            except Exception as exc:  # noqa: BLE001
                return _error_shape(exc)
            return result

    chaos_invoke._quay_chaos = True  # type: ignore[attr-defined]
    LambdaFunction._invoke_lambda = chaos_invoke  # type: ignore[method-assign]


# ----------------------------------------------------------------------------- points
@dataclass(frozen=True)
class Point:
    """One case of the matrix: ``kind`` at ``at``, plus ``also``: more faults in the same case
    (e.g. a crash inside RecordFailure too). ``expect``: the final status, else derived from
    the traced clean run (:func:`expected_status`). ``run_scoped=False``: the faults hit whatever
    passes first (stream and queue points; such a case plays alone, with a busy stream batch).
    ``wakes``: the room keeps the default hop limit, so the run's writes wake the other agent
    (an outbox item); otherwise the room's hop limit is 0 and a notice says so (one run less).
    ``plain``: the reply declares no action and @mentions the other agent (past the hop limit: a
    notice), so the run ends in DecideAndPost with one transaction (reply, notice, final write).
    ``times``: how often the first fault fires (a ``conflict`` met again by each retry), after
    letting its point pass ``skip`` times.

    A chain case (``max_runs``: the room's ``max_runs_per_chain``, design §12.1) keeps the default
    hop limit and its reply also @mentions the other agent. With 1 the run takes the chain's only
    run: its writes wake no one and its reply posts the chain's notice first. With 2 the mention
    takes the last run and the task the reply creates for the other agent wakes it again, after
    the held action is approved: that wake is refused (claimed ``not_started``) and posts the
    notice. ``on="refused"``: the faults hit the refused wake's execution, not the case's run.
    ``notices``: the chain notices the room must hold (default: 1 in a chain case, else 0);
    ``refusal``: what the refused wake's claim item records (``None``: no claim item at all)."""

    at: str
    kind: str
    expect: str | None = None
    also: tuple[tuple[str, str], ...] = ()
    arg: float = 0.0
    run_scoped: bool = True
    wakes: bool = False
    plain: bool = False
    times: int = 1
    skip: int = 0
    max_runs: int | None = None
    on: str = "run"
    notices: int | None = None
    refusal: str | None = "chain_full"
    #: what a person does about the run's parked approval: ``approve`` it, or ``pause`` the
    #: agent or ``stop_chain`` instead (design §12.2: the stop path ends the parked run)
    on_parked: str = "approve"
    #: the room items the run must hold at the end (a stop case: what landed before the stop)
    writes: int | None = None

    @property
    def name(self) -> str:
        extra = "".join(f" + {k}@{p}" for p, k in self.also)
        times = f" x{self.times}" if self.times > 1 else ""
        skip = f" after {self.skip}" if self.skip else ""
        chain = f" [chain of {self.max_runs}{', the refused wake' if self.on == 'refused' else ''}]"
        parked = f" [{self.on_parked} while parked]" if self.on_parked != "approve" else ""
        return f"{self.kind}@{self.at}{times}{skip}{chain if self.max_runs else ''}{parked}{extra}"

    @property
    def pauses(self) -> bool:
        """The case pauses its agent (a fault or at its parked approval): the lab resumes it
        before the next message."""
        return self.kind == "pause" or any(k == "pause" for _p, k in self.also) or self.on_parked == "pause"

    @property
    def refuses(self) -> bool:
        """The case's chain refuses a wake (see the class docstring)."""
        return self.max_runs == 2 and not self.plain

    @property
    def chain_notices(self) -> int:
        return self.notices if self.notices is not None else (1 if self.max_runs else 0)

    @property
    def count(self) -> int:
        return 1 + len(self.also)


#: The part a merged invocation runs after another (design §2: ClaimAndRead, DecideAndPost,
#: ApplyAndFinish).
RUNS_ON = {"claim": "load_context", "decide_rights": "post_reply", "apply_actions": "finish"}


def _landed(trace: list[str], at: str, kind: str = "") -> set[str]:
    """The writes landed when the fault at ``at`` fires (its own write too, for after/end). A
    StopExecution does not stop a running Lambda: stopped at the end of a merged invocation's
    first part, the invocation runs its next part too, whose writes land."""
    k = trace.index(at)
    then = RUNS_ON.get(at.removesuffix(":end")) if kind == "stop" and at.endswith(":end") else None
    if then is not None and f"{then}:end" in trace[k:]:
        k = trace.index(f"{then}:end", k)
        at = trace[k]
    done = set(trace[:k])
    if ":before:" not in at and not at.endswith(":start"):
        done.add(at)
    return done


def expected_status(trace: list[str], at: str, kind: str) -> str:
    """Design §2 for a fault at ``at``: a ``die`` is retried and the run completes; a crash (or a
    StopExecution) ends the run — nothing claimed before the claim landed, ``completed`` once
    Finish landed, else ``failed_after_reply`` when the reply is in the room, else
    ``failed_before_reply``."""
    if kind in ("die", "die_end"):
        return "completed"
    done = _landed(trace, at, kind)
    if CLAIM_WRITE not in done:
        return NO_RUN
    if FINISH_WRITE in done:
        return "completed"
    if REPLY_WRITE in done:
        return "failed_after_reply"
    return "failed_before_reply"


def _die(at: str) -> tuple[str, str]:
    return (at, "die_end" if at.endswith(":end") else "die")


def standard_matrix() -> list[Point]:
    """The matrix ``make test`` plays; ``quay chaos --full`` plays every point alone.

    A case has one fault that ends the run (a crash or a StopExecution), or none; a death is
    retried and leaves the outcome as it was, so deaths in *earlier* phases ride along in the
    cases (one per phase and case, but for two in sequence in ApplyActions) and in three cases
    that only die; RecordFailure's own faults ride along too (a death there is retried; a crash
    there leaves the run to the reconciler, which must reach the same status). Each case is a
    full run with a held action, a redelivered wake and a next run, about 2 s of CPU on moto,
    and this keeps the matrix around a minute. The expected statuses come from the traced clean
    run (a point the run does not pass is reported as never fired), but for the cases of
    :func:`chain_matrix`, which say theirs."""

    def case(at: str, kind: str, *dies: str, expect: str | None = None, wakes: bool = False) -> Point:
        return Point(at, kind, expect, also=tuple(_die(d) for d in dies), wakes=wakes)

    def plain(at: str, kind: str, expect: str, *dies: str) -> Point:
        return Point(at, kind, expect, also=tuple(_die(d) for d in dies), plain=True)

    claim_w, ctx_w = (
        "claim:after:tx claims:CLAIM+ledger:RUN+ledger:CHAIN+room:META",
        "load_context:after:s3put s3:context",
    )
    # the request's record (under the stop guard), then its outcome with the reply
    req_w, reply_w = REQUEST_WRITE, OUTCOME_WRITE
    return [
        case(
            "claim:before:tx claims:CLAIM+ledger:RUN+ledger:CHAIN+room:META", "crash"
        ),  # nothing claimed: no run at all
        case(claim_w, "crash"),
        case(ctx_w, "crash", claim_w),  # the claim retried: its own
        case(req_w, "crash", "load_context:end"),  # recorded, never sent
        # sent and answered, its outcome and settlement not written: the reserve stays counted
        case(reply_w.replace(":after:", ":before:"), "crash", ctx_w),
        case(reply_w, "crash", "claim:end"),
        case("decide_rights:after:put ledger:ACT#2", "crash", req_w),  # retried: request 1 is lost
        case(
            REPLY_WRITE.replace(":after:", ":before:"),
            "crash",
            OUTCOME_WRITE.replace(":after:", ":before:"),
            "decide_rights:after:put ledger:ACT#2",
        ),  # answer lost
        case("post_reply:end", "stop", "call_model:end", "decide_rights:end"),  # the reply reused
        case(REPLY_WRITE, "crash", "decide_rights:after:put ledger:ACT", "record_failure:after:update ledger:RUN"),
        case(APPROVAL_WRITE, "crash", REPLY_WRITE),  # still one reply
        case("request_approval:end", "stop", "post_reply:end"),  # parked, then stopped
        # RecordFailure crashes too: the execution fails outside any Catch, the reconciler closes
        Point(
            "apply_actions:before:update ledger:RUN",
            "crash",
            also=(_die(APPROVAL_WRITE), ("record_failure:start", "crash")),
        ),
        case(MEMORY_WRITE, "crash", "request_approval:end"),  # written, unrecorded
        case(MEMORY_MARK, "crash", ctx_w),  # the partition marked, its line not written yet
        case(
            f"apply_actions:after:tx room:TEV+room:TASK{GUARD}#2",
            "crash",  # the approved close landed
            "post_reply:end",
            "request_approval:after:update ledger:RUN",
        ),
        case("finish:before:update ledger:RUN", "crash", MEMORY_WRITE, ctx_w),
        case(
            "finish:after:update ledger:RUN",
            "crash",  # already completed
            f"apply_actions:after:tx room:TASK+room:TEV{GUARD}",
            "decide_rights:after:put ledger:ACT#3",
        ),
        # deaths only
        case(
            "apply_actions:after:put room:MSG",
            "die",
            "finish:after:update ledger:RUN",  # the notice: once
            OUTCOME_WRITE,
            REPLY_WRITE.replace(":after:", ":before:"),
        ),
        case(
            "apply_actions:after:update ledger:ACT",
            "die",
            f"apply_actions:after:tx room:TEV+room:TASK{GUARD}",
            "finish:end",
            APPROVAL_WRITE.replace(":after:", ":before:"),
        ),
        case(f"apply_actions:after:tx room:OUTBOX{GUARD}", "die", "apply_actions:end", wakes=True),  # the wakes: once
        # a plain reply: the reply, its notice and the final write land in one transaction
        plain(PLAIN_END_WRITE.replace(":after:", ":before:"), "crash", "failed_before_reply", "call_model:end"),
        plain(PLAIN_END_WRITE, "crash", "completed", PLAIN_END_WRITE.replace(":after:", ":before:")),
        plain(PLAIN_END_WRITE, "die", "completed", OUTCOME_WRITE),  # all landed: once
        plain("post_reply:end", "stop", "completed", "claim:end"),
        # fair turns (design §12.3): a crash holding the turn (RecordFailure, or the reconciler,
        # gives it back), a step retried after it (its own turn), a crash after the park gave it
        # back, a crash after a plain run's final write before it gave it back, and a death after
        case(TURN_TAKE_WRITE, "crash", expect="failed_before_reply"),
        Point(TURN_TAKE_WRITE, "crash", "failed_before_reply", also=(("record_failure:start", "crash"),)),
        case(TURN_TAKE_WRITE, "die", "load_context:end"),
        case(TURN_PARK_WRITE, "crash", REPLY_WRITE),
        plain(TURN_END_WRITE.replace(":after:", ":before:"), "crash", "completed"),
        plain(TURN_END_WRITE, "die", "completed", "claim:end"),
        *chain_matrix(),
        *stop_matrix(),
        # the wake paths: a stream batch whose first wake is sent 5 times and whose second record's
        # processing is dropped (the batch is retried from it), read by a wake consumer that dies
        # after starting the execution (the batch comes back)
        Point(
            "wake_relay:before:send sqs:wakes",
            "dup",
            "completed",
            arg=5,
            run_scoped=False,
            wakes=True,
            also=(("wake_relay:before:send sqs:wakes#2", "drop"), ("wake_consumer:end", "die_end")),
        ),
    ]


def chain_matrix() -> list[Point]:
    """The claim's transaction under conflicts, and the writes around a chain's bound (design §12.1).

    A hot chain counter makes DynamoDB cancel the claim with ``TransactionConflict``: a
    TransientError, retried :func:`claim_retries` times. Met that often, the last retry lands and
    the run completes; once more, nothing was ever claimed (no run, nothing counted). A claim that
    landed before its retries met the conflict stays claimed: one conflict fewer and the retry
    finds its own claim (completed), as many and RecordFailure ends it ``failed_before_reply``.
    The check finds each chain's counter equal to its ledger entries, so no cancelled attempt
    counted.

    Chains of 2 (:class:`Point`): crashes and deaths at the refused wake's claim, its chain's
    notice and its refusal put (the notice first: a crash between them leaves the notice and an
    unclaimed wake whose execution is gone, never a refusal without its notice); chains of 1: at
    the chain's notice a run posts after its reply (and again, refused by its condition, in its
    actions). A crash between the reply and the notice leaves the chain without its notice
    (``notices=0``): no wake of the full chain was sent, so nothing writes it later."""
    n = claim_retries()
    conflict = [
        Point(CLAIM_TX, "conflict", "completed", arg=2, times=n),  # the last retry lands
        Point(CLAIM_TX, "conflict", NO_RUN, arg=2, times=n + 1),  # out of retries: nothing claimed
        # landed, then the step died: the retries meet the conflict, the last finds its own claim
        Point(CLAIM_TX, "conflict", "completed", arg=2, times=n - 1, skip=1, also=(_die(CLAIM_WRITE),)),
        Point(CLAIM_TX, "conflict", "failed_before_reply", arg=2, times=n, skip=1, also=(_die(CLAIM_WRITE),)),
    ]

    def refused(
        at: str, kind: str, *also: tuple[str, str], notices: int = 1, refusal: str | None = "chain_full"
    ) -> Point:
        arg = 2 if kind == "conflict" else 0  # entry 2, the chain's counter: the transaction's hot item
        return Point(
            at, kind, "completed", also=also, arg=arg, max_runs=2, on="refused", notices=notices, refusal=refusal
        )

    def full(at: str, kind: str, expect: str, *dies: str, plain: bool = True, notices: int = 1) -> Point:
        return Point(at, kind, expect, also=tuple(_die(d) for d in dies), plain=plain, max_runs=1, notices=notices)

    refusal_before, notice_before = (w.replace(":after:", ":before:") for w in (REFUSAL_WRITE, CLAIM_NOTICE_WRITE))
    reply_notice_before = REPLY_NOTICE_WRITE.replace(":after:", ":before:")
    plain_end = f"post_reply:after:tx room:MSG+ledger:RUN{GUARD}"  # the chain is full: no hop-limit notice
    return [
        *conflict,
        # the refused wake (chain of 2): its chain's notice first, then the refusal recorded
        refused(notice_before, "crash", _die(CLAIM_TX), notices=0, refusal=None),  # nothing claimed
        refused(CLAIM_NOTICE_WRITE, "crash", _die(notice_before), refusal=None),  # the notice alone
        refused(refusal_before, "crash", _die(CLAIM_NOTICE_WRITE), refusal=None),
        refused(REFUSAL_WRITE, "crash", _die(refusal_before)),  # notice and refusal
        refused("claim:end", "stop", _die(REFUSAL_WRITE)),  # retried: refused again, the notice once
        refused(CLAIM_TX, "conflict", ("claim:end", "die_end")),  # refused after a conflict, then again
        # the chain's last run (chain of 1): its reply first, then the chain's notice
        full(plain_end.replace(":after:", ":before:"), "crash", "failed_before_reply", "call_model:end", notices=0),
        full(plain_end, "die", "completed", "call_model:end"),  # retried: the reply found, the notice posted
        full(plain_end, "crash", "completed", notices=0),  # the reply and final write landed: no notice
        full(reply_notice_before, "crash", "completed", plain_end, notices=0),
        full(REPLY_NOTICE_WRITE, "crash", "completed", reply_notice_before),  # the notice stays
        full("post_reply:after:put room:MSG", "crash", "failed_after_reply", REPLY_WRITE, plain=False),
        full("apply_actions:before:put room:MSG", "crash", "failed_after_reply", "post_reply:end", plain=False),
    ]


def stop_matrix() -> list[Point]:
    """A person pauses the agent or stops the chain while the run is at each guarded write
    (design §12.2): the stop intent lands first, the guarded write (or the next one) is refused,
    and the run ends ``stopped`` with nothing written after the point: no reply past the reply
    point, no approval request, no action past the one that landed. A parked run is ended
    through SendTaskFailure(RunStopped). Deaths at the guarded writes ride along: a retried
    step finds its own write (never refused twice), then meets the guard. The lab resumes a
    paused agent before the case's next message, which runs as usual."""
    req_before = REQUEST_WRITE.replace(":after:", ":before:")
    reply_before = REPLY_WRITE.replace(":after:", ":before:")
    task_write = f"apply_actions:after:tx room:TEV+room:TASK{GUARD}"
    return [
        Point(req_before, "pause", "stopped", also=(_die("load_context:end"),), writes=0),  # no request sent
        Point(req_before.replace(":before:", ":after:"), "pause", "stopped", writes=0),  # paid, not posted
        Point(reply_before, "stop_chain", "stopped", also=(_die("decide_rights:end"),), writes=0),
        Point(REPLY_WRITE, "pause", "stopped", also=(_die("post_reply:end"),), writes=1),  # no approval asked
        # parked: SendTaskFailure(RunStopped); the reply and the approval request stay
        Point("request_approval:end", "die_end", "stopped", on_parked="pause", writes=2),
        Point("post_reply:end", "die_end", "stopped", on_parked="stop_chain", writes=2),
        # one action landed; the retried step finds it written, then meets the guard
        Point(MEMORY_WRITE, "pause", "stopped", also=(_die("apply_actions:after:update ledger:ACT"),), writes=3),
        Point(task_write, "stop_chain", "stopped", writes=4),
        Point("apply_actions:start", "pause", "stopped", also=(_die("request_approval:end"),), writes=2),
        Point(PLAIN_END_WRITE.replace(":after:", ":before:"), "pause", "stopped", plain=True, writes=0),
        Point(PLAIN_END_WRITE, "pause", "completed", plain=True, writes=2),  # all landed before the pause
    ]


def full_matrix(trace: list[str]) -> list[Point]:
    """Every point of a traced clean run alone: a crash and a death (retried) before and after
    each write of each phase, a death at each phase's end (``Lambda.Unknown``), StopExecution at
    each phase's end; plus the RecordFailure and wake-path cases of :func:`standard_matrix`."""
    points: list[Point] = []
    for at in trace:
        if ":before:" in at or ":after:" in at:
            points += [Point(at, "crash"), Point(at, "die")]
        elif at.endswith(":end"):
            points += [Point(at, "die_end"), Point(at, "stop")]
        if ":before:tx " in at:  # a transaction cancelled by a conflict: retried, as a death before it
            points.append(Point(at, "conflict", "completed", arg=2))
    return [
        *points,
        Point(REPLY_WRITE, "crash", also=(("record_failure:start", "crash"),)),
        Point("decide_rights:start", "crash", also=(("record_failure:after:update ledger:RUN", "die"),)),
        *chain_matrix(),
        *[p for p in standard_matrix() if not p.run_scoped],
    ]


# ----------------------------------------------------------------------------- the lab
def matrix_reply(case: Case) -> dict[str, Any]:
    """The reply of a matrix case: memory, a task update, a new task, one held close."""
    return {
        "reply": {
            "text": f"Plan for {case.room}: agreed.",
            "actions": [
                {"kind": "remember", "text": f"Launch in {case.room} on Friday.", "visibility": "room"},
                {"kind": "update_task", "task": case.t1, "note": "Half done."},
                {
                    "kind": "create_task",
                    "to": case.b,
                    "title": "Check the draft",
                    "body": f"Check {case.room}'s draft.",
                },
                {"kind": "close_task", "task": case.t2, "result": "Closed by the agent."},  # held: acme asks
            ],
        }
    }


def chain_reply(case: Case) -> dict[str, Any]:
    """The reply of a chain case that is not plain: the matrix reply, @mentioning the other agent
    too (so that agent is woken twice in the chain: by the reply, then by the task it gets)."""
    reply = matrix_reply(case)
    reply["reply"]["text"] = f"Plan for {case.room}: agreed, @{case.b} please check it."
    return reply


def plain_reply(case: Case) -> dict[str, Any]:
    """The reply of a plain case: no action, an @mention of the other agent (a notice: the case's
    room has hop limit 0)."""
    return {"reply": {"text": f"Plan for {case.room}: agreed, @{case.b} will see it.", "actions": []}}


def _case_key(n: int) -> str:
    """The Idempotency-Key case ``n``'s room is created with (so its id is known before)."""
    return f"chaos-case-{n}"


def case_room_id(n: int) -> str:
    """The id of case ``n``'s room: the service's, from :func:`_case_key`."""
    return new_room_id(_case_key(n))


@dataclass
class Case:
    n: int
    point: Point | None
    room: str = ""
    a: str = ""
    b: str = ""
    t1: str = ""
    t2: str = ""
    wake: Wake | None = None
    run_id: str = ""
    next_run_id: str = ""
    #: a chain case that refuses a wake: the other agent's wake by the run's actions, its run id
    refused_wake_id: str = ""
    refused_run_id: str = ""
    approvals_given: int = 0
    faults: list[faults.Fault] = field(default_factory=list)
    result: CaseResult | None = None

    def __post_init__(self) -> None:
        # ids as the API gives them: {company}.{name} agents, a room id of the service's
        self.room, self.a, self.b = case_room_id(self.n), f"acme.a-{self.n}", f"bolt.b-{self.n}"
        self.t1, self.t2 = f"task-{self.n}-1", f"task-{self.n}-2"


@dataclass
class CaseResult:
    point: str
    expect: str
    status: str
    writes: int
    duplicates: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    fired: int = 0
    faults: int = 0
    next_status: str = ""

    @property
    def ok(self) -> bool:
        return not self.duplicates and not self.problems


@dataclass
class Report:
    cases: list[CaseResult]
    seconds: float
    non_final: list[str]
    stack_errors: list[str]
    runs: int = 0
    #: Fair turns (design §12.3): turns no lease expiry frees, counters that disagree with their
    #: items, runs left in a line (:func:`turn_problems`)
    turns_held: list[str] = field(default_factory=list)
    #: turns of ended runs still held when the wave ended: each freed once its lease expires
    turns_until_expiry: int = 0

    @property
    def duplicates(self) -> int:
        return sum(len(c.duplicates) for c in self.cases)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.cases) and not self.non_final and not self.stack_errors and not self.turns_held


class ChaosLab:
    """A local stack with fault injection switched on, a provider server and two companies:
    acme (person ann; its policy holds ``close_task`` for approval) and bolt (person bob).
    Each case gets its own room and agents (``a-N`` of acme on anthropic, ``b-N`` of bolt on
    openai), so cases run side by side."""

    def __init__(
        self, settings: dict[str, str] | None = None, time_scale: float | None = 0.01, quiet_timeout_s: float = 60.0
    ) -> None:
        self.server = ProviderServer(scripts={}, keys={})
        self.settings = settings or {}
        self.time_scale = time_scale
        self.quiet_timeout_s = quiet_timeout_s
        self.stack: LocalStack | None = None
        self.keys = {"acme": "sk-acme-chaos", "bolt": "sk-bolt-chaos"}
        self.cases_made = 0

    def __enter__(self) -> ChaosLab:
        self.server.start()
        env = {v: self.server.base_url(p) for p, v in PROVIDER_ENV.items()}
        self.stack = LocalStack(
            settings={**env, **CHAOS_SETTINGS, **self.settings},
            time_scale=self.time_scale,
            instruments=[faults.INSTRUMENTS],  # the fault points, through the deployed code's seam
        )
        try:
            self.stack.start()
            install_chaos_seam()
            d = self.deps
            companies = Services(d).companies  # as the API creates them
            companies.create(
                OPERATOR,
                "acme",
                ["ann"],
                RightsPolicy(actions={"close_task": "ask"}),
                max_concurrent_runs=LAB_MAX_CONCURRENT_RUNS,
            )
            companies.create(OPERATOR, "bolt", ["bob"], max_concurrent_runs=LAB_MAX_CONCURRENT_RUNS)
            sm = self.stack.client("secretsmanager")
            sm.create_secret(
                Name=quay_deps.secret_name(d.settings, "acme", "anthropic"), SecretString=self.keys["acme"]
            )
            sm.create_secret(Name=quay_deps.secret_name(d.settings, "bolt", "openai"), SecretString=self.keys["bolt"])
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        faults.disarm()
        try:
            if self.stack is not None and hasattr(self.stack, "state_machine_arn"):
                self.stack.stop()
            elif self.stack is not None:  # it failed while starting: let moto go
                self.stack._mock.stop()
        finally:
            self.server.stop()

    @property
    def deps(self) -> quay_deps.Deps:
        return quay_deps.default_deps()

    @property
    def rooms(self) -> RoomService:
        return RoomService(self.deps.room)

    # ------------------------------------------------------------------ building blocks
    def new_case(self, point: Point | None, *, hop_limit: int | None = None) -> Case:
        """A case's room, agents and tasks, set up through the domain services. ``hop_limit``:
        the room's, when given (else none for a case of wakes, 0 for the others)."""
        self.cases_made += 1
        case = Case(self.cases_made, point)
        d = self.deps
        svc = Services(d)  # agents and the room as the API registers and creates them
        ann, bob = Caller(company="acme", member="ann"), Caller(company="bolt", member="bob")
        for who, agent, provider, model in (
            (ann, case.a, "anthropic", "claude-test"),
            (bob, case.b, "openai", "gpt-test"),
        ):
            svc.agents.register(who, name=agent_name(agent), provider=provider, model=model, instructions="Be brief.")
        self.server.keys.update({case.a: self.keys["acme"], case.b: self.keys["bolt"]})
        bound = point.max_runs if point is not None else None
        wakes = point is not None and (point.wakes or bound is not None)
        room = svc.rooms.create(
            ann,
            name=f"case {case.n}",
            members=["bolt"],
            hop_limit=hop_limit if hop_limit is not None else (None if wakes else 0),
            max_runs_per_chain=bound or DEFAULT_MAX_RUNS_PER_CHAIN,
            idempotency_key=_case_key(case.n),
        ).room
        assert room.id == case.room, (room.id, case.room)
        if "bolt" in room.invited:  # bolt is invited (design §5): bob accepts, as POST …/invitations/accept does
            svc.rooms.accept(bob, case.room)
        svc.rooms.place_agent(ann, case.room, case.a)
        svc.rooms.place_agent(bob, case.room, case.b)
        for tid, title in ((case.t1, "Draft the plan"), (case.t2, "Book the hall")):
            now = _now()
            d.room.create_task(
                Task(
                    id=tid,
                    room_id=case.room,
                    title=title,
                    body=title + ".",
                    to=case.a,
                    created_by=BOB,
                    created_at=now,
                    updated_at=now,
                ),
                TaskEvent(
                    id=f"tev-{tid}-created",
                    room_id=case.room,
                    task_id=tid,
                    kind="created",
                    text=title,
                    by=BOB,
                    created_at=now,
                ),
            )  # no wakes: set-up only
        if point is not None and point.plain:
            reply = plain_reply(case)
        else:
            reply = chain_reply(case) if bound is not None else matrix_reply(case)
        self.server.set_script(case.a, [reply] * 3)
        return case

    def post(self, case: Case, text: str, key: str) -> tuple[Wake, str]:
        """A message of ann to the case's agent; returns its wake and the run id it will get."""
        msg = self.rooms.post_message(case.room, ANN, text, [case.a], idempotency_key=key)
        wake = Wake(
            agent_id=case.a,
            wake_id=f"msg:{msg.id}",
            room_id=case.room,
            hop=0,
            chain_id=msg.id,
            by_kind="person",
            by_company=msg.author.company,
            cause_kind="message",
            cause_id=msg.id,
        )
        return wake, execution_name(case.a, wake.wake_id)

    def message_id(self, key: str) -> str:
        return f"msg-{hashlib.sha256(key.encode()).hexdigest()[:24]}"  # RoomService's id for a keyed post

    def wait_quiet(self) -> None:
        assert self.stack is not None
        self.stack.wait_quiet(self.quiet_timeout_s)

    def approve_parked(self, cases: Iterable[Case]) -> int:
        """Approve every pending approval request of a parked run of these cases (as ann)."""
        d, n = self.deps, 0
        for case in cases:
            for ap in d.room.approvals(case.room):
                run = d.ledger.get_run(ap.run_id)
                if ap.status == "pending" and run is not None and run.status == "waiting_approval":
                    on_parked = case.point.on_parked if case.point is not None else "approve"
                    if on_parked != "approve" and ap.run_id == case.run_id:
                        n += faults.person_stops(case.run_id, on_parked)
                        continue
                    decide_approval(d, case.room, ap.id, ANN, approve=True)
                    case.approvals_given += 1
                    n += 1
        return n

    def settle(self, cases: list[Case], rounds: int = 6) -> None:
        """Wait for quiet, approve what is parked, until nothing is left to approve."""
        for _ in range(rounds):
            self.wait_quiet()
            if not self.approve_parked(cases):
                return
        self.wait_quiet()

    def counted(self, room_id: str, chain_id: str) -> int:
        """The runs a chain's counter item says the chain started (0: no item, no run counted)."""
        d = self.deps
        item = d.ledger.db.get_item(TableName=d.ledger.table, Key=chain_key(room_id, chain_id), ConsistentRead=True)
        return int(item.get("Item", {}).get("runs", 0))

    def refused_wake(self, case: Case) -> Wake | None:
        """The wake a chain case's chain refuses, as the run's outbox item carries it (``None``:
        not a refusing case, or the run never wrote it)."""
        if not case.refused_wake_id:
            return None
        for item in _room_items(self, case.room):
            if item.get("type") == "outbox":
                for w in item.get("wakes", []):
                    if w.get("wake_id") == case.refused_wake_id:
                        return Wake.model_validate(w)
        return None

    def redeliver(self, wake: Wake) -> None:
        assert self.stack is not None
        self.stack.client("sqs").send_message(
            QueueUrl=self.stack.queue_urls[r.WAKE_QUEUE.logical_id], MessageBody=wake.model_dump_json()
        )

    # ------------------------------------------------------------------ cases
    def start_case(self, case: Case) -> None:
        key = f"{case.room}-first"
        case.run_id = execution_name(case.a, f"msg:{self.message_id(key)}")
        p = case.point
        if p is not None and p.refuses:
            case.refused_wake_id = run_wake_id(case.run_id, "actions", case.b)
            case.refused_run_id = execution_name(case.b, case.refused_wake_id)
        if p is not None:
            scope = (case.refused_run_id if p.on == "refused" else case.run_id) if p.run_scoped else None
            case.faults = [
                faults.Fault(p.at, p.kind, run_id=scope, arg=p.arg, times=p.times, skip=p.skip),
                *(faults.Fault(at, kind, run_id=scope) for at, kind in p.also),
            ]
            faults.add(*case.faults)
        if p is not None and not p.run_scoped:
            # a busy stream batch: the message, then two more records with wakes (for b-N)
            assert self.stack is not None
            with self.stack.paused():
                case.wake, _ = self.post(case, f"Please plan {case.room}.", key)
                self.rooms.create_task(
                    case.room, BOB, case.b, "Print it", "Print the plan.", idempotency_key=f"{case.room}-bt"
                )
                self.rooms.post_message(
                    case.room, BOB, f"@{case.b} print {case.room} too", [], idempotency_key=f"{case.room}-bm"
                )
            return
        case.wake, _ = self.post(case, f"Please plan {case.room}.", key)

    def run_cases(self, cases: list[Case]) -> None:
        """Play cases side by side: fault, settle, deliver the wake again, a fresh message."""
        for case in cases:
            self.start_case(case)
        self.settle(cases)
        for case in cases:
            assert case.wake is not None
            self.redeliver(case.wake)
            refused = self.refused_wake(case)
            if refused is not None:  # a refused wake delivered again starts nothing
                self.redeliver(refused)
        self.wait_quiet()
        for case in cases:
            if case.point is not None and case.point.pauses:  # resumed: the next message wakes it
                agent = self.deps.room.get_agent(case.a)
                if agent is not None and agent.paused_at is not None:
                    Stops(self.deps).resume(agent, ANN)
            self.server.set_script(case.a, [{"reply": {"text": f"Next run in {case.room}: fine.", "actions": []}}])
            _wake, case.next_run_id = self.post(case, f"Anything left in {case.room}?", f"{case.room}-next")
        self.settle(cases)

    # ------------------------------------------------------------------ checks
    def check(self, case: Case, trace: list[str], rewrites: dict[str, list[str]] | None = None) -> CaseResult:
        """What the tables say about a case (see the module docstring); ``trace``: the clean
        run's points (for the expected status); ``rewrites``: :func:`stream_rewrites`."""
        d = self.deps
        if rewrites is None:
            assert self.stack is not None
            rewrites = stream_rewrites(self.stack)
        p = case.point
        if p is None or p.kind in ("die", "die_end", "conflict"):
            expect = p.expect if p is not None and p.expect else "completed"
        else:
            expect = p.expect or (expected_status(trace, p.at, p.kind) if p.at in trace else "(not in the trace)")
        run = d.ledger.get_run(case.run_id)
        status = run.status if run else NO_RUN
        room_items = _room_items(self, case.room)
        mine = [i for i in room_items if i.get("run_id") == case.run_id or case.run_id in str(i.get("id", ""))]
        fired = [f.fired for f in case.faults]
        res = CaseResult(
            point=p.name if p else "(clean)",
            expect=expect,
            status=status,
            writes=len(mine),
            fired=sum(fired),
            faults=len(fired),
        )
        res.duplicates += _duplicates_by_content(room_items)
        res.duplicates += _duplicates_by_key(self, case.room, rewrites)
        if not all(fired):
            res.problems.append(
                "a fault never fired: " + ", ".join(f"{f.kind}@{f.point}" for f in case.faults if not f.fired)
            )
        if status != expect:
            res.problems.append(f"ledger status {status}, expected {expect}")
        if p is not None and p.writes is not None and len(mine) != p.writes:
            res.problems.append(f"{len(mine)} room items of the run, expected {p.writes}")
        replies = [
            i
            for i in room_items
            if i.get("type") == "message" and i.get("kind") == "reply" and i.get("run_id") == case.run_id
        ]
        if len(replies) > 1:
            res.duplicates.append(f"{len(replies)} replies of run {case.run_id}")
        want_reply = status in ("completed", "failed_after_reply") or (
            status == "stopped" and run is not None and run.reply_message_id is not None
        )
        if want_reply != bool(replies):
            res.problems.append(f"reply {'missing' if want_reply else 'present'} for status {status}")
        if replies and replies[0]["id"] != reply_message_id(case.run_id):
            res.problems.append(f"reply id {replies[0]['id']} is not derived from the run")
        if run is not None and run.reply_message_id and not replies:
            res.problems.append("the ledger names a reply that is not in the room")
        # held actions: one request, decided at most once, written at most once
        approvals = [i for i in room_items if i.get("type") == "approval" and i.get("run_id") == case.run_id]
        if len({(a["run_id"], a["index"]) for a in approvals}) != len(approvals):
            res.duplicates.append("an approval request recorded twice")
        if case.approvals_given > max(1, len(approvals)):
            res.duplicates.append(f"held action decided {case.approvals_given} times")
        closes = [
            i
            for i in room_items
            if i.get("type") == "task_event" and i.get("kind") == "close" and i.get("task_id") == case.t2
        ]
        if len(closes) > 1:
            res.duplicates.append(f"held close written {len(closes)} times")
        if run is not None:
            # the ledger tells the truth about each action: "written" exactly when it is in the room
            in_room = {str(i.get("id")) for i in room_items}
            for a in d.ledger.actions(case.run_id):
                landed = _action_write_id(case.run_id, a.index, a.kind) in in_room
                if landed != (a.outcome == "written"):
                    res.problems.append(
                        f"action {a.index} ({a.kind}) is {'' if landed else 'not '}in the room "
                        f"but the ledger says {a.outcome}"
                    )
                if status in FINAL_STATUSES and a.outcome in ("pending", "held"):
                    res.problems.append(f"action {a.index} of a final run is still {a.outcome}")
            reqs = d.ledger.model_requests(case.run_id)
            if len(reqs) > 3:
                res.problems.append(f"{len(reqs)} model requests recorded (cap 3)")
            if status in FINAL_STATUSES and any(q.outcome == "pending" for q in reqs):
                res.problems.append("a model request of a final run is still pending")
        if self.server.count(case.a) > 4:  # 3 for the run at most, 1 for the next run
            res.problems.append(f"{self.server.count(case.a)} model requests for {case.a}")
        res.problems += _chain_problems(self, case, room_items)
        res.problems += _spend_problems(self, case)
        # the next wake runs normally and sees what the failed run wrote
        nxt = d.ledger.get_run(case.next_run_id)
        res.next_status = nxt.status if nxt else NO_RUN
        if res.next_status != "completed":
            res.problems.append(f"next run {res.next_status}")
        else:
            res.problems += _sees(self, case, mine)
        return res


def _chain_problems(lab: ChaosLab, case: Case, room_items: list[dict[str, Any]]) -> list[str]:
    """Design §12.1 on the case's chains (its first message's and the next one's): each counter
    counts exactly the runs the ledger holds of its chain (a cancelled or repeated claim counts
    nothing), the room holds the chain notices the case expects and, when the chain refused a
    wake, its claim records the refusal, it has no ledger entry and started no model request
    (the other agent made one, for the wake by the reply), also after it was delivered again."""
    d, p = lab.deps, case.point
    problems: list[str] = []
    runs = d.ledger.runs_in_room(case.room)
    first = lab.message_id(f"{case.room}-first")
    for chain in (first, lab.message_id(f"{case.room}-next")):
        counted = lab.counted(case.room, chain)
        entries = sum(1 for x in runs if x.chain_id == chain)
        if counted != entries:
            problems.append(f"chain {chain} counts {counted} runs, the ledger holds {entries}")
    notices = [
        i
        for i in room_items
        if i.get("type") == "message" and i.get("kind") == "notice" and i.get("id") == chain_notice_id(first)
    ]
    want = p.chain_notices if p is not None else 0
    if len(notices) != want:
        problems.append(f"{len(notices)} chain notices, expected {want}")
    if p is None or not p.refuses:
        return problems
    claim = d.ledger.get_claim(case.b, case.refused_wake_id)
    recorded = claim.get("not_started") if claim is not None else None
    if (claim is None) != (p.refusal is None) or recorded != p.refusal:
        problems.append(f"refused wake's claim is {claim!r}, expected not_started {p.refusal!r}")
    if d.ledger.get_run(case.refused_run_id) is not None:
        problems.append("the refused wake has a ledger entry")
    if lab.server.count(case.b) != 1:
        problems.append(f"{lab.server.count(case.b)} model requests for {case.b}, expected 1")
    return problems


def _spend_problems(lab: ChaosLab, case: Case) -> list[str]:
    """Design §12.4 on the case's agent: its spend counters count each recorded request of its
    runs exactly once, its reserve while unsettled (a crash between reserve and settlement keeps
    the reserve: never less than spent) and its settled amount after (never twice)."""
    d = lab.deps
    want: Counter[tuple[str, str]] = Counter()
    company = "acme"  # the company of every case's agent a (ChaosLab.new_case)
    for run in d.ledger.runs_in_room(case.room):
        if run.agent_id != case.a:
            continue
        for req in d.ledger.model_requests(run.run_id):
            # the request's settlement, as its outcome would write it (None: it reserved nothing)
            for count in settlement(d, req) or []:
                want[(count.period, count.unit)] += -count.reserved + (count.amount if req.settled else 0)
    if not want:
        return []
    _, counters = d.ledger.spend_reads(company, sorted({p for p, _ in want}), (d.room.table, budget_key(company)))
    problems = []
    for (period, unit), amount in sorted(want.items()):
        held = int(counters.get(period, {}).get(budgets.counter_attr(case.a, unit), 0))
        if held != amount:
            problems.append(f"spend counter {period} holds {held} {unit} for {case.a}, its requests {amount}")
    return problems


def _action_write_id(run_id: str, index: int, kind: str) -> str:
    what = {"remember": "mem", "create_task": "task"}.get(kind, "tev")
    return action_write_id(run_id, index, what)


def _now() -> str:
    from quayutec.models import now_iso

    return now_iso()


def _room_items(lab: ChaosLab, room_id: str) -> list[dict[str, Any]]:
    """Every room-table item of a room (its main, message and memory partitions)."""
    from quayutec.dal.aws import paginate_query

    d = lab.deps
    items: list[dict[str, Any]] = []
    for pk in (
        f"ROOM#{room_id}",
        f"ROOM#{room_id}#MSG",
        f"ROOM#{room_id}#MEM#room",
        f"ROOM#{room_id}#MEM#company#acme",
        f"ROOM#{room_id}#MEM#company#bolt",
    ):
        items += paginate_query(
            d.room.db.query,
            TableName=d.room.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": pk},
        )
    return items


_VOLATILE = {
    *KEY_ATTRS,
    "id",
    "created_at",
    "updated_at",
    "task_token",
    "status",
    "decided_by",
    "result",
    "wakes",
}


def _duplicates_by_content(items: list[dict[str, Any]]) -> list[str]:
    """Items of the room with the same content under different keys (ids, times aside)."""
    seen: Counter[str] = Counter()
    for i in items:
        if i.get("type") in ("member", "room_agent", "room", None):
            continue
        content = {k: v for k, v in i.items() if k not in _VOLATILE}
        if i.get("type") == "outbox":
            content["wakes"] = sorted(w["wake_id"] for w in i.get("wakes", []))
        seen[json.dumps(content, sort_keys=True, default=str)] += 1
    return [f"written {n} times: {c[:120]}" for c, n in seen.items() if n > 1]


def _duplicates_by_key(lab: ChaosLab, room_id: str, rewrites: dict[str, list[str]]) -> list[str]:
    """By key: one ledger entry and one claim per (agent, wake); and no immutable room item
    written twice under its key (``rewrites``: from the room table's stream, which shows every
    write)."""
    d = lab.deps
    out: list[str] = []
    runs = d.ledger.runs_in_room(room_id)
    per_wake = Counter((x.agent_id, x.wake_id) for x in runs)
    out += [f"{n} ledger entries for wake {w}" for w, n in per_wake.items() if n > 1]
    for x in runs:
        claim = d.ledger.get_claim(x.agent_id, x.wake_id)
        if claim is None or claim.get("run_id") != x.run_id:
            out.append(f"claim of {x.wake_id} does not name run {x.run_id}")
    out += [f"immutable item written twice: {k}" for k in rewrites.get(room_id, [])]
    return out


_IMMUTABLE = ("MSG#", "TEV#", "MEM#", "OUTBOX#")


def stream_rewrites(stack: LocalStack) -> dict[str, list[str]]:
    """Per room: the keys of messages, task events, memory lines and outbox items that the room
    table's stream shows written more than once (a second INSERT, or a MODIFY)."""
    streams = stack.client("dynamodbstreams")
    counts: Counter[tuple[str, str]] = Counter()
    for shard in streams.describe_stream(StreamArn=stack.stream_arn)["StreamDescription"]["Shards"]:
        it = streams.get_shard_iterator(
            StreamArn=stack.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while it:
            resp = streams.get_records(ShardIterator=it, Limit=1000)
            for rec in resp.get("Records", []):
                keys = rec["dynamodb"]["Keys"]
                pk, sk = keys["pk"]["S"], keys["sk"]["S"]
                if pk.startswith("ROOM#") and sk.startswith(_IMMUTABLE):
                    counts[(pk.split("#")[1], f"{pk}/{sk}")] += 1
            if not resp.get("Records"):
                break
            it = resp.get("NextShardIterator")
    out: dict[str, list[str]] = {}
    for (room, key), n in counts.items():
        if n > 1:
            out.setdefault(room, []).append(f"{key} ({n} writes)")
    return out


def _sees(lab: ChaosLab, case: Case, written: list[dict[str, Any]]) -> list[str]:
    """The next run's stored context holds what the failed run wrote."""
    ctx = lab.deps.rundata.get(case.next_run_id, "context")
    if ctx is None:
        return ["next run stored no context"]
    problems = []
    msg_ids = {m["id"] for m in ctx["messages"]}
    mem_ids = {m["id"] for m in ctx["memory"]}
    open_ids = {t["id"] for t in ctx["open_tasks"]}
    for i in written:
        if i.get("type") == "message" and i["id"] not in msg_ids:
            problems.append(f"next run did not see message {i['id']}")
        if i.get("type") == "memory" and i["id"] not in mem_ids:
            problems.append(f"next run did not see memory line {i['id']}")
    t2_closed = any(i.get("type") == "task_event" and i.get("kind") == "close" for i in written)
    if t2_closed == (case.t2 in open_ids):
        problems.append(f"next run sees {case.t2} as {'open' if case.t2 in open_ids else 'closed'}")
    if case.t1 not in open_ids:
        problems.append(f"next run does not see open task {case.t1}")
    return problems


# ----------------------------------------------------------------------------- driving
def non_final_runs(lab: ChaosLab) -> list[str]:
    d = lab.deps
    return [
        f"{x.run_id}: {x.status}"
        for n in range(1, lab.cases_made + 1)
        for x in d.ledger.runs_in_room(case_room_id(n))
        if x.status not in FINAL_STATUSES
    ]


def play(lab: ChaosLab, points: list[Point], trace: list[str] | None = None) -> tuple[list[CaseResult], list[str]]:
    """Play cases side by side on one lab and check each. Without ``trace``, a clean case plays
    along (first row of the results) and its points become the trace. Returns (results, trace)."""
    clean = lab.new_case(None) if trace is None else None
    cases = [lab.new_case(p) for p in points]
    if clean is not None:
        with faults.tracing() as recorded:
            lab.run_cases([clean, *cases])
            trace = [p for run_id, p in recorded if run_id == clean.run_id]
    else:
        lab.run_cases(cases)
    faults.disarm()
    assert lab.stack is not None and trace is not None
    rewrites = stream_rewrites(lab.stack)
    out = [lab.check(c, trace, rewrites) for c in ([clean] if clean else []) + cases]
    return out, trace


def run_matrix(
    points: list[Point] | None = None, *, full: bool = False, wave: int = 16, progress: Any = None
) -> tuple[Report, list[str]]:
    """Play the matrix (``points``, else :func:`standard_matrix`, or with ``full`` every point
    of the traced clean run, :func:`full_matrix`): waves of ``wave`` cases side by side, a fresh
    local stack per wave (moto copies a whole table for each transaction: small tables stay
    fast); cases not scoped to one run play alone, after the others, on the last stack. The
    first wave traces a clean case along. Returns the report and the trace."""
    started = time.monotonic()
    results: list[CaseResult] = []
    non_final: list[str] = []
    errors: list[str] = []
    turns_held: list[str] = []
    turns_until_expiry = 0
    runs = 0
    trace: list[str] | None = None
    if full:
        with ChaosLab() as lab:
            results, trace = play(lab, [])
        points = full_matrix(trace)
    points = points if points is not None else standard_matrix()
    scoped = [p for p in points if p.run_scoped]
    alone = [p for p in points if not p.run_scoped]
    batches = [scoped[i : i + wave] for i in range(0, len(scoped), wave)] or [[]]
    for n, batch in enumerate(batches):
        with ChaosLab() as lab:
            out, trace = play(lab, batch, trace)
            results += out
            if n == len(batches) - 1:
                for p in alone:
                    out, trace = play(lab, [p], trace)
                    results += out
                results += play_turn_cases(lab)
            if progress:
                progress(results)
            non_final += non_final_runs(lab)
            held, until_expiry = turn_problems(lab)
            turns_held += held
            turns_until_expiry += until_expiry
            assert lab.stack is not None
            errors += [e for e in lab.stack.stats.errors if "injected" not in e]  # a consumer made to die
            runs += sum(len(lab.deps.ledger.runs_in_room(case_room_id(k))) for k in range(1, lab.cases_made + 1))
    report = Report(
        cases=results,
        seconds=time.monotonic() - started,
        non_final=non_final,
        stack_errors=errors,
        runs=runs,
        turns_held=turns_held,
        turns_until_expiry=turns_until_expiry,
    )
    return report, trace or []


def render(report: Report) -> str:
    """The table: injection point(s) of each case × outcome (final ledger status, expected, room
    items the run wrote, duplicates found, verdict), then the totals."""
    rows = []
    for c in report.cases:
        first, *more = c.point.split(" + ")
        verdict = "ok" if c.ok else "FAIL: " + "; ".join(c.duplicates + c.problems)
        rows.append((first, c.status, c.expect, str(c.writes), str(len(c.duplicates)), verdict))
        rows += [("  + " + m, "", "", "", "", "") for m in more]
    w = max(len(r[0]) for r in rows)
    head = f"{'injection point':<{w}}  {'status':<19} {'expected':<19} {'writes':>6} {'dups':>4}  result"
    lines = [head, "-" * len(head)]
    lines += [f"{a:<{w}}  {b:<19} {c:<19} {d:>6} {e:>4}  {f}".rstrip() for a, b, c, d, e, f in rows]
    lines += [
        "",
        f"points tried: {sum(c.faults for c in report.cases)}   cases: {len(report.cases)}   "
        f"runs: {report.runs}   duplicates: {report.duplicates}   "
        f"non-final ledger entries: {len(report.non_final)}   "
        f"turns held for good: {len(report.turns_held)} ({report.turns_until_expiry} until their lease expired)   "
        f"failed cases: {sum(not c.ok for c in report.cases)}   time: {report.seconds:.1f} s",
    ]
    lines += [f"non-final: {x}" for x in report.non_final]
    lines += [f"turn held: {x}" for x in report.turns_held]
    lines += [f"local stack error: {e}" for e in report.stack_errors]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- fair turns
def turn_problems(lab: ChaosLab) -> tuple[list[str], int]:
    """Fair turns after a wave (design §12.3), for every company of the lab: each counter agrees
    with its items (``active`` = its ``HOLD``s, ``waiting`` = its ``WAIT``s), no ended run is left
    in a line, and every turn an ended run still holds expires within one lease (so the line takes
    it over then: checked by asking for the expired turns one lease from now). Returns the
    problems (turns held for good) and how many turns were freed only by their lease."""
    d = lab.deps
    lease = d.settings.turn_lease_s
    later = int(time.time()) + lease + 1
    problems: list[str] = []
    until_expiry = 0
    for company in ("acme", "bolt", TURN_COMPANY):
        counter = d.turns.counter(company)
        holds, line = d.turns.holds(company), d.turns._items(company, "WAIT#", None)
        if int(counter.get("active", 0)) != len(holds):
            problems.append(f"{company}: counter says {counter.get('active', 0)} turns held, {len(holds)} are")
        if int(counter.get("waiting", 0)) != len(line):
            problems.append(f"{company}: counter says {counter.get('waiting', 0)} waiting, {len(line)} are")
        for w in line:
            problems.append(f"{company}: {w['run_id']} left in line after its run ended")
        expiring = {h["run_id"] for h in d.turns.expired(company, later, len(holds) + 1)}
        for h in holds:
            run = d.ledger.get_run(str(h["run_id"]))
            if run is not None and run.status not in FINAL_STATUSES:
                continue  # a run still going (reported as non-final)
            until_expiry += 1
            if h["run_id"] not in expiring:
                problems.append(f"{company}: {h['run_id']} holds a turn no lease frees")
    return problems, until_expiry


def play_turn_cases(lab: ChaosLab) -> list[CaseResult]:
    """The lease's points that need a run in line (design §12.3), played one after another on
    ``lab`` for company ``turnco`` (one turn; its waiting runs look again every second):

    * a crash between joining the line and parking (WaitForTurn's write landed, the task failed):
      RecordFailure ends the run ``failed_before_reply`` and takes it out of the line;
    * a run that died holding the turn, its release lost (a ``HOLD`` with a 2 s lease and no run):
      the next run waits and takes the turn over once it expired, ``completed``;
    * a lost hand-off (the run that ends hands its turn on, then crashes before
      ``SendTaskSuccess``): the run in line finds the turn handed to it at its next look,
      ``completed``; the first run stays ``completed``.
    Each result names its point; a case whose run ends otherwise, or whose fault never fired,
    fails."""
    d = lab.deps
    svc = Services(d)
    svc.companies.create(OPERATOR, TURN_COMPANY, ["tom"], max_concurrent_runs=1)
    tom = Caller(company=TURN_COMPANY, member="tom")
    tom_author = Author(kind="person", id="tom", company=TURN_COMPANY)
    assert lab.stack is not None
    sm = lab.stack.client("secretsmanager")
    sm.create_secret(Name=quay_deps.secret_name(d.settings, TURN_COMPANY, "anthropic"), SecretString="sk-turn-chaos")
    agent = f"{TURN_COMPANY}.t1"
    svc.agents.register(tom, name="t1", provider="anthropic", model="claude-test", instructions="Be brief.")
    lab.server.keys[agent] = "sk-turn-chaos"
    room = svc.rooms.create(tom, name="turns", members=[], idempotency_key="chaos-turns").room
    svc.rooms.place_agent(tom, room.id, agent)
    done = [{"reply": {"text": "Done.", "actions": []}}]
    results: list[CaseResult] = []

    def post(text: str) -> str:
        msg = lab.rooms.post_message(room.id, tom_author, text, [agent])
        return execution_name(agent, f"msg:{msg.id}")

    def result(point: str, expect: dict[str, str], fault: faults.Fault | None) -> CaseResult:
        statuses = {run_id: (rec.status if (rec := d.ledger.get_run(run_id)) else NO_RUN) for run_id in expect}
        problems = [f"{k}: {v}, expected {expect[k]}" for k, v in statuses.items() if v != expect[k]]
        if fault is not None and not fault.fired:
            problems.append("the fault never fired")
        return CaseResult(
            point=point,
            expect=", ".join(expect.values()),
            status=", ".join(statuses.values()),
            writes=0,
            problems=problems,
            fired=int(bool(fault and fault.fired)),
            faults=1,
        )

    def blocker(name: str, lease_s: int) -> None:
        taken = d.turns.acquire(TURN_COMPANY, name, "arn:aws:states:::execution:gone", int(time.time()), lease_s)
        assert taken == "taken", taken

    # 1. joined the line, crashed before parking
    blocker("blocker-1", 2)
    fault = faults.Fault(TURN_WAIT_WRITE, "crash")
    faults.arm(fault)
    lab.server.set_script(agent, done * 2)
    run1 = post("@t1 one")
    lab.wait_quiet()
    faults.disarm()
    results.append(result(f"crash@{TURN_WAIT_WRITE} [a turn held]", {run1: "failed_before_reply"}, fault))
    # 2. the turn of a run that died, its release lost (case 1's blocker): the line takes it over
    run2 = post("@t1 two")
    lab.wait_quiet()
    results.append(result("lost release [a turn held, its lease of 2 s]", {run2: "completed"}, None))
    # 3. the hand-off's write landed, SendTaskSuccess never went
    lab.server.set_script(agent, [{"reply": {"text": "First.", "actions": []}, "delay_s": 1.0}, *done])
    fault = faults.Fault(TURN_HANDOFF_WRITE, "crash")
    faults.arm(fault)
    first = post("@t1 first")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not d.turns.holds(TURN_COMPANY):
        time.sleep(0.02)
    second = post("@t1 second")
    lab.wait_quiet()
    faults.disarm()
    results.append(result(f"crash@{TURN_HANDOFF_WRITE}", {first: "completed", second: "completed"}, fault))
    return results
