"""Failure recorder, the Catch target of every phase: ``{"state": RunState with "error":
{"Error", "Cause"}, "run_id", "execution_arn"}`` → the state, after writing the run's final
ledger status (``failed_before_reply`` / ``failed_after_reply`` / ``timed_out``; ``stopped``
for a stray RunStopped, design §12.2). Source: docs/design.md §2.1."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic.phases import record_failure as phase

handler = phase_handler(
    lambda deps, state, event: phase.record_failure(deps, state, event["run_id"], event.get("execution_arn")),
    states=lambda out: phase.RECORD_FAILURE_STATES,
    name="RecordFailure",
)
