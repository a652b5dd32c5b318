"""Run phase `call_model`: ``{"state": RunState, ...}`` → the next RunState. SPEC §2.3."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic import run

handler = phase_handler(lambda deps, state, event: run.call_model(deps, state))
