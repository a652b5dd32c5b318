"""Run phase `finish`: ``{"state": RunState, ...}`` → the next RunState. SPEC §2.8."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic import run

handler = phase_handler(lambda deps, state, event: run.finish(deps, state))
