"""The phases of one run (SPEC §2), each called by a thin Lambda handler with the Step Functions
state and returning the next state. State carries ids only (:class:`~quayutec.models.RunState`);
context and the model reply live in run data under the run id.

Never twice: every write is keyed from the run and conditional, so any phase can be retried.
"""

from __future__ import annotations

import json
import math
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from quayutec.deps import Deps
from quayutec import cost_line, faults
from quayutec.errors import AlreadyClaimed, ModelCallFailed, RunStateInvalid, RunTimedOut
from quayutec.logic import files as room_files
from quayutec.logic import ids, prompt, rights
from quayutec.logic import wakes as wake_rules
from quayutec.models import (
    APPROVAL_STATUSES,
    FINAL_STATUSES,
    MAX_ACTIONS,
    MAX_REPLY_BYTES,
    ActionRecord,
    Agent,
    Author,
    Budget,
    ClaimResult,
    MemoryLine,
    Message,
    ModelRequestRecord,
    ModelStep,
    RightsStep,
    RunFacts,
    RunRecord,
    RunRef,
    RunSettings,
    RunState,
    Task,
    TaskEvent,
    parse_iso,
)
from quayutec.dal.ledger import ClaimOutcome

logger = Logger(child=True)
metrics = Metrics()


def _finish_request(deps: Deps, run_id: str, record: ModelRequestRecord) -> None:
    """Store a model request's outcome and count it (metric ``ModelRequest_<outcome>``)."""
    deps.ledger.finish_request(run_id, record)
    metrics.add_metric(name=f"ModelRequest_{record.outcome}", unit=MetricUnit.Count, value=1)

MAX_ERROR_BODY = 4096


# ----------------------------------------------------------------------------- helpers
def _iso(deps: Deps) -> str:
    return deps.clock().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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


def _timing(deps: Deps, state: RunState, ref: RunRef) -> Any:
    """The run's timing from the state's facts (no read), else from its ledger entry."""
    if state.facts is not None:
        return _Started(ref.run_id, state.facts.started_at)
    return _load_run(deps, ref)


def _facts(deps: Deps, state: RunState, ref: RunRef) -> RunFacts:
    """The run's facts from the state; for a state without them (a run started before they were
    carried), from the ledger entry and the agent."""
    if state.facts is not None:
        return state.facts
    run = _load_run(deps, ref)
    agent = deps.room.get_agent(ref.agent_id)
    if agent is None:
        raise RunStateInvalid(f"agent {ref.agent_id} is not registered")
    return RunFacts(company=run.company, started_at=run.started_at, provider=agent.provider, model=agent.model,
                    owner_url=agent.base_url is not None)


def remaining_seconds(deps: Deps, run: Any) -> float:
    """Active time left (SPEC §2: 300 s from claim to end, parked approval time excluded)."""
    now = deps.clock()
    used = (now - parse_iso(run.started_at)).total_seconds() - run.parked_s
    if run.parked_since:
        used -= (now - parse_iso(run.parked_since)).total_seconds()
    return deps.settings.run_time_limit_s - used


def _hop_limit_of(deps: Deps, room_limit: int | None) -> int:
    return room_limit if room_limit is not None else deps.settings.hop_limit


def hop_limit(deps: Deps, room: Any) -> int:
    """The room's hop limit, or the runtime's setting when the room names none (SPEC §3)."""
    return room.hop_limit if room is not None and room.hop_limit is not None else deps.settings.hop_limit


def budget(deps: Deps, run: Any) -> Budget:
    """The budget handed to the next Task as ``TimeoutSecondsPath``. Raises RunTimedOut."""
    left = remaining_seconds(deps, run)
    if left <= 0:
        raise RunTimedOut(f"run {run.run_id} used its {deps.settings.run_time_limit_s} s of active time")
    return Budget(remaining_s=max(1, math.floor(left)))


