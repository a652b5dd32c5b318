"""Approve or deny a held action: one domain service for the API and the local scenario player
(design §2.6). Only a person of the agent's owning company may decide; the decision resumes the
parked execution with ``SendTaskSuccess`` / ``SendTaskFailure`` (error ``ApprovalRejected``).

A decision takes effect only when Step Functions has accepted it:

1. the row moves ``pending`` → ``deciding`` (conditional; a ``deciding`` row left behind by an
   attempt that died is taken over by the person's retry);
2. the answer is sent;
3. accepted → the row says ``approved`` / ``rejected``. Refused for a transient reason → back to
   ``pending`` and :class:`TransientError` (the API answers 503 with ``Retry-After``). A dead token
   (timed out, unknown) → ``expired``, unless the send may have landed before (an earlier attempt
   left the row ``deciding``, or the answer's fate is unknown): then the run's own record of the
   held action's outcome decides, and until it has one the row stays ``deciding``. The run sets
   the row to the outcome Step Functions gave it when it resumes (``run.apply_actions``), so an
   approved action is never left saying ``expired``.
"""

from __future__ import annotations

import contextlib
import json
from typing import Literal

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ReadTimeoutError,
)

from quayutec.dal.aws import TRANSIENT_CODES, error_code
from quayutec.dal.pages import Page
from quayutec.deps import Deps
from quayutec.errors import ApprovalRejected, Conflict, NotFound, TransientError
from quayutec.logic.access import Principal, member_room
from quayutec.models import FINAL_STATUSES, ApprovalRequest, Author

#: Step Functions errors meaning the token can no longer be answered (SendTaskSuccess API reference).
_DEAD_TOKEN = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})
#: Step Functions refused the call for a reason worth retrying: nothing was accepted.
_SFN_TRANSIENT = TRANSIENT_CODES | {
    "InternalFailure",
    "ServiceUnavailableException",
    "TooManyRequestsException",
    "ServiceQuotaExceededException",
}
#: The request may have reached Step Functions: whether it was accepted is unknown.
_FATE_UNKNOWN = (ReadTimeoutError, ConnectionClosedError)
_FINAL = ("approved", "rejected", "expired", "stopped")


class DecisionUnavailable(TransientError):
    """Step Functions did not take the decision now; the approval is still open (the API
    answers 503 with ``Retry-After``)."""


def _approval_id(approval_id: str) -> tuple[str, int]:
    run_id, _, index_text = approval_id.rpartition(":")
    if not run_id or not index_text.isdigit():
        raise NotFound(f"approval {approval_id!r} does not exist")
    return run_id, int(index_text)


def _run_outcome(deps: Deps, run_id: str, index: int) -> str | None:
    """The held action's outcome as the run recorded it (``approved``/``rejected``/``expired``),
    ``expired`` when the run ended without one, ``None`` while the run has not recorded it yet."""
    action = next((a for a in deps.ledger.actions(run_id) if a.index == index), None)
    if action is not None and action.approval in _FINAL:
        return action.approval
    if action is not None and action.outcome == "written" and action.decision == "ask":
        return "approved"
    run = deps.ledger.get_run(run_id)
    if run is None or run.status in FINAL_STATUSES:
        return "expired"  # the run ended without taking an answer: none can take effect now
    return None


