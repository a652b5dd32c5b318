"""What the run phases share (design §2): the run's timing and budget, its facts from the state, the
ledger helpers, and the final write of a completed run (§2.8) with its cost line (§10).

Never twice: every write is keyed from the run and conditional, so any phase can be retried.
"""

from __future__ import annotations

import json
import math
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from quayutec import resources as R
from quayutec.cost import line as cost_line
from quayutec.dal.aws import Guard
from quayutec.dal.keys import agent_key, room_agent_key
from quayutec.dal.ledger import MAX_INLINE_REPLY_BYTES, REPLY_IN_RUN_DATA, stop_guard
from quayutec.deps import Deps
from quayutec.errors import RunStateInvalid, RunTimedOut
from quayutec.logic import ids
from quayutec.logic import wakes as wake_rules
from quayutec.models import (
    Budget,
    ModelRequestRecord,
    RightsStep,
    RunFacts,
    RunRecord,
    RunRef,
    RunState,
    iso,
    parse_iso,
)

logger = Logger(child=True)
metrics = Metrics()


def _finish_request(deps: Deps, run_id: str, record: ModelRequestRecord, reply: dict[str, Any] | None = None) -> None:
    """Store a model request's outcome, with the ``reply`` it brought in the same ledger write (as
    its JSON text: whatever the model wrote is stored as it came) and its reserve settled in its
    company's spend counters (design §12.4); a reply too large for a DynamoDB item goes to run data
    first. Counts it (metric ``ModelRequest_<outcome>``)."""
    from quayutec.logic.phases.spend import settlement

    settle = settlement(deps, record)  # the reserve, settled to the outcome in the same write (design §12.4)
    if reply is None:
        deps.ledger.finish_request(run_id, record, settle=settle)
    else:
        text = json.dumps(reply, ensure_ascii=False)
        if len(text.encode()) > MAX_INLINE_REPLY_BYTES:
            deps.rundata.put(run_id, "reply", reply)
            deps.ledger.finish_request(run_id, record, reply_at=REPLY_IN_RUN_DATA, settle=settle)
        else:
            deps.ledger.finish_request(run_id, record, reply_json=text, settle=settle)
    metrics.add_metric(name=f"ModelRequest_{record.outcome}", unit=MetricUnit.Count, value=1)


def stored_reply(deps: Deps, state: RunState, ref: RunRef) -> dict[str, Any]:
    """The model reply the run's CallModel stored: with request ``state.model.requests`` in the
    ledger (one read), or in run data when it was too large. Raises RunStateInvalid when none."""
    if state.model is None or state.model.outcome != "reply":
        raise RunStateInvalid("state has no model reply: the phase needs the CallModel step's output")
    reply = deps.ledger.request_reply(ref.run_id, state.model.requests)
    if reply == REPLY_IN_RUN_DATA:
        reply = deps.rundata.get(ref.run_id, "reply")
    if not isinstance(reply, dict):
        raise RunStateInvalid("no model reply stored for the run")
    return reply


MAX_ERROR_BODY = 4096


# ----------------------------------------------------------------------------- helpers
def _iso(deps: Deps) -> str:
    return iso(deps.clock())


def _need_run(state: RunState) -> RunRef:
    if state.run is None:
        raise RunStateInvalid("state has no run: the phase needs the Claim step's output")
    return state.run


def _load_run(deps: Deps, ref: RunRef) -> RunRecord:
    run = deps.ledger.get_run(ref.run_id)
    if run is None:
        raise RunStateInvalid(f"run {ref.run_id} has no ledger entry")
    return run


class _Started:
    """The timing facts of a run not yet parked (before its approvals): what the budget needs."""

    def __init__(self, run_id: str, started_at: str) -> None:
        self.run_id, self.started_at, self.parked_s, self.parked_since = run_id, started_at, 0.0, None


def _need_facts(state: RunState) -> RunFacts:
    if state.facts is None:
        raise RunStateInvalid("state has no facts: the phase needs the Claim step's output")
    return state.facts


def _need_rights(state: RunState) -> RightsStep:
    if state.rights is None:
        raise RunStateInvalid("state has no rights: the phase needs the rights decision's output")
    return state.rights


def _timing(state: RunState, ref: RunRef) -> _Started:
    """The run's timing from the state's facts (no read)."""
    return _Started(ref.run_id, _need_facts(state).started_at)


def remaining_seconds(deps: Deps, run: Any) -> float:
    """Active time left (design §2: 300 s from claim to end, parked approval time excluded)."""
    now = deps.clock()
    used = (now - parse_iso(run.started_at)).total_seconds() - run.parked_s
    if run.parked_since:
        used -= (now - parse_iso(run.parked_since)).total_seconds()
    return deps.settings.run_time_limit_s - used


def _hop_limit_of(deps: Deps, room_limit: int | None) -> int:
    """The room's hop limit (``room_limit``), or the runtime's setting when the room names none
    (design §3)."""
    return room_limit if room_limit is not None else deps.settings.hop_limit


def post_chain_notice(deps: Deps, ref: RunRef, facts: RunFacts, targets: list[str]) -> None:
    """A run of a chain that was full at its claim sends no wake (each could only be refused);
    when its write names another agent, the chain's one notice says why (its id derives from the
    chain: written once, whichever run or refused claim comes first; design §12.1)."""
    if facts.chain_full and any(a != ref.agent_id for a in targets):
        deps.room.put_message(wake_rules.chain_notice(ref.room_id, ref.chain_id, facts.max_runs_per_chain))


