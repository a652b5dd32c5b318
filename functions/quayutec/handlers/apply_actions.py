"""Run phase `apply_actions`: ``{"state": RunState, ...}`` → the next RunState. SPEC §2.7."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic import run

handler = phase_handler(lambda deps, state, event: run.apply_actions(deps, state))
