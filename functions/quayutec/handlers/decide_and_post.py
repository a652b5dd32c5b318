"""DecideAndPost phase: ``{"state": RunState, ...}`` → the next RunState: the rights of each
declared action (SPEC §2.4), then the reply posted (§2.5); a reply declaring no action also gets
the final status here (§2.8, ``finished``)."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic import run

handler = phase_handler(lambda deps, state, event: run.decide_and_post(deps, state))