def run_guard(deps: Deps, ref: RunRef, facts: RunFacts) -> Guard:
    """The run's stop guard (design §12.2): its chain not stopped, its agent not paused since its
    claim (the pause count the claim saw) and still placed in the room. Its model requests, its
    reply and its action writes carry it in their transactions; a failed guard raises RunStopped
    there, nothing written."""
    return guard_of(deps, ref.room_id, ref.chain_id, ref.agent_id, facts.pauses, facts.placement)


def guard_of(deps: Deps, room_id: str, chain_id: str, agent_id: str, pauses: int, placement: str | None) -> Guard:
    """:func:`run_guard` from a run's ids and what its claim saw (its pause count, its agent's
    placement in the room): the run state's facts, or its ledger entry."""
    return stop_guard(
        deps.ledger.table,
        room_id,
        chain_id,
        (deps.room.table, agent_key(agent_id)),
        pauses,
        (deps.room.table, room_agent_key(room_id, agent_id)),
        placement,
    )


def context_fit(state: RunState) -> dict[str, Any] | None:
    """How the run's prompt was fitted (design §2.2), for its final ledger write."""
    return state.context.model_dump(mode="json") if state.context is not None else None


def record_stopped(deps: Deps, state: RunState, *, reply_posted: bool, states: int) -> RunState:
    """Record the final status ``stopped`` (design §12.2) — the run's agent was paused or its chain
    stopped after its claim — once, with whether its reply was posted (``reply_message_id``)
    and its cost line (``states`` entered for this end, design §10). Returns the state marked
    ``stopped`` and ``finished``: the state machine ends the run quietly. Its declared actions
    not written are recorded ``not_reached``."""
    ref = _need_run(state)
    for a in deps.ledger.actions(ref.run_id) if state.rights is not None and state.rights.actions else []:
        if a.outcome in ("pending", "held"):  # declared, never written: the ledger says so
            deps.ledger.set_action_outcome(
                ref.run_id,
                a.index,
                "not_reached",
                "the run was stopped",
                approval="stopped" if a.decision == "ask" and a.approval is None else None,
            )
    cost = cost_line.so_far(
        state.cost, states, writes_to_come=cost_line.plus(cost_line.FINAL_WRITE, turn_to_come(state))
    )
    if deps.ledger.finish_run(
        ref.run_id,
        "stopped",
        reply_message_id=ids.reply_message_id(ref.run_id) if reply_posted else None,
        cost=cost.model_dump(mode="json"),
        context=context_fit(state),
    ):
        logger.info("run stopped", extra={"run_id": ref.run_id, "reply_posted": reply_posted})
        metrics.add_metric(name="Run_stopped", unit=MetricUnit.Count, value=1)
    end_turn(deps, state)
    return state.model_copy(update={"stopped": True, "finished": True})


def turn_to_come(state: RunState) -> dict[str, int]:
    """The turn's end still to come after the final write (:func:`end_turn`), for the cost line."""
    return cost_line.TURN_END if state.approvals is None else {}


def end_turn(deps: Deps, state: RunState) -> None:
    """The run's company turn ends with its final write, after it (design §12.3): given back or
    handed to the oldest run in line. A run that parked on approvals gave it back then
    (``state.approvals``): nothing to do. A retried step does it again (a no-op)."""
    from quayutec.logic import turns

    if state.approvals is None and state.run is not None and state.facts is not None:
        turns.end(deps, state.facts.company, state.run.run_id)


# The functions of the Tasks whose TimeoutSecondsPath is ``$.budget.remaining_s`` (the ASL).
CALL_MODEL = R.FUNCTIONS_BY_ID["CallModelFunction"]
DECIDE_AND_POST = R.FUNCTIONS_BY_ID["DecideAndPostFunction"]
APPLY_AND_FINISH = R.FUNCTIONS_BY_ID["ApplyAndFinishFunction"]


def task_budget(seconds: float, next_task: R.FunctionDef | None) -> Budget:
    """``seconds`` of the run's active time as the next Task's ``TimeoutSecondsPath``: whole
    seconds, at least 1, and never past ``next_task``'s own Lambda timeout (a Task timer past its
    function's only waits on an invocation Lambda has ended; design §2). ``None``: no Task
    follows (the run ends), nothing to cap."""
    whole = math.floor(seconds)
    if next_task is not None:
        whole = min(whole, next_task.timeout_s)
    return Budget(remaining_s=max(1, whole))


def budget(deps: Deps, run: Any, next_task: R.FunctionDef | None) -> Budget:
    """The budget handed to the next Task (``next_task``'s function) as ``TimeoutSecondsPath``:
    the run's active time left, capped at that function's timeout (:func:`task_budget`). One
    number in the state: each phase knows which Task comes next. Raises RunTimedOut."""
    left = remaining_seconds(deps, run)
    if left <= 0:
        raise RunTimedOut(f"run {run.run_id} used its {deps.settings.run_time_limit_s} s of active time")
    return task_budget(left, next_task)


# ----------------------------------------------------------------------------- 8. record
def finish(deps: Deps, state: RunState, states: int = 1) -> RunState:
    """Record ``completed`` (design §2.8), with the cost line: the state's counters, this
    invocation's so far, ``states`` entered for it and this final write (design §10)."""
    ref = _need_run(state)
    cost = cost_line.so_far(
        state.cost, states, writes_to_come=cost_line.plus(cost_line.FINAL_WRITE, turn_to_come(state))
    )
    if deps.ledger.finish_run(
        ref.run_id,
        "completed",
        reply_message_id=ids.reply_message_id(ref.run_id),
        cost=cost.model_dump(mode="json"),
        context=context_fit(state),
    ):  # not again when a retry finds it final
        metrics.add_metric(name="RunCompleted", unit=MetricUnit.Count, value=1)
    end_turn(deps, state)
    return state
