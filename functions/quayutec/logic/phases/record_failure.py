"""RecordFailure (design §2.1): the Catch target of every phase gives a claimed run its final failure
status, once; the reconciler does the same for an execution that ended outside any Catch.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from quayutec.cost import line as cost_line
from quayutec.deps import Deps
from quayutec.errors import BudgetExhausted, ModelCallFailed, RunStopped, RunTimedOut
from quayutec.logic import ids, rights
from quayutec.logic.notices import unanswered_notices
from quayutec.logic.phases.common import (
    _finish_request,
    _iso,
    context_fit,
    metrics,
)
from quayutec.models import (
    FINAL_STATUSES,
    ActionRecord,
    ModelRequestRecord,
    RunRecord,
    RunState,
)

#: RecordFailure and RunFailed (the failed phase's own state is not counted: its state is lost).
RECORD_FAILURE_STATES = 2


def _error_of(error: dict[str, Any] | None) -> tuple[str, str]:
    if not error:
        return "Unknown", ""
    name = str(error.get("Error", "Unknown"))
    cause = error.get("Cause") or ""
    try:
        parsed = json.loads(cause)
        if isinstance(parsed, dict):
            cause = parsed.get("errorMessage", cause)
    except (TypeError, ValueError):
        pass
    return name, str(cause)


def final_status_for(deps: Deps, run: RunRecord, error_name: str) -> str:
    """``timed_out``, ``stopped`` (RunStopped), or ``failed_after_reply`` when the reply is in the room, else
    ``failed_before_reply`` (design §2.1). The room itself is asked, not the ledger's note."""
    if error_name in ("RunTimedOut", "States.Timeout", "TIMED_OUT"):
        return "timed_out"
    if error_name == RunStopped.__name__:  # a guarded write no phase turned into its end (design §12.2)
        return "stopped"
    if deps.room.get_message(run.room_id, ids.reply_message_id(run.run_id)) is not None:
        return "failed_after_reply"
    return "failed_before_reply"


#: Why a run failed (docs/design.md §13): the metric ``RunFailed_<cause>`` counts each failed run
#: once, beside ``Run_<status>``. Only ``fault`` is an alarm: the others are the customer's, the
#: provider's or the limits' doing, and move in normal operation.
FAULT = "fault"  # ours: a phase crashed, an unclassified error, lost requests, the execution died
CUSTOMER = "customer"  # the provider refused the request for good (bad key, bad request, quota...)
PROVIDER = "provider"  # the provider stayed unavailable (rate limit, overload, 5xx, timeouts)
BUDGET = "budget"  # the company's budget was reached (BudgetExhausted)
TIME_LIMIT = "time_limit"  # the run used its active time (RunTimedOut, a Task's timer)
CAUSES = (FAULT, CUSTOMER, PROVIDER, BUDGET, TIME_LIMIT)

#: Request categories (quayutec.providers.call_policy.RULES) of a final refusal the customer can
#: act on: their key, model name, request, quota, spend limit or model address.
CUSTOMER_CATEGORIES = frozenset(
    {
        "auth",
        "model_not_found",
        "bad_request",
        "request_too_large",
        "quota",
        "spend_limit",
        "address_refused",
        "role_denied",
    }
)
#: Categories of a provider that stayed unavailable through the retries (quayutec.providers.call_policy.RULES).
PROVIDER_CATEGORIES = frozenset({"rate_limit", "overloaded", "server_error", "timeout", "connection"})


def failure_cause(error_name: str, requests: list[ModelRequestRecord]) -> str:
    """The cause (one of :data:`CAUSES`) of a run that failed with ``error_name`` (the ASL error
    name: the exception's class name), its model ``requests`` as the ledger holds them.

    ``BudgetExhausted``: ``budget``. ``RunTimedOut`` or a Task timer (``States.Timeout``):
    ``time_limit``. ``ModelCallFailed``: the category of the run's last model request, recorded
    by CallModel from the provider's own markers (never from a message text): a customer's
    final refusal, a provider unavailable, else (``unexpected``, ``lost``, none) a fault.
    Anything else (a phase raised, the execution failed, timed out or was aborted outside the
    Catch) is a fault. Source: docs/design.md §13."""
    if error_name == BudgetExhausted.__name__:
        return BUDGET
    if error_name in (RunTimedOut.__name__, "States.Timeout"):
        return TIME_LIMIT
    if error_name == ModelCallFailed.__name__:
        category = requests[-1].category if requests else None
        if category in CUSTOMER_CATEGORIES:
            return CUSTOMER
        if category in PROVIDER_CATEGORIES:
            return PROVIDER
    return FAULT


def _write_landed(deps: Deps, run: RunRecord, a: ActionRecord) -> bool:
    """Whether the room holds the write of action ``a`` (its id derives from run and index)."""
    if a.decision == "deny" or not a.fields:
        return False
    if a.kind == "remember":
        return (
            deps.room.get_memory(
                run.room_id, a.fields["visibility"], run.company, ids.action_write_id(run.run_id, a.index, "mem")
            )
            is not None
        )
    if a.kind == "create_task":
        return deps.room.get_task(run.room_id, ids.action_write_id(run.run_id, a.index, "task")) is not None
    return (
        deps.room.get_task_event(
            run.room_id, str(a.fields.get("task", "")), ids.action_write_id(run.run_id, a.index, "tev")
        )
        is not None
    )