# ----------------------------------------------------------------------------- 1. claim
def claim(deps: Deps, state: RunState, run_id: str, execution_arn: str, execution_start: str | None = None,
          agent: Agent | None = None) -> RunState:
    """Claim ``(agent, wake)`` with a conditional put and open the ledger entry (SPEC §2.1).

    The claim records the execution ARN and start time (``$$.Execution.StartTime``): a retried
    Claim step of the same execution carries on; any other execution — also one that reuses the
    name after Step Functions' 90 days — does nothing."""
    wake = state.wake
    if wake is None:
        raise RunStateInvalid("execution input has no wake")
    agent = agent if agent is not None else deps.room.get_agent(wake.agent_id)  # consistent: rights rest on it
    company = agent.company if agent else "unknown"
    now = _iso(deps)
    record = RunRecord(run_id=run_id, agent_id=wake.agent_id, company=company, room_id=wake.room_id,
                       wake_id=wake.wake_id, wake=wake, hop=wake.hop, execution_arn=execution_arn,
                       status="running", started_at=now, updated_at=now)
    outcome = deps.ledger.claim(record, execution_start or "")
    if outcome == ClaimOutcome.OTHER:
        logger.warning("wake already claimed by another execution", extra={"agent_id": wake.agent_id,
                                                                          "wake_id": wake.wake_id})
        metrics.add_metric(name="DuplicateClaimRefused", unit=MetricUnit.Count, value=1)
        return RunState(wake=wake, claim=ClaimResult(claimed=False))
    ref = RunRef(run_id=run_id, agent_id=wake.agent_id, wake_id=wake.wake_id, room_id=wake.room_id, hop=wake.hop)
    # Claimed now: the entry is the one just written. Resumed (a retried Claim step): its own start.
    run: Any = _Started(run_id, now) if outcome == ClaimOutcome.CLAIMED else _load_run(deps, ref)
    if agent is None:
        raise RunStateInvalid(f"agent {wake.agent_id} is not registered")
    facts = RunFacts(company=run.company if isinstance(run, RunRecord) else company, started_at=run.started_at,
                     provider=agent.provider, model=agent.model, owner_url=agent.base_url is not None)
    return RunState(
        wake=wake, claim=ClaimResult(claimed=True, resumed=outcome == ClaimOutcome.OWN), run=ref, facts=facts,
        budget=budget(deps, run), settings=RunSettings(approval_timeout_s=deps.settings.approval_timeout_s))


# ----------------------------------------------------------------------------- 2. read the room
def load_context(deps: Deps, state: RunState, agent: Agent | None = None) -> RunState:
    """Assemble the context with bounded reads and store it under the run (SPEC §2.2).
    ``agent``: the run's agent as the claim read it in this same invocation."""
    ref = _need_run(state)
    run = _timing(deps, state, ref)
    s = deps.settings
    agent = agent if agent is not None else deps.room.get_agent(ref.agent_id)
    # Eventually consistent: the context's members and hop limit; no rights decision rests on
    # them (the agent's company, the wake's cause and the policy are read consistently).
    # A room created a moment ago may not be visible yet: then read it consistently.
    room = deps.room.get_room(ref.room_id, consistent=False) or deps.room.get_room(ref.room_id)
    if agent is None or room is None:
        raise RunStateInvalid("agent or room missing")
    wake = state.wake if state.wake is not None else _load_run(deps, ref).wake
    if wake.cause_kind == "message":
        msg = deps.room.get_message(ref.room_id, wake.cause_id)
        if msg is None:
            raise RunStateInvalid(f"wake cause message {wake.cause_id} not found")
        cause: dict[str, Any] = {"kind": "message", "message": msg.model_dump(mode="json")}
        query = msg.text
    else:
        event = deps.room.get_task_event(ref.room_id, wake.task_id or "", wake.cause_id)
        task = deps.room.get_task(ref.room_id, wake.task_id or "")
        if event is None or task is None:
            raise RunStateInvalid(f"wake cause task event {wake.cause_id} not found")
        cause = {"kind": "task_event", "task": task.model_dump(mode="json"), "event": event.model_dump(mode="json")}
        query = f"{task.title} {task.body} {event.text}"
    agents = deps.room.room_agents(ref.room_id)
    # The room's index version now (a run keeps reading it) and its top passages: constant reads.
    index_version, passages = room_files.passages(deps, ref.room_id, query, s.file_passages)
    ctx = {
        "agent": agent.model_dump(mode="json", include={"id", "company", "instructions", "provider", "model"}),
        "room": {"id": room.id, "members": room.members,
                 "agents": [{"id": a, "company": c} for a, c in agents.items()]},
        "cause": cause,
        "messages": [m.model_dump(mode="json") for m in deps.room.recent_messages(ref.room_id, s.recent_messages)],
        "open_tasks": [t.model_dump(mode="json") for t in deps.room.open_tasks_for(ref.room_id, agent.id, 50)],
        "memory": [m.model_dump(mode="json") for m in deps.room.memory_for(ref.room_id, agent.company, s.memory_lines)],
        "passages": [p.model_dump(mode="json", exclude_none=True) for p in passages],
        "index_version": index_version,
    }
    deps.rundata.put(ref.run_id, "context", ctx)
    facts = _facts(deps, state, ref).model_copy(update={"hop_limit": room.hop_limit, "agents": agents})
    return state.model_copy(update={"budget": budget(deps, run), "facts": facts})


