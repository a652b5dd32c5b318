"""Run phase `call_model`: ``{"state": RunState, ...}`` → the next RunState. docs/design.md §2."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic.phases import call_model as phase
from quayutec.resources import PROVIDER_SDKS_AT_INIT_ENV
from quayutec.settings import environment


def sdks_at_init() -> bool:
    """Whether this process imports every provider SDK now, at init: set by the CDK app when
    SnapStart is on, so the snapshot holds them and no restored request pays their import (about
    a second for ``anthropic``). Otherwise a request imports only the SDK it needs, when it needs
    it (docs/design.md §10). Read here, at import, because init is where the snapshot is taken;
    the same variable is validated with the function's settings on its first invocation."""
    return environment().get(PROVIDER_SDKS_AT_INIT_ENV, "").strip().lower() in ("true", "1", "yes")


if sdks_at_init():
    from quayutec.providers.registry import SDK_MODULES, load_sdk

    for _provider in SDK_MODULES:
        load_sdk(_provider)

# States entered: CallModel, ModelOutcome? and, before another request, the Wait (for a wake the
# claim did not start: NotStarted; for a run without its company's turn: WaitForTurn).
handler = phase_handler(
    lambda deps, state, event: phase.call_model(deps, state),
    states=lambda out: 3 if out.model is not None and out.model.outcome in ("wait", "not_started", "turn") else 2,
    name="CallModel",
)