def _cause(message: str, requests: list[ModelRequestRecord]) -> str:
    """What a company's notice says of why its run ended: the provider's own answer when the last
    model request ended in an error (its status, type and message, as stored), else ``message``."""
    last = requests[-1] if requests else None
    if last is None or last.outcome != "error":
        return message
    said = ": ".join(x for x in (last.error_type, last.message) if x)
    return f"the {last.provider} API answered {last.status}" + (f" ({said})" if said else "") + f"; {message}"


def close_failed_run(
    deps: Deps,
    run_id: str,
    execution_arn: str | None,
    error_name: str,
    message: str,
    cost: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
) -> str | None:
    """Give a claimed run its final failure status, once. Returns the status set, or ``None`` when
    there is no claimed run of this execution or it already has a final status."""
    run = deps.ledger.get_run(run_id)
    if run is None or (execution_arn and run.execution_arn != execution_arn):
        return None
    if run.status in FINAL_STATUSES:
        _leave_turn(deps, run)  # a close that crashed after its final write
        return None
    status = final_status_for(deps, run, error_name)
    requests = deps.ledger.model_requests(run_id)
    for q in requests:
        if q.outcome == "pending":  # sent, but the run ended before its outcome was recorded
            _finish_request(
                deps,
                run_id,
                q.model_copy(
                    update={
                        "outcome": "lost",
                        "category": "lost",
                        "finished_at": _iso(deps),
                        "decision": f"outcome unknown: the run ended ({error_name}) first",
                    }
                ),
            )
    not_done = []
    for a in deps.ledger.actions(run_id):
        if a.outcome in ("pending", "held") or (
            a.decision == "ask" and a.outcome not in ("written", "rejected", "expired", "not_reached")
        ):
            if _write_landed(deps, run, a):  # written, then the step failed before recording it
                deps.ledger.set_action_outcome(
                    run_id,
                    a.index,
                    "written",
                    "written before the run ended",
                    approval="approved" if a.decision == "ask" else None,
                )
                continue
            deps.ledger.set_action_outcome(run_id, a.index, "not_reached", "the run ended first")
            not_done.append(f"action {a.index} {rights.describe(a)}")
        # An approval request still pending can no longer be answered.
        if a.decision == "ask" and deps.room.set_approval_status(
            run.room_id, run_id, a.index, "expired", None, from_statuses=("pending", "deciding")
        ):
            metrics.add_metric(name="ApprovalClosed", unit=MetricUnit.Count, value=1)
    reply_id = ids.reply_message_id(run_id)
    posted = status == "failed_after_reply" or (  # a timed-out or stopped run says whether it got out
        status in ("timed_out", "stopped") and deps.room.get_message(run.room_id, reply_id) is not None
    )
    if status != "failed_after_reply" and not posted:
        not_done.insert(0, "reply not posted")
        # No one waits for an answer that will not come: the room is told, the company why. Before
        # the final write: a close that crashes in between writes them again, once (keyed ids).
        for notice in unanswered_notices(
            run_id=run_id,
            room_id=run.room_id,
            agent_id=run.agent_id,
            company=run.company,
            status=status,
            error=error_name,
            message=_cause(message, requests),
            asked=run.wake.cause_id if run.wake.cause_kind == "message" else None,
        ):
            deps.room.put_message(notice)
    if deps.ledger.finish_run(
        run_id,
        status,
        error_class=error_name,
        error_message=message,
        not_done=not_done,
        reply_message_id=reply_id if posted else None,
        cost=cost,
        context=context,
    ):
        metrics.add_metric(name=f"Run_{status}", unit=MetricUnit.Count, value=1)
        if status != "stopped":  # a person's doing (design §12.2), no failure
            cause = failure_cause(error_name, requests)  # in request order
            metrics.add_metric(name=f"RunFailed_{cause}", unit=MetricUnit.Count, value=1)
        _leave_turn(deps, run)
        return status
    _leave_turn(deps, run)
    return None


def _leave_turn(deps: Deps, run: RunRecord) -> None:
    """After the final write (design §12.3): the run's company turn ends (given back or handed
    on) and, when it died waiting for one, it leaves the line (its place: its claim's time)."""
    from quayutec.logic import turns

    turns.leave(deps, run.company, run.run_id, run.started_at if run.waiting_since else None)


def record_failure(deps: Deps, state: RunState, run_id: str, execution_arn: str | None) -> RunState:
    """The Catch target of every phase: write the ledger's final status (design §2.1)."""
    name, message = _error_of(state.error)
    to_come = cost_line.plus(cost_line.FINAL_WRITE, cost_line.TURN_END)  # its turn ends after it
    cost = cost_line.so_far(state.cost, RECORD_FAILURE_STATES, writes_to_come=to_come)
    close_failed_run(
        deps, run_id, execution_arn, name, message, cost=cost.model_dump(mode="json"), context=context_fit(state)
    )
    return state


# ----------------------------------------------------------------------------- reconcile
def reconcile(deps: Deps, detail: dict[str, Any]) -> str | None:
    """Handle a Step Functions "Execution Status Change" event (FAILED / TIMED_OUT / ABORTED):
    a claimed run whose execution ended outside any Catch gets its final status."""
    status = detail.get("status")
    if status not in ("FAILED", "TIMED_OUT", "ABORTED"):
        return None
    name = detail.get("name") or str(detail.get("executionArn", "")).rsplit(":", 1)[-1]
    error = detail.get("error") or f"Execution{str(status).title().replace('_', '')}"
    if status == "TIMED_OUT":
        error = "TIMED_OUT"
    message = detail.get("cause") or f"execution {status.lower()} outside the state machine's Catch"
    return close_failed_run(deps, name, detail.get("executionArn"), str(error), str(message))
