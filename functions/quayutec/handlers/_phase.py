"""The shape every run-phase handler shares: the ASL passes ``{"state", "run_id",
"execution_arn"}``; the handler parses the state (pydantic), calls one phase of
:mod:`quayutec.logic.phases` and returns the next state (ids only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from quayutec import spans as phase_spans
from quayutec.cost import line as cost_line
from quayutec.deps import Deps, default_deps
from quayutec.errors import RunStateInvalid
from quayutec.models import RunState

logger = Logger()
metrics = Metrics()

Phase = Callable[[Deps, RunState, dict[str, Any]], RunState | None]


def phase_handler(
    phase: Phase, states: Callable[[RunState], int] = lambda out: 1, *, name: str
) -> Callable[..., dict[str, Any]]:
    """Wrap a phase into a Lambda handler ``handler(event, context, deps=None) -> dict``.

    ``deps`` is the injection seam for tests; Lambda calls it with two arguments.
    Raises whatever the phase raises: the class name is the ASL error name. ``states``: the
    states the run entered for this phase, from its output (the cost line's transitions).
    ``name``: the phase's name in its span (its ASL state, design §2.8), stamped on the state.
    """

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    def handler(event: dict[str, Any], context: LambdaContext, deps: Deps | None = None) -> dict[str, Any]:
        if not isinstance(event, dict) or not isinstance(event.get("state", {}), dict):
            raise RunStateInvalid("event must be an object with a 'state' object")
        try:
            state = RunState.model_validate(event.get("state") or {})
        except ValidationError as exc:
            raise RunStateInvalid(
                f"state does not fit the run state: {exc.error_count()} error(s), first at "
                f"{'.'.join(str(x) for x in exc.errors()[0]['loc'])}"
            ) from None
        if state.run:
            logger.append_keys(run_id=state.run.run_id, agent_id=state.run.agent_id)
        d = deps or default_deps()
        # The cost line: this invocation's counts join the state's (MODEL_PRICES: its overrides).
        # Its span: open for the phase (the run's final write stores the spans so far), then kept.
        with cost_line.counting(cost_line.model_prices_of(d.settings)), phase_spans.recording(state.spans, name):
            out = phase(d, state, event) or state
            out = out.model_copy(
                update={"cost": cost_line.so_far(state.cost, states(out)), "spans": phase_spans.closed()}
            )
        return out.dump()

    return handler