# ----------------------------------------------------------------------------- 3. call the model
def call_model(deps: Deps, state: RunState) -> RunState:
    """Make the next model request of the run, at most 3 in all (1 for an owner's base URL).

    Each request is recorded in the ledger before it is sent; the cap counts recorded requests,
    so a retried step never makes a 4th. A reply already stored under the run is reused.
    Returns ``model.outcome`` ``reply`` or ``wait`` (with whole ``wait_seconds`` for the ASL's
    Wait state). Raises ModelCallFailed (final error, cap, retry-after > 20 s) or RunTimedOut.
    Source: SPEC §2.3.
    """
    from quayutec.providers import ModelCall, ProviderError, decide_next
    from quayutec.providers.classify import scrub_failure, scrub_reply

    entered = deps.clock()
    ref = _need_run(state)
    run = _timing(deps, state, ref)
    requests = deps.ledger.model_requests(ref.run_id)
    # A reply is stored only after its request was recorded: no request recorded, no reply to reuse.
    if requests and deps.rundata.get(ref.run_id, "reply") is not None:
        for r in requests:
            if r.outcome == "pending":
                _finish_request(deps, ref.run_id, r.model_copy(update={"outcome": "ok", "finished_at": _iso(deps)}))
        return state.model_copy(update={"model": ModelStep(outcome="reply", requests=len(requests)),
                                        "budget": budget(deps, run)})
    for r in requests:
        if r.outcome == "pending":  # sent by an attempt that died before recording its outcome
            _finish_request(deps, ref.run_id, r.model_copy(update={
                "outcome": "lost", "category": "lost", "retryable": True, "finished_at": _iso(deps),
                "decision": "outcome unknown (the step died mid-request); counted against the cap"}))
    facts = _facts(deps, state, ref)
    agent: Any = Agent(id=ref.agent_id, company=facts.company, provider=facts.provider, model=facts.model)
    if facts.owner_url:  # the owner's model address is read where it is used, not carried
        agent = deps.room.get_agent(ref.agent_id)
        if agent is None:
            raise RunStateInvalid(f"agent {ref.agent_id} is not registered")
    owner_url = agent.base_url is not None
    cap = 1 if owner_url else 3
    n = len(requests) + 1
    if n > cap:
        raise ModelCallFailed(f"request cap reached: {len(requests)} of {cap} requests made, no reply")
    ctx = deps.rundata.get(ref.run_id, "context")
    if ctx is None:
        raise RunStateInvalid("context missing: ClaimAndRead did not store it")
    api_key = deps.get_api_key(agent.company, agent.provider)  # before recording: no key, no request
    # The client timeout: MODEL_TIMEOUT_SECONDS, but never past the run's active time left, and
    # early enough to record the outcome before this Task's own timeout (the budget the ASL
    # handed it, whole seconds, counted from this step's start).
    left = remaining_seconds(deps, run)
    task_left = (state.budget.remaining_s if state.budget else left) - (deps.clock() - entered).total_seconds()
    timeout_s = min(deps.settings.model_timeout_s, left, task_left - 1)
    if timeout_s < 1:
        raise RunTimedOut(f"no active time left for a model request ({max(0.0, left):.1f} s of "
                          f"{deps.settings.run_time_limit_s} s)")
    record = ModelRequestRecord(n=n, sent_at=_iso(deps), provider=agent.provider, model=agent.model)
    if not deps.ledger.record_request(ref.run_id, record):
        raise ModelCallFailed(f"request {n} was recorded by another attempt")
    base_url = agent.base_url or {
        "anthropic": deps.settings.anthropic_base_url, "openai": deps.settings.openai_base_url,
        "bedrock": deps.settings.bedrock_endpoint_url}.get(agent.provider)
    call = ModelCall(provider=agent.provider, model=agent.model, system=prompt.system_prompt(ctx),
                     user_text=prompt.user_text(ctx), end_user_id=agent.id, api_key=api_key, base_url=base_url,
                     owner_base_url=owner_url, timeout_s=timeout_s,
                     allow_loopback=bool(owner_url and deps.settings.allow_loopback_model_urls))
    # Where the key and the model's answer meet: a model server (an owner's own, above all) is
    # sent the key and can echo it in its text, its tool calls' fields or its request id. Nothing
    # of the answer is stored before it is scrubbed of the key in every encoding (SPEC §5).
    try:
        reply = scrub_reply(deps.provider()(call), api_key)
    except ProviderError as exc:
        f = scrub_failure(exc.failure, api_key)
        decision = decide_next(f, n, owner_url)
        wait_s, why = (decision.wait_seconds if decision.retry else None), decision.reason
        left = remaining_seconds(deps, run)
        out_of_time = None
        if f.status is None and f.category == "timeout" and timeout_s < deps.settings.model_timeout_s:
            out_of_time = f"no reply within {timeout_s:.1f} s, the run's time left: the time limit is reached"
        elif wait_s is not None and wait_s >= left:
            out_of_time = f"{why}, but only {max(0.0, left):.1f} s of the run's time are left: not waited for"
        if out_of_time:
            wait_s, why = None, out_of_time
        finished = record.model_copy(update={
            "outcome": "error", "status": f.status, "request_id": f.request_id, "error_type": f.error_type,
            "error_code": f.error_code, "category": f.category, "retryable": f.retryable,
            "wait_s": wait_s, "decision": why,
            "message": f.message[:1000], "body": f.body[:MAX_ERROR_BODY], "finished_at": _iso(deps)})
        _finish_request(deps, ref.run_id, finished)
        if out_of_time:
            raise RunTimedOut(f"{f.category} ({f.status}): {why}") from None
        if wait_s is not None:  # the next Task's budget is what is left after the Wait
            return state.model_copy(update={
                "model": ModelStep(outcome="wait", wait_seconds=wait_s, requests=n),
                "budget": Budget(remaining_s=max(1, math.floor(left - wait_s)))})
        raise ModelCallFailed(f"{f.category} ({f.status}): {why}") from None
    text = reply.text
    truncated = len(text.encode()) > MAX_REPLY_BYTES
    if truncated:
        text = text.encode()[:MAX_REPLY_BYTES].decode(errors="ignore")
    deps.rundata.put(ref.run_id, "reply", {
        "text": text, "truncated": truncated, "request_id": reply.request_id,
        "tool_calls": [{"name": c.name, "input": c.input} for c in reply.tool_calls]})
    _finish_request(deps, ref.run_id, record.model_copy(update={
        "outcome": "ok", "status": reply.status, "request_id": reply.request_id, "finished_at": _iso(deps)}))
    return state.model_copy(update={"model": ModelStep(outcome="reply", requests=n), "budget": budget(deps, run)})


