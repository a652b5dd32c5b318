"""Run phase `decide_rights`: ``{"state": RunState, ...}`` → the next RunState. SPEC §2.4."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic import run

handler = phase_handler(lambda deps, state, event: run.decide_rights(deps, state))