def decide_approval(deps: Deps, room_id: str, approval_id: str, person: Author, approve: bool) -> ApprovalRequest:
    """Approve (``approve=True``) or deny a pending approval request ``"{run_id}:{index}"``.

    Raises NotFound (no such request in the room, or the person is not of the owning company: to
    anyone else its held actions do not exist, design §5 "nothing answers differently for what a
    caller cannot see"), Conflict (already decided, or expired before the answer arrived),
    :class:`DecisionUnavailable` (Step Functions did not take it now: retry).
    """
    run_id, index = _approval_id(approval_id)
    found = deps.room.get_approval(room_id, run_id, index)
    if found is None or person.company != found[0].company:
        raise NotFound(f"approval {approval_id!r} does not exist in room {room_id!r}")
    approval, token = found
    if approval.status in _FINAL:
        raise Conflict(f"approval {approval_id!r} is already {approval.status}")
    status = "approved" if approve else "rejected"
    prior = approval.status  # pending, or deciding (an earlier attempt died or its answer's fate is unknown)
    if not deps.room.set_approval_status(room_id, run_id, index, "deciding", person.id, from_statuses=(prior,)):
        raise Conflict(f"approval {approval_id!r} was decided meanwhile")
    sfn = deps.stepfunctions()
    try:
        if approve:
            sfn.send_task_success(taskToken=token, output=json.dumps({"approved_by": person.id}))
        else:
            sfn.send_task_failure(
                taskToken=token, error=ApprovalRejected.__name__, cause=f"denied by {person.id} of {person.company}"
            )
    except ClientError as exc:
        code = error_code(exc)
        if code in _DEAD_TOKEN:
            return _dead_token(deps, approval, prior, status, person)
        # Refused: nothing was accepted. The request is open again (the person's retry works).
        deps.room.set_approval_status(room_id, run_id, index, "pending", None, from_statuses=("deciding",))
        http = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        if code in _SFN_TRANSIENT or http >= 500:
            raise DecisionUnavailable(
                f"Step Functions did not take the decision ({code}): approval {approval_id!r} is still pending, retry"
            ) from None
        raise
    except _FATE_UNKNOWN:
        # It may have landed: the row stays deciding; the retry (or the run) settles it.
        raise DecisionUnavailable(
            f"the decision on approval {approval_id!r} may not have reached Step Functions: retry"
        ) from None
    except BotoCoreError:  # never connected: nothing was sent
        deps.room.set_approval_status(room_id, run_id, index, "pending", None, from_statuses=("deciding",))
        raise DecisionUnavailable(
            f"Step Functions could not be reached: approval {approval_id!r} is still pending, retry"
        ) from None
    # Accepted: this is the decision, whatever the row said meanwhile. Should this write fail,
    # the run records the outcome it was given and sets the row itself.
    with contextlib.suppress(TransientError, ClientError):
        deps.room.set_approval_status(
            room_id, run_id, index, status, person.id, from_statuses=("pending", "deciding", "expired")
        )
    return approval.model_copy(update={"status": status, "decided_by": person.id})


def _dead_token(deps: Deps, approval: ApprovalRequest, prior: str, status: str, person: Author) -> ApprovalRequest:
    """The token can no longer be answered. If no earlier answer can have landed, the request
    expired; otherwise the run's own record says what happened."""
    room_id, run_id, index = approval.room_id, approval.run_id, approval.index
    outcome = _run_outcome(deps, run_id, index)
    if outcome is None and prior == "pending":
        outcome = "expired"  # no earlier answer was sent: the token died unanswered
    if outcome is None:  # an earlier answer may have landed; the run will record its outcome
        raise Conflict(f"approval {approval.id!r} was answered already; the run is recording the outcome")
    deps.room.set_approval_status(
        room_id,
        run_id,
        index,
        outcome,
        None if outcome != "expired" else "system",
        from_statuses=("pending", "deciding"),
    )
    if outcome == status:  # the person's own earlier answer landed: this retry is answered by it
        return approval.model_copy(update={"status": status, "decided_by": approval.decided_by or person.id})
    if outcome == "expired":
        raise Conflict(f"approval {approval.id!r} expired before the answer arrived")
    raise Conflict(f"approval {approval.id!r} is already {outcome}")


class Approvals:
    """The domain service of ``/rooms/{id}/approvals``: a company's people list and decide the
    held actions of its own agents. ``deps``: the runtime's stores and clients."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room

    def page(
        self,
        who: Principal,
        room_id: str,
        limit: int,
        cursor: str | None = None,
        status: Literal["pending", "all"] = "pending",
    ) -> Page:
        """One page of the caller's company's agents' requests in the room, oldest first (its own
        rows only, design §14; part ``approvals``); ``pending``: those still open (``deciding``:
        an answer is on its way to Step Functions). Raises NotFound, InvalidInput."""
        member_room(self.store, room_id, who)
        return self.store.approvals_page(room_id, who.require_company(), limit, cursor, open_only=status == "pending")

    def decide(self, who: Principal, room_id: str, approval_id: str, *, approve: bool) -> ApprovalRequest:
        """Approve or deny one (:func:`decide_approval`). Raises NotFound and what it raises."""
        member_room(self.store, room_id, who)
        return decide_approval(self.deps, room_id, approval_id, who.author(), approve=approve)