# ----------------------------------------------------------------------------- 4. rights
def _room_view(deps: Deps, room_id: str, tool_calls: list[dict[str, Any]],
               agents: dict[str, str] | None = None) -> rights.RoomView:
    """The room as the rights check needs it: its agents (as the run's room read found them,
    carried in the state), and only the tasks the declared actions name (at most 25 point reads:
    the cost does not grow with the room's history)."""
    agent_company = dict(agents) if agents is not None else deps.room.room_agents(room_id)
    named = {str(c["input"]["task"]) for c in tool_calls[:MAX_ACTIONS]
             if isinstance(c.get("input"), dict) and isinstance(c["input"].get("task"), str)
             and 0 < len(c["input"]["task"]) <= 256}
    tasks = {t.id: t for t in (deps.room.get_task(room_id, task_id) for task_id in sorted(named)) if t}
    return rights.RoomView(agent_company=agent_company, tasks=tasks)


def decide_rights(deps: Deps, state: RunState, reply: dict[str, Any] | None = None) -> RunState:
    """Decide each declared action (allow / ask / deny) and record it in the ledger, once
    (SPEC §2.4, §4, §5). Returns the indexes held for approval. ``reply``: the stored reply when
    the caller has read it already."""
    ref = _need_run(state)
    run = _timing(deps, state, ref)
    reply = reply if reply is not None else deps.rundata.get(ref.run_id, "reply")
    if reply is None:
        raise RunStateInvalid("no model reply stored for the run")
    if not reply["tool_calls"]:  # a plain reply declares nothing: no policy, room or ledger to read
        if reply.get("truncated"):
            deps.ledger.update_run(ref.run_id, {"actions_over_limit": 0, "reply_truncated": True,
                                                "updated_at": _iso(deps)})
        return state.model_copy(update={"rights": RightsStep(held=[], held_count=0, actions=0, over_limit=0),
                                        "budget": budget(deps, run)})
    recorded = {a.index: a for a in deps.ledger.actions(ref.run_id)}
    facts = _facts(deps, state, ref)
    # The rights rest on the agent's company (read consistently at claim) and its company's
    # policy, read now, consistently.
    agent = Agent(id=ref.agent_id, company=facts.company, provider=facts.provider, model=facts.model)
    company = deps.room.get_company(agent.company)
    records, over = rights.decide_all(reply["tool_calls"], agent, company.rights if company else None,
                                      _room_view(deps, ref.room_id, reply["tool_calls"], facts.agents))
    final: list[ActionRecord] = []
    for rec in records:
        if rec.index not in recorded:
            deps.ledger.record_action(ref.run_id, rec)
            recorded[rec.index] = rec
        final.append(recorded[rec.index])
    if over or reply.get("truncated"):
        deps.ledger.update_run(ref.run_id, {"actions_over_limit": over, "reply_truncated": bool(reply.get("truncated")),
                                            "updated_at": _iso(deps)})
    held = [r.index for r in final if r.decision == "ask"]
    return state.model_copy(update={"rights": RightsStep(held=held, held_count=len(held), actions=len(final),
                                                         over_limit=over),
                                    "budget": budget(deps, run)})


