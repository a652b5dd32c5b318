"""DecideAndPost phase: ``{"state": RunState, ...}`` → the next RunState: the rights of each
declared action (design §2.4), then the reply posted (§2.5); a reply declaring no action also gets
the final status here (§2.8, ``finished``)."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic.phases import decide_and_post as phase

# States entered: DecideAndPost, Finished? and, when the run ended here, Done.
handler = phase_handler(
    lambda deps, state, event: phase.decide_and_post(deps, state),
    states=lambda out: 3 if out.finished else 2,
    name="DecideAndPost",
)
