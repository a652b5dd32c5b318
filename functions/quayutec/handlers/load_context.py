"""Run phase `load_context`: ``{"state": RunState, ...}`` → the next RunState. SPEC §2.2."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic import run

handler = phase_handler(lambda deps, state, event: run.load_context(deps, state))