# ----------------------------------------------------------------------------- 5. post the reply
def compose_reply(text: str, actions: list[ActionRecord], over_limit: int, truncated: bool) -> str:
    """The reply text plus notes on held and denied actions (kind and target, never quoted text)."""
    notes = []
    for a in actions:
        if a.decision == "ask":
            notes.append(f"⏸ held for approval: {rights.describe(a)}")
        elif a.decision == "deny":
            notes.append(f"✗ denied: {rights.describe(a)} ({a.reason})")
    if over_limit:
        notes.append(f"✗ denied: {over_limit} more action(s) over the limit of 25")
    if truncated:
        notes.append("(reply truncated to 32 KiB)")
    return text.rstrip() + ("\n\n" + "\n".join(notes) if notes else "")


def post_reply(deps: Deps, state: RunState, reply: dict[str, Any] | None = None) -> RunState:
    """Post the reply, the run's first write to the room (SPEC §2.5). Its id derives from the
    run id; it wakes only the agents it @mentions."""
    ref = _need_run(state)
    run = _timing(deps, state, ref)
    reply = reply if reply is not None else deps.rundata.get(ref.run_id, "reply")
    if reply is None:
        raise RunStateInvalid("no model reply stored for the run")
    step = state.rights
    actions = [] if step is not None and step.actions == 0 else deps.ledger.actions(ref.run_id)
    over = step.over_limit if step is not None and step.over_limit is not None else \
        _load_run(deps, ref).actions_over_limit
    facts = _facts(deps, state, ref)
    if facts.agents is None or state.facts is None:  # a state from before the facts were carried
        room = deps.room.get_room(ref.room_id)
        if room is None:
            raise RunStateInvalid("room missing")
        facts = facts.model_copy(update={"hop_limit": room.hop_limit, "agents": deps.room.room_agents(ref.room_id)})
    text = compose_reply(reply["text"], actions, over, bool(reply.get("truncated")))
    msg_id = ids.reply_message_id(ref.run_id)
    mentioned = wake_rules.mentions(reply["text"], list(facts.agents or {}))
    wakes, notices = wake_rules.run_wakes(run_id=ref.run_id, room_id=ref.room_id, step="reply",
                                          run_agent=ref.agent_id, run_hop=ref.hop,
                                          hop_limit=_hop_limit_of(deps, facts.hop_limit),
                                          targets=[(a, "message", msg_id, None) for a in mentioned])
    msg = Message(id=msg_id, room_id=ref.room_id, author=Author(kind="agent", id=ref.agent_id, company=facts.company),
                  text=text, mentions=mentioned, kind="reply", run_id=ref.run_id, created_at=_iso(deps))
    deps.room.put_message(msg, wakes)
    for notice in notices:
        deps.room.put_message(notice)
    # The reply's id derives from the run: the final ledger write records it (no write here).
    return state.model_copy(update={"budget": budget(deps, run)})


# ----------------------------------------------------------------------------- 6. held actions
def request_approval(deps: Deps, run_id: str, index: int, task_token: str) -> None:
    """Record the approval request of held action ``index`` with its task token, visible to the
    owning company only; the run parks until SendTaskSuccess/SendTaskFailure (SPEC §2.6)."""
    from quayutec.models import ApprovalRequest

    run = deps.ledger.get_run(run_id)
    if run is None:
        raise RunStateInvalid(f"run {run_id} has no ledger entry")
    action = next((a for a in deps.ledger.actions(run_id) if a.index == index), None)
    if action is None or action.decision != "ask":
        raise RunStateInvalid(f"action {index} of run {run_id} is not held for approval")
    approval = ApprovalRequest(id=f"{run_id}:{index}", room_id=run.room_id, run_id=run_id, index=index,
                               agent_id=run.agent_id, company=run.company, summary=rights.describe(action),
                               created_at=_iso(deps))
    if deps.room.put_approval(approval, task_token) is approval:  # recorded now, not a retry
        metrics.add_metric(name="ApprovalRequested", unit=MetricUnit.Count, value=1)
    fields: dict[str, Any] = {"status": "waiting_approval", "updated_at": _iso(deps)}
    if run.parked_since is None:
        fields["parked_since"] = _iso(deps)
    deps.ledger.update_run(run_id, fields)


