"""Reconciler: EventBridge "Step Functions Execution Status Change" events (FAILED, TIMED_OUT,
ABORTED) → the claimed run's final ledger status, when no Catch recorded one (design §2.1).
Locally a poller of execution status feeds the same event shape."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from quayutec.deps import Deps, default_deps
from quayutec.logic.phases import record_failure as phase

logger = Logger()
metrics = Metrics()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext, deps: Deps | None = None) -> dict[str, Any]:
    detail = event.get("detail") or {}
    status = phase.reconcile(deps or default_deps(), detail)
    if status:
        logger.info("run reconciled", extra={"run_id": detail.get("name"), "status": status})
    return {"reconciled": status}
