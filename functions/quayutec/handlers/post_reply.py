"""Run phase `post_reply`: ``{"state": RunState, ...}`` → the next RunState. SPEC §2.5."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic import run

handler = phase_handler(lambda deps, state, event: run.post_reply(deps, state))