# ----------------------------------------------------------------------------- 7. write
def _write_action(deps: Deps, run: RunRecord, agent_author: Author, a: ActionRecord) -> tuple[str, str, list[tuple]]:
    """Write one allowed/approved action, keyed from (run, index). Returns (outcome, note,
    wake targets)."""
    now = _iso(deps)
    f = a.fields
    if a.kind == "remember":
        line = MemoryLine(id=ids.action_write_id(run.run_id, a.index, "mem"), room_id=run.room_id, text=f["text"],
                          visibility=f["visibility"], company=run.company, author=agent_author, run_id=run.run_id,
                          created_at=now)
        deps.room.put_memory(line)
        return "written", "", []
    if a.kind == "create_task":
        task_id = ids.action_write_id(run.run_id, a.index, "task")
        task = Task(id=task_id, room_id=run.room_id, title=f["title"], body=f["body"], to=f["to"],
                    created_by=agent_author, created_at=now, updated_at=now)
        event = TaskEvent(id=ids.action_write_id(run.run_id, a.index, "tev"), room_id=run.room_id, task_id=task_id,
                          kind="created", text=f["title"], by=agent_author, run_id=run.run_id, created_at=now)
        deps.room.create_task(task, event)
        return "written", f"task {task_id}", [(f["to"], "task_event", event.id, task_id)]
    task = deps.room.get_task(run.room_id, f["task"])
    if task is None:
        return "not_reached", "task not found", []
    kind = "update" if a.kind == "update_task" else "close"
    event = TaskEvent(id=ids.action_write_id(run.run_id, a.index, "tev"), room_id=run.room_id, task_id=task.id,
                      kind=kind, text=f["note"] if kind == "update" else f["result"], by=agent_author,
                      run_id=run.run_id, created_at=now)
    result = deps.room.add_task_event(event)
    if result == "task_closed":
        return "not_reached", "the task was closed before the write", []
    return "written", "", _task_event_targets(task, event.id)


def apply_actions(deps: Deps, state: RunState) -> RunState:
    """Write the allowed and approved actions in declared order, then the run's wakes, after all
    writes have landed (SPEC §2.7, §3). Rejected / expired actions are recorded, not written."""
    ref = _need_run(state)
    step = state.rights
    if step is not None and step.actions == 0 and state.facts is not None:  # nothing declared: nothing to write
        return state.model_copy(update={"budget": budget(deps, _Started(ref.run_id, state.facts.started_at))})
    run = _load_run(deps, ref)
    approvals = {o.index: o.outcome for o in state.approvals or []}
    agent_author = Author(kind="agent", id=run.agent_id, company=run.company)
    targets: list[tuple] = []
    if run.parked_since:  # the run is back from its approvals: parked time stops counting
        metrics.add_metric(name="ApprovalClosed", unit=MetricUnit.Count, value=len(approvals))
        parked = (deps.clock() - parse_iso(run.parked_since)).total_seconds()
        deps.ledger.update_run(ref.run_id, {"parked_s": run.parked_s + parked, "parked_since": None,
                                            "status": "running", "updated_at": _iso(deps)})
        run = _load_run(deps, ref)
    for a in deps.ledger.actions(ref.run_id):
        if a.decision == "deny":
            continue
        if a.decision == "ask":
            outcome = approvals.get(a.index)
            if outcome is None:
                continue
            # The run's side settles the approval row with the outcome Step Functions gave it
            # (SPEC §2.6): also when the API's row update was lost after its answer landed, or a
            # retry found the token used and left the row deciding.
            deps.room.set_approval_status(run.room_id, run.run_id, a.index, outcome, None,
                                          from_statuses=tuple(s for s in APPROVAL_STATUSES if s != outcome))
            if outcome != "approved":
                deps.ledger.set_action_outcome(ref.run_id, a.index, outcome, approval=outcome)
                continue
        if a.outcome in ("written", "not_reached"):
            # written by an earlier attempt of this step: its wake targets still count
            if a.outcome == "written":
                targets += _targets_of_written(deps, run, a)
            continue
        outcome, note, wake_targets = _write_action(deps, run, agent_author, a)
        targets += wake_targets
        deps.ledger.set_action_outcome(ref.run_id, a.index, outcome, note,
                                       approval="approved" if a.decision == "ask" else None)
    wakes, notices = wake_rules.run_wakes(run_id=ref.run_id, room_id=ref.room_id, step="actions",
                                          run_agent=run.agent_id, run_hop=ref.hop,
                                          hop_limit=hop_limit(deps, deps.room.get_room(ref.room_id)),
                                          targets=targets)
    for notice in notices:
        deps.room.put_message(notice)
    if wakes:
        deps.room.put_outbox(ref.room_id, f"{ref.run_id}#actions", ref.run_id, wakes)
    return state.model_copy(update={"budget": budget(deps, run)})


def _task_event_targets(task: Task, event_id: str) -> list[tuple]:
    """Who an update/close of ``task`` wakes: its assignee and the agent that created it (the
    run's own agent is dropped later, SPEC §3)."""
    return [(agent_id, "task_event", event_id, task.id) for agent_id in wake_rules.task_watchers(task)]


