"""ClaimAndRead (SPEC §2.1, §2.2): claim ``(agent, wake)`` with a conditional put, then read the
room with bounded reads and store the context under the run.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from quayutec.dal.files import files_pk
from quayutec.dal.ledger import ClaimOutcome
from quayutec.dal.room import RunReads
from quayutec.deps import Deps
from quayutec.errors import AlreadyClaimed, RunStateInvalid
from quayutec.logic import files as room_files
from quayutec.logic.phases.common import (
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
    Agent,
    ClaimResult,
    RunFacts,
    RunRecord,
    RunRef,
    RunSettings,
    RunState,
)
from quayutec.seams import part


# ----------------------------------------------------------------------------- 1. claim
def claim(
    deps: Deps, state: RunState, run_id: str, execution_arn: str, execution_start: str | None, agent: Agent | None
) -> RunState:
    """Claim ``(agent, wake)`` with a conditional put and open the ledger entry (SPEC §2.1).

    The claim records the execution ARN and start time (``$$.Execution.StartTime``): a retried
    Claim step of the same execution carries on; any other execution — also one that reuses the
    name after Step Functions' 90 days — does nothing. ``agent``: the wake's agent as the run's
    consistent key read found it (rights rest on its company); ``None``: not registered (the run
    is claimed, then fails)."""
    wake = state.wake
    if wake is None:
        raise RunStateInvalid("execution input has no wake")
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
        execution_arn=execution_arn,
        status="running",
        started_at=now,
        updated_at=now,
    )
    outcome = deps.ledger.claim(record, execution_start or "")
    if outcome == ClaimOutcome.OTHER:
        logger.warning(
            "wake already claimed by another execution", extra={"agent_id": wake.agent_id, "wake_id": wake.wake_id}
        )
        metrics.add_metric(name="DuplicateClaimRefused", unit=MetricUnit.Count, value=1)
        return RunState(wake=wake, claim=ClaimResult(claimed=False))
    ref = RunRef(run_id=run_id, agent_id=wake.agent_id, wake_id=wake.wake_id, room_id=wake.room_id, hop=wake.hop)
    # Claimed now: the entry is the one just written. Resumed (a retried Claim step): its own start.
    run: Any = _Started(run_id, now) if outcome == ClaimOutcome.CLAIMED else _load_run(deps, ref)
    if agent is None:
        raise RunStateInvalid(f"agent {wake.agent_id} is not registered")
    facts = RunFacts(
        company=run.company if isinstance(run, RunRecord) else company,
        started_at=run.started_at,
        provider=agent.provider,
        model=agent.model,
        owner_url=agent.base_url is not None,
    )
    return RunState(
        wake=wake,
        claim=ClaimResult(claimed=True, resumed=outcome == ClaimOutcome.OWN),
        run=ref,
        facts=facts,
        budget=budget(deps, run),
        settings=RunSettings(approval_timeout_s=deps.settings.approval_timeout_s),
    )


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
    )


def load_context(deps: Deps, state: RunState, reads: RunReads) -> RunState:
    """Assemble the context with bounded reads and store it under the run (SPEC §2.2).
    ``reads``: the run's key reads (agent, room and its agents, the wake's cause, the index
    pointer) as :func:`claim_and_read` made them in this same invocation, consistently."""
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
        if msg is None:
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
        "messages": [m.model_dump(mode="json") for m in deps.room.recent_messages(ref.room_id, s.recent_messages)],
        "open_tasks": [t.model_dump(mode="json") for t in deps.room.open_tasks_for(ref.room_id, agent.id, 50)],
        "memory": [
            m.model_dump(mode="json")
            for m in deps.room.memory_for(ref.room_id, agent.company, s.memory_lines, reads.memory)
        ],
        "passages": [p.model_dump(mode="json", exclude_none=True) for p in passages],
        "index_version": index_version,
    }
    deps.rundata.put(ref.run_id, "context", ctx)
    facts = _need_facts(state).model_copy(update={"hop_limit": room.hop_limit, "agents": agents})
    return state.model_copy(update={"budget": budget(deps, run), "facts": facts})


# ----------------------------------------------------------------------------- merged phases
# A Lambda per phase of the state machine, fewer phases (issue 13): adjacent phases whose order is
# kept inside one invocation. Each part runs in its own fault scope, so the crash matrix keeps
# every point of the parts (faults.subphase) and gains the merged invocation's own.
def claim_and_read(
    deps: Deps, state: RunState, run_id: str, execution_arn: str, execution_start: str | None = None
) -> RunState:
    """Claim (SPEC §2.1), then read the room (§2.2). Raises AlreadyClaimed when another
    execution holds the claim: the ASL catches it into a Succeed state, nothing done."""
    with part("claim"):  # the agent, room, cause and index pointer: one consistent read
        reads = _key_reads(deps, state)
        claimed = claim(deps, state, run_id, execution_arn, execution_start, reads.agent)
    if claimed.claim is None or not claimed.claim.claimed:
        raise AlreadyClaimed(f"wake {state.wake.wake_id if state.wake else '?'} is claimed by another execution")
    with part("load_context"):
        return load_context(deps, claimed, reads)
