"""ApplyAndFinish phase: ``{"state": RunState, ...}`` → the final RunState: the allowed and
approved actions and the run's wakes written (design §2.7), then the final status (§2.8)."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic.phases import apply_and_finish as phase

handler = phase_handler(
    lambda deps, state, event: phase.apply_and_finish(deps, state),
    states=phase.apply_and_finish_states,
    name="ApplyAndFinish",
)