def _targets_of_written(deps: Deps, run: RunRecord, a: ActionRecord) -> list[tuple]:
    event_id = ids.action_write_id(run.run_id, a.index, "tev")
    if a.kind == "create_task":
        return [(a.fields["to"], "task_event", event_id, ids.action_write_id(run.run_id, a.index, "task"))]
    if a.kind in ("update_task", "close_task"):
        task = deps.room.get_task(run.room_id, a.fields["task"])
        if task:
            return _task_event_targets(task, event_id)
    return []


# ----------------------------------------------------------------------------- 8. record
def finish(deps: Deps, state: RunState, states: int = 1) -> RunState:
    """Record ``completed`` (SPEC §2.8), with the cost line: the state's counters, this
    invocation's so far, ``states`` entered for it and this final write (SPEC §10)."""
    ref = _need_run(state)
    cost = cost_line.so_far(state.cost, states, writes_to_come=cost_line.FINAL_WRITE)
    deps.ledger.finish_run(ref.run_id, "completed", reply_message_id=ids.reply_message_id(ref.run_id),
                           cost=cost.model_dump(mode="json"))
    metrics.add_metric(name="RunCompleted", unit=MetricUnit.Count, value=1)
    return state


# ----------------------------------------------------------------------------- merged phases
# A Lambda per phase of the state machine, fewer phases (issue 13): adjacent phases whose order is
# kept inside one invocation. Each part runs in its own fault scope, so the crash matrix keeps
# every point of the parts (faults.subphase) and gains the merged invocation's own.
def claim_and_read(deps: Deps, state: RunState, run_id: str, execution_arn: str,
                   execution_start: str | None = None) -> RunState:
    """Claim (SPEC §2.1), then read the room (§2.2). Raises AlreadyClaimed when another
    execution holds the claim: the ASL catches it into a Succeed state, nothing done."""
    with faults.subphase("claim"):
        agent = deps.room.get_agent(state.wake.agent_id) if state.wake is not None else None
        claimed = claim(deps, state, run_id, execution_arn, execution_start, agent)
    if claimed.claim is None or not claimed.claim.claimed:
        raise AlreadyClaimed(f"wake {state.wake.wake_id if state.wake else '?'} is claimed by another execution")
    with faults.subphase("load_context"):  # the agent read once, for the claim and the context
        return load_context(deps, claimed, agent)


def decide_and_post(deps: Deps, state: RunState) -> RunState:
    """Decide the rights (SPEC §2.4), then post the reply (§2.5), reading the stored reply once.
    A reply that declares no action has nothing to hold or write: the run's final status is
    recorded here too (§2.8) and ``finished`` tells the ASL to end."""
    ref = _need_run(state)
    reply = deps.rundata.get(ref.run_id, "reply")
    if reply is None:
        raise RunStateInvalid("no model reply stored for the run")
    with faults.subphase("decide_rights"):
        state = decide_rights(deps, state, reply)
    with faults.subphase("post_reply"):
        state = post_reply(deps, state, reply)
    if state.rights is not None and state.rights.actions == 0:
        with faults.subphase("finish"):
            state = finish(deps, state, states=3)  # DecideAndPost, Finished?, Done
        return state.model_copy(update={"finished": True})
    return state.model_copy(update={"finished": False})


def apply_and_finish(deps: Deps, state: RunState) -> RunState:
    """Write the allowed and approved actions and the run's wakes (SPEC §2.7), then record the
    final status (§2.8)."""
    with faults.subphase("apply_actions"):
        state = apply_actions(deps, state)
    with faults.subphase("finish"):
        return finish(deps, state, states=apply_and_finish_states(state))


def apply_and_finish_states(state: RunState) -> int:
    """States entered from Finished? on: ApplyAndFinish, the HeldActions Map and, per held
    action, its RequestApproval and outcome states (the cost line's estimate)."""
    return 2 + 2 * len(state.approvals or [])


#: RecordFailure and RunFailed (the failed phase's own state is not counted: its state is lost).
RECORD_FAILURE_STATES = 2


def _error_of(error: dict[str, Any] | None) -> tuple[str, str]:
    if not error:
        return "Unknown", ""
    name = str(error.get("Error", "Unknown"))
    cause = error.get("Cause") or ""
    try:
        parsed = json.loads(cause)
        if isinstance(parsed, dict):
            cause = parsed.get("errorMessage", cause)
    except (TypeError, ValueError):
        pass
    return name, str(cause)


def final_status_for(deps: Deps, run: RunRecord, error_name: str) -> str:
    """``timed_out``, or ``failed_after_reply`` when the reply is in the room, else
    ``failed_before_reply`` (SPEC §2.1). The room itself is asked, not the ledger's note."""
    if error_name in ("RunTimedOut", "States.Timeout", "TIMED_OUT"):
        return "timed_out"
    if deps.room.get_message(run.room_id, ids.reply_message_id(run.run_id)) is not None:
        return "failed_after_reply"
    return "failed_before_reply"


