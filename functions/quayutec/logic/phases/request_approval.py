"""RequestApproval (design §2): record a held action's approval request with its task token."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from quayutec.deps import Deps
from quayutec.errors import RunStateInvalid
from quayutec.logic import rights, turns
from quayutec.logic.phases.common import (
    _iso,
    guard_of,
    metrics,
)


# ----------------------------------------------------------------------------- 6. held actions
def request_approval(deps: Deps, run_id: str, index: int, task_token: str) -> None:
    """Record the approval request of held action ``index`` with its task token, visible to the
    owning company only; the run parks until SendTaskSuccess/SendTaskFailure (design §2).
    Raises RunStopped when the run's agent was paused or its chain stopped since its claim
    (nothing recorded), TransientError on throttling."""
    from quayutec.models import ApprovalRequest

    run = deps.ledger.get_run(run_id)
    if run is None:
        raise RunStateInvalid(f"run {run_id} has no ledger entry")
    # A run parked on approvals holds no company turn (design §12.3): given back (or handed on)
    # first, also when the stop guard below refuses the request; resumed, it finishes without one.
    turns.end(deps, run.company, run_id)
    action = next((a for a in deps.ledger.actions(run_id) if a.index == index), None)
    if action is None or action.decision != "ask":
        raise RunStateInvalid(f"action {index} of run {run_id} is not held for approval")
    approval = ApprovalRequest(
        id=f"{run_id}:{index}",
        room_id=run.room_id,
        run_id=run_id,
        index=index,
        agent_id=run.agent_id,
        company=run.company,
        summary=rights.describe(action),
        fields=action.fields,
        created_at=_iso(deps),
    )
    # A run stopped since its claim asks for nothing: its stop guard (the pause count its claim
    # saw is on its ledger entry) raises RunStopped, which the ASL's Map catches by name and
    # ApplyAndFinish records as the run's end (design §12.2).
    guard = guard_of(deps, run.room_id, run.chain_id, run.agent_id, run.pauses, run.placement)
    if deps.room.put_approval(approval, task_token, guard) is approval:  # recorded now, not a retry
        metrics.add_metric(name="ApprovalRequested", unit=MetricUnit.Count, value=1)
    fields: dict[str, Any] = {"status": "waiting_approval", "updated_at": _iso(deps)}
    if run.parked_since is None:
        fields["parked_since"] = _iso(deps)
    deps.ledger.update_run(run_id, fields)
