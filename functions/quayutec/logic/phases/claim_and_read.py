"""ClaimAndRead (design §2.1, §2.2): claim ``(agent, wake)`` with a conditional put, then read the
room with bounded reads, fit the context into the agent's budget and store it under the run.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from quayutec.dal.keys import agent_key, chain_key, files_pk, memory_partition, message_key
from quayutec.dal.ledger import ClaimOutcome
from quayutec.dal.rooms import RunReads
from quayutec.deps import Deps
from quayutec.errors import RunStateInvalid
from quayutec.logic import files as room_files
from quayutec.logic import prompt, turns
from quayutec.logic import wakes as wake_rules
from quayutec.logic.phases.common import (
    CALL_MODEL,
    _iso,
    _load_run,
    _need_facts,
    _need_run,
    _Started,
    _timing,
    budget,
    logger,
    metrics,
)
from quayutec.models import (
    DEFAULT_MAX_RUNS_PER_CHAIN,
    ClaimResult,
    ContextFit,
    RunFacts,
    RunRecord,
    RunRef,
    RunSettings,
    RunState,
    TurnStep,
    Wake,
    parse_iso,
)
from quayutec.seams import part


# ----------------------------------------------------------------------------- 1. claim
def claim(
    deps: Deps, state: RunState, run_id: str, execution_arn: str, execution_start: str | None, reads: RunReads
) -> RunState:
    """Claim ``(agent, wake)`` with a conditional put, count the run in its chain and open the
    ledger entry (design §2.1, §12.1).

    The claim records the execution ARN and start time (``$$.Execution.StartTime``): a retried
    Claim step of the same execution carries on; any other execution — also one that reuses the
    name after Step Functions' 90 days — does nothing. A wake of a paused agent (as its read
    found it, or as the claim's transaction checks it), whose writer the agent's ``wake_from``
    does not admit, or whose chain is full or stopped, is claimed as not started
    and starts nothing (a full chain posts its one notice). ``reads``: the run's consistent key
    reads (the agent, whose company rights rest on, ``None`` when not registered: the run is
    claimed, then fails; the room and its chain bound; the chain's counter).

    Returns the state with ``claim.claimed`` False and ``claim.not_started`` set when no run
    starts: a value the state machine ends quietly on (CallModel passes it through), not an
    error. Raises TransientError (retried by the ASL) on throttling or a conflicting claim."""
    wake = state.wake
    if wake is None:
        raise RunStateInvalid("execution input has no wake")
    agent = reads.agent
    company = agent.company if agent else "unknown"
    now = _iso(deps)
    record = RunRecord(
        run_id=run_id,
        agent_id=wake.agent_id,
        company=company,
        room_id=wake.room_id,
        wake_id=wake.wake_id,
        wake=wake,
        hop=wake.hop,
        chain_id=wake.chain_id,
        execution_arn=execution_arn,
        status="running",
        started_at=now,
        updated_at=now,
        pauses=agent.pauses if agent else 0,
        placement=reads.placement,
    )
    start = execution_start or ""
    max_runs = reads.room.max_runs_per_chain if reads.room is not None else DEFAULT_MAX_RUNS_PER_CHAIN
    # a refused wake of a message is noted on it: why it woke no one (design §9)
    cause = (deps.room.table, message_key(wake.room_id, wake.cause_id)) if wake.cause_kind == "message" else None
    if agent is not None and agent.deleted_at is not None:
        found = deps.ledger.refuse(record, start, "deleted", message_item=cause)
    elif agent is not None and agent.paused_at is not None:
        found = deps.ledger.refuse(record, start, "paused", message_item=cause)
    elif agent is not None and not wake_rules.may_wake(agent.wake_from, agent.company, wake.by_kind, wake.by_company):
        found = deps.ledger.refuse(record, start, "wake_from", message_item=cause)
    else:
        agent_item = (deps.room.table, agent_key(wake.agent_id)) if agent is not None else None
        found = deps.ledger.claim(
            record, start, max_runs_per_chain=max_runs, agent_item=agent_item, pauses=record.pauses
        )
    notice_posted = False
    if found.outcome == ClaimOutcome.REFUSED and not found.recorded:
        # A full chain's notice first, then the refusal: a crash between them leaves the wake
        # unclaimed (its execution is gone: nothing runs it) with the notice posted, never the
        # refusal recorded without its notice.
        if found.not_started == "chain_full":
            deps.room.put_message(wake_rules.chain_notice(wake.room_id, wake.chain_id, max_runs))
            notice_posted = True
        found = deps.ledger.refuse(record, start, found.not_started or "chain_full", message_item=cause)
    if found.outcome == ClaimOutcome.OTHER:
        logger.warning(
            "wake already claimed by another execution", extra={"agent_id": wake.agent_id, "wake_id": wake.wake_id}
        )
        metrics.add_metric(name="DuplicateClaimRefused", unit=MetricUnit.Count, value=1)
        return RunState(wake=wake, claim=ClaimResult(claimed=False, not_started="other_execution"))
    if found.outcome == ClaimOutcome.REFUSED:
        return _not_started(deps, wake, found.not_started or "chain_full", max_runs, notice=not notice_posted)
    outcome = found.outcome
    ref = RunRef(
        run_id=run_id,
        agent_id=wake.agent_id,
        wake_id=wake.wake_id,
        room_id=wake.room_id,
        hop=wake.hop,
        chain_id=wake.chain_id,
    )
    # Claimed now: the entry is the one just written. Resumed (a retried Claim step): its own start.
    run: Any = _Started(run_id, now) if outcome == ClaimOutcome.CLAIMED else _load_run(deps, ref)
    # A run still waiting for its company's turn has used no active time yet (design §12.3).
    timing: Any = _Started(run_id, now) if isinstance(run, RunRecord) and run.waiting_since else run
    if agent is None:
        raise RunStateInvalid(f"agent {wake.agent_id} is not registered")
    facts = RunFacts(
        company=run.company if isinstance(run, RunRecord) else company,
        started_at=run.started_at,
        provider=agent.provider,
        model=agent.model,
        owner_url=agent.base_url is not None,
        role=agent.role_arn is not None,
        # A wake of this run's writes needs one run more than the chain has counted with this one
        # (a resumed claim's read already counted it: its transaction landed before the retry).
        chain_full=reads.chain_runs + (0 if outcome == ClaimOutcome.OWN else 1) >= max_runs,
        max_runs_per_chain=max_runs,
        pauses=run.pauses if isinstance(run, RunRecord) else record.pauses,
        placement=run.placement if isinstance(run, RunRecord) else record.placement,
    )
    return RunState(
        wake=wake,
        claim=ClaimResult(claimed=True, resumed=outcome == ClaimOutcome.OWN),
        run=ref,
        facts=facts,
        budget=budget(deps, timing, CALL_MODEL),
        settings=RunSettings(approval_timeout_s=deps.settings.approval_timeout_s),
    )


# ----------------------------------------------------------------------------- 1b. the company's turn
def take_turn(deps: Deps, before: RunState, state: RunState, execution_arn: str) -> RunState:
    """Take one of the company's turns for the claimed run (design §12.3). None free, or runs of
    the company wait first: the state with ``turn`` (its place in line: ``arrival``, the claim's
    time), which CallModel passes through to WaitForTurn. A run whose turn was handed to it
    after a wait (``before.turn``: the state it entered with) starts now: its ledger entry's
    ``started_at`` becomes this instant and ``waited_s`` the wait, once; its active time counts
    from here. Raises TransientError."""
    ref, facts = _need_run(state), _need_facts(state)
    if not turns.take(deps, facts.company, ref.run_id, execution_arn):
        arrival = before.turn.arrival if before.turn is not None else facts.started_at
        return state.model_copy(update={"turn": TurnStep(arrival=arrival, recheck_s=deps.settings.turn_recheck_s)})
    if before.turn is None:
        return state  # its turn began at its claim
    now = _iso(deps)
    waited = max(0.0, (parse_iso(now) - parse_iso(before.turn.arrival)).total_seconds())
    if deps.ledger.start_turn(ref.run_id, facts.company, ref.room_id, now, waited):
        started = now
    else:  # a retried step: the first attempt started it
        started = _load_run(deps, ref).started_at
    logger.info("run's turn began", extra={"run_id": ref.run_id, "waited_s": round(waited, 3)})
    facts = facts.model_copy(update={"started_at": started})
    return state.model_copy(
        update={"facts": facts, "budget": budget(deps, _Started(ref.run_id, started), CALL_MODEL), "turn": None}
    )


def _not_started(deps: Deps, wake: Wake, reason: str, max_runs: int, *, notice: bool = True) -> RunState:
    """The state of a wake claimed as not started; a full chain's one notice (its id derives
    from the chain: every refused wake of the chain writes the same item, once)."""
    logger.info(
        "wake claimed, no run started",
        extra={"agent_id": wake.agent_id, "wake_id": wake.wake_id, "chain_id": wake.chain_id, "reason": reason},
    )
    metrics.add_metric(name="WakeNotStarted", unit=MetricUnit.Count, value=1)
    if reason == "chain_full" and notice:  # a retried step whose refusal landed: the notice, once
        deps.room.put_message(wake_rules.chain_notice(wake.room_id, wake.chain_id, max_runs))
    return RunState(wake=wake, claim=ClaimResult(claimed=False, not_started=reason))


# ----------------------------------------------------------------------------- 2. read the room
def _key_reads(deps: Deps, state: RunState) -> RunReads:
    wake = state.wake
    if wake is None:
        raise RunStateInvalid("execution input has no wake")
    return deps.room.run_reads(
        agent_id=wake.agent_id,
        room_id=wake.room_id,
        cause_kind=wake.cause_kind,
        cause_id=wake.cause_id,
        task_id=wake.task_id,
        index_pk=files_pk(wake.room_id),
        chain=(deps.ledger.table, chain_key(wake.room_id, wake.chain_id)),
    )


def load_context(deps: Deps, state: RunState, reads: RunReads) -> RunState:
    """Assemble the context with bounded reads, fit it into the agent's ``max_context_tokens``
    (:func:`quayutec.logic.prompt.fit`) and store it under the run (design §2.2); the state
    carries what the fitting left out (counts) to the final ledger write. ``reads``: the run's
    key reads (agent, room and its agents, the wake's cause, the index pointer) as
    :func:`claim_and_read` made them in this same invocation, consistently."""
    ref = _need_run(state)
    run = _timing(state, ref)
    s = deps.settings
    agent, room, wake = reads.agent, reads.room, state.wake
    if agent is None or room is None:
        raise RunStateInvalid("agent or room missing")
    if wake is None:
        raise RunStateInvalid("execution input has no wake")
    if wake.cause_kind == "message":
        msg = reads.message
        # Another company's company-only notice is not the agent's to read (design §12.5): as if absent
        if msg is None or not msg.visible_to_company(agent.company):
            raise RunStateInvalid(f"wake cause message {wake.cause_id} not found")
        cause: dict[str, Any] = {"kind": "message", "message": msg.model_dump(mode="json")}
        query = msg.text
    else:
        event, task = reads.task_event, reads.task
        if event is None or task is None:
            raise RunStateInvalid(f"wake cause task event {wake.cause_id} not found")
        cause = {"kind": "task_event", "task": task.model_dump(mode="json"), "event": event.model_dump(mode="json")}
        query = f"{task.title} {task.body} {event.text}"
    agents = reads.agents  # the room item carries its agents
    # The room's index version now (a run keeps reading it) and its top passages: constant reads.
    index_version, passages = room_files.passages(deps, ref.room_id, query, s.file_passages, pointer=reads.index)
    ctx = {
        "agent": agent.model_dump(mode="json", include={"id", "company", "instructions", "provider", "model"}),
        "room": {
            "id": room.id,
            "members": room.members,
            "agents": [{"id": a, "company": c} for a, c in agents.items()],
        },
        "cause": cause,
        "messages": [
            m.model_dump(mode="json")
            for m in deps.room.recent_messages(ref.room_id, s.recent_messages, reader=agent.company)
        ],
        "open_tasks": [t.model_dump(mode="json") for t in deps.room.open_tasks_for(ref.room_id, agent.id, 50)],
        "memory": [
            m.model_dump(mode="json")
            for m in deps.room.memory_for(ref.room_id, agent.company, s.memory_lines, reads.memory)
        ],
        "passages": [p.model_dump(mode="json", exclude_none=True) for p in passages],
        "index_version": index_version,
    }
    ctx, fitted = prompt.fit(ctx, agent.max_context_tokens)
    deps.rundata.put(ref.run_id, "context", ctx)
    writable = (memory_partition("room", agent.company), memory_partition("company", agent.company))
    facts = _need_facts(state).model_copy(
        update={"hop_limit": room.hop_limit, "memory_marked": [p for p in writable if p in reads.memory]}
    )
    return state.model_copy(
        update={"budget": budget(deps, run, CALL_MODEL), "facts": facts, "context": ContextFit(**fitted)}
    )


# ----------------------------------------------------------------------------- merged phases
# A Lambda per phase of the state machine, fewer phases (issue 13): adjacent phases whose order is
# kept inside one invocation. Each part runs in its own fault scope, so the crash matrix keeps
# every point of the parts (faults.subphase) and gains the merged invocation's own.
def claim_and_read(
    deps: Deps, state: RunState, run_id: str, execution_arn: str, execution_start: str | None = None
) -> RunState:
    """Claim (design §2.1, §3), take the company's turn (§12.3), then read the room (§2.2). A
    wake that starts no run (another execution holds it, its chain refused it, the agent's
    ``wake_from`` did) returns the state :func:`claim` made, ``claim.claimed`` False, and reads
    nothing more; a run that finds no free turn returns with ``turn`` and reads nothing yet
    (the room is read when its turn begins)."""
    with part("claim"):  # the agent, room, cause, index pointer and chain: one consistent read
        reads = _key_reads(deps, state)
        claimed = claim(deps, state, run_id, execution_arn, execution_start, reads)
    if claimed.claim is None or not claimed.claim.claimed:
        return claimed
    with part("turn"):  # the company's turn (design §12.3): none free, the run waits for one
        claimed = take_turn(deps, state, claimed, execution_arn)
    if claimed.turn is not None:
        return claimed
    with part("load_context"):
        return load_context(deps, claimed, reads)