def _write_landed(deps: Deps, run: RunRecord, a: ActionRecord) -> bool:
    """Whether the room holds the write of action ``a`` (its id derives from run and index)."""
    if a.decision == "deny" or not a.fields:
        return False
    if a.kind == "remember":
        return deps.room.get_memory(run.room_id, a.fields["visibility"], run.company,
                                    ids.action_write_id(run.run_id, a.index, "mem")) is not None
    if a.kind == "create_task":
        return deps.room.get_task(run.room_id, ids.action_write_id(run.run_id, a.index, "task")) is not None
    return deps.room.get_task_event(run.room_id, str(a.fields.get("task", "")),
                                    ids.action_write_id(run.run_id, a.index, "tev")) is not None


def close_failed_run(deps: Deps, run_id: str, execution_arn: str | None, error_name: str, message: str,
                     cost: dict[str, Any] | None = None) -> str | None:
    """Give a claimed run its final failure status, once. Returns the status set, or ``None`` when
    there is no claimed run of this execution or it already has a final status."""
    run = deps.ledger.get_run(run_id)
    if run is None or run.status in FINAL_STATUSES:
        return None
    if execution_arn and run.execution_arn != execution_arn:
        return None
    status = final_status_for(deps, run, error_name)
    for q in deps.ledger.model_requests(run_id):
        if q.outcome == "pending":  # sent, but the run ended before its outcome was recorded
            _finish_request(deps, run_id, q.model_copy(update={
                "outcome": "lost", "category": "lost", "finished_at": _iso(deps),
                "decision": f"outcome unknown: the run ended ({error_name}) first"}))
    not_done = []
    for a in deps.ledger.actions(run_id):
        if a.outcome in ("pending", "held") or (a.decision == "ask" and a.outcome not in ("written", "rejected", "expired", "not_reached")):
            if _write_landed(deps, run, a):  # written, then the step failed before recording it
                deps.ledger.set_action_outcome(run_id, a.index, "written", "written before the run ended",
                                               approval="approved" if a.decision == "ask" else None)
                continue
            deps.ledger.set_action_outcome(run_id, a.index, "not_reached", "the run ended first")
            not_done.append(f"action {a.index} {rights.describe(a)}")
        if a.decision == "ask":  # an approval request still pending can no longer be answered
            if deps.room.set_approval_status(run.room_id, run_id, a.index, "expired", None,
                                             from_statuses=("pending", "deciding")):
                metrics.add_metric(name="ApprovalClosed", unit=MetricUnit.Count, value=1)
    if status == "failed_before_reply" or (  # a timed-out run says whether its reply got out
            status == "timed_out" and deps.room.get_message(run.room_id, ids.reply_message_id(run_id)) is None):
        not_done.insert(0, "reply not posted")
    reply_id = ids.reply_message_id(run_id)
    posted = status == "failed_after_reply" or (
        status == "timed_out" and deps.room.get_message(run.room_id, reply_id) is not None)
    if deps.ledger.finish_run(run_id, status, error_class=error_name, error_message=message, not_done=not_done,
                              reply_message_id=reply_id if posted else None, cost=cost):
        metrics.add_metric(name=f"Run_{status}", unit=MetricUnit.Count, value=1)
        return status
    return None


def record_failure(deps: Deps, state: RunState, run_id: str, execution_arn: str | None) -> RunState:
    """The Catch target of every phase: write the ledger's final status (SPEC §2.1)."""
    name, message = _error_of(state.error)
    cost = cost_line.so_far(state.cost, RECORD_FAILURE_STATES, writes_to_come=cost_line.FINAL_WRITE)
    close_failed_run(deps, run_id, execution_arn, name, message, cost=cost.model_dump(mode="json"))
    return state


# ----------------------------------------------------------------------------- reconcile
def reconcile(deps: Deps, detail: dict[str, Any]) -> str | None:
    """Handle a Step Functions "Execution Status Change" event (FAILED / TIMED_OUT / ABORTED):
    a claimed run whose execution ended outside any Catch gets its final status."""
    status = detail.get("status")
    if status not in ("FAILED", "TIMED_OUT", "ABORTED"):
        return None
    name = detail.get("name") or str(detail.get("executionArn", "")).rsplit(":", 1)[-1]
    error = detail.get("error") or f"Execution{str(status).title().replace('_', '')}"
    if status == "TIMED_OUT":
        error = "TIMED_OUT"
    message = detail.get("cause") or f"execution {status.lower()} outside the state machine's Catch"
    return close_failed_run(deps, name, detail.get("executionArn"), str(error), str(message))

