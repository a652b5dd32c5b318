"""Run phase `call_model`: ``{"state": RunState, ...}`` → the next RunState. SPEC §2.3."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic.phases import call_model as phase

# States entered: CallModel, ModelOutcome? and, before another request, the Wait (for a wake the
# claim did not start: NotStarted).
handler = phase_handler(
    lambda deps, state, event: phase.call_model(deps, state),
    states=lambda out: 3 if out.model is not None and out.model.outcome in ("wait", "not_started") else 2,
)
