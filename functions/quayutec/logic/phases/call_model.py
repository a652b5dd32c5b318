"""CallModel (design §2.3): the next model request of the run, at most 3 in all, each recorded in the
ledger before it is sent. The only phase that reads a company's key, or assumes its Bedrock role
(a ``bedrock`` agent with ``role_arn``: STS ``AssumeRole`` with the company's external id, the
session kept and refreshed by the adapter, docs/design.md §5).

The policy it applies (the cap, which failures are retried, the wait before the next request) is
:mod:`quayutec.providers.call_policy`; this phase records the requests, calls the adapter and
stores the outcome.
"""

from __future__ import annotations

from typing import Any

from quayutec.cost import line as cost_line
from quayutec.dal.ledger import BudgetRefused
from quayutec.deps import Deps
from quayutec.errors import BudgetExhausted, ModelCallFailed, RunStateInvalid, RunStopped, RunTimedOut, TransientError
from quayutec.logic import prompt
from quayutec.logic.phases import spend
from quayutec.logic.phases.common import (
    CALL_MODEL,
    DECIDE_AND_POST,
    MAX_ERROR_BODY,
    _finish_request,
    _iso,
    _need_facts,
    _need_run,
    _timing,
    budget,
    record_stopped,
    remaining_seconds,
    run_guard,
    task_budget,
)
from quayutec.models import (
    MAX_REPLY_BYTES,
    Agent,
    ModelRequestRecord,
    ModelStep,
    RunState,
)


# ----------------------------------------------------------------------------- 3. call the model
def call_model(deps: Deps, state: RunState) -> RunState:
    """Make the next model request of the run, at most 3 in all (1 for an owner's base URL).

    Each request is recorded in the ledger before it is sent; the cap counts recorded requests,
    so a retried step never makes a 4th. A reply already stored under the run is reused.
    An agent under its company's role reads no key; an STS refusal of the role is a final
    ``role_denied`` failure whose reason names the role, STS throttling a retryable ``rate_limit``.
    Returns ``model.outcome`` ``reply`` or ``wait`` (with whole ``wait_seconds`` for the ASL's
    Wait state); ``not_started`` for a wake the claim did not start (design §2.1, §12.1: passed
    through with no call, so the state machine ends it without a state of its own for every
    run); ``turn`` for a run that waits for its company's turn (§12.3, passed through the same way).
    Raises ModelCallFailed (final error, cap, retry-after > 20 s) or RunTimedOut.
    Source: design §2.3.
    """
    if state.claim is not None and not state.claim.claimed:
        return state.model_copy(update={"model": ModelStep(outcome="not_started", requests=0)})
    if state.turn is not None:  # no turn of its company yet: on to WaitForTurn (design §12.3)
        return state.model_copy(update={"model": ModelStep(outcome="turn", requests=0)})
    from quayutec.providers import ModelCall, ProviderError, call_policy, load_sdk, roles
    from quayutec.providers.keys import scrub, scrub_failure, scrub_reply

    entered = deps.clock()
    ref = _need_run(state)
    run = _timing(state, ref)
    facts = _need_facts(state)
    agent: Any = Agent(id=ref.agent_id, company=facts.company, provider=facts.provider, model=facts.model)
    if facts.owner_url or facts.role:  # the owner's address, the company's role: read where used, not carried
        agent = deps.room.get_agent(ref.agent_id)
        if agent is None:
            raise RunStateInvalid(f"agent {ref.agent_id} is not registered")
    owner_url = agent.base_url is not None
    cap = call_policy.request_cap(owner_url)
    # The request the state expects next (the state counts the requests made before a Wait). Its
    # record is a conditional put: when an earlier attempt of this step recorded it already, the
    # run's requests are read and the reply reused or the lost request counted (below).
    n = (state.model.requests if state.model is not None else 0) + 1
    if n > cap:
        raise ModelCallFailed(f"request cap reached: {n - 1} of {cap} requests made, no reply")
    ctx = deps.rundata.get(ref.run_id, "context")
    if ctx is None:
        raise RunStateInvalid("context missing: ClaimAndRead did not store it")
    # Before recording: no key, no request. A bedrock agent with its company's role reads no key:
    # the role is assumed (STS) by the adapter, its session kept across calls (docs/design.md §5).
    role = agent.role_arn if agent.provider == "bedrock" else None
    if role and not agent.external_id:
        raise ModelCallFailed(f"agent {agent.id} has a role but no external id: register it again")
    api_key = "" if role else deps.get_api_key(agent.company, agent.provider)
    load_sdk(agent.provider)  # a cold SDK import happens before the time left is measured, not in it
    # The client timeout: MODEL_TIMEOUT_SECONDS, but never past the run's active time left, and
    # early enough to record the outcome before this Task's own timeout (the budget the ASL
    # handed it, whole seconds, counted from this step's start).
    left = remaining_seconds(deps, run)
    task_left = (state.budget.remaining_s if state.budget else left) - (deps.clock() - entered).total_seconds()
    timeout_s = min(deps.settings.model_timeout_s, left, task_left - 1)
    if timeout_s < 1:
        raise RunTimedOut(
            f"no active time left for a model request ({max(0.0, left):.1f} s of {deps.settings.run_time_limit_s} s)"
        )
    record = ModelRequestRecord(n=n, sent_at=_iso(deps), provider=agent.provider, model=agent.model, agent_id=agent.id)
    system, user = prompt.system_prompt(ctx), prompt.user_text(ctx)
    max_tokens = ModelCall.model_fields["max_tokens"].default
    try:  # the request's reserve against its company's budgets (design §12.4)
        reservation = spend.reserve(deps, agent.company, record, system + user, max_tokens, deps.clock(), ref.room_id)
    except spend.BudgetReached as reached:
        raise BudgetExhausted(spend.refuse(deps, ref, agent.company, reached.limit, deps.clock())) from None
    record = reservation.record
    guard = run_guard(deps, ref, facts)  # a stopped run sends no request (design §12.2)
    try:
        if not deps.ledger.record_request(ref.run_id, record, guard, reservation.counts):
            reused = _after_earlier_attempt(deps, state, ref, run)
            if reused is not None:
                return reused
            n = len(deps.ledger.model_requests(ref.run_id)) + 1
            if n > cap:
                raise ModelCallFailed(f"request cap reached: {n - 1} of {cap} requests made, no reply")
            record = record.model_copy(update={"n": n, "sent_at": _iso(deps)})
            if not deps.ledger.record_request(ref.run_id, record, guard, reservation.counts):
                raise ModelCallFailed(f"request {n} was recorded by another attempt")
    except BudgetRefused as refused:  # a concurrent request took the budget first
        lim = spend.refused_limit(reservation, refused)
        raise BudgetExhausted(spend.refuse(deps, ref, agent.company, lim, deps.clock())) from None
    except RunStopped:
        # CallModel and ModelOutcome? are this end's states, Stopped its last.
        stopped = record_stopped(deps, state, reply_posted=False, states=3)
        return stopped.model_copy(update={"model": ModelStep(outcome="stopped", requests=n - 1)})
    spend.post_notices(deps, ref, agent.company, reservation)  # 80 % / 100 % of a budget: once
    base_url = agent.base_url or {
        "anthropic": deps.settings.anthropic_base_url,
        "openai": deps.settings.openai_base_url,
        "bedrock": deps.settings.bedrock_endpoint_url,
    }.get(agent.provider)
    call = ModelCall(
        provider=agent.provider,
        model=agent.model,
        system=system,
        user_text=user,
        max_tokens=max_tokens,
        end_user_id=agent.id,
        api_key=api_key,
        **(
            {"role_arn": role, "external_id": agent.external_id, "role_session": roles.session_name(agent.id)}
            if role
            else {}
        ),
        base_url=base_url,
        owner_base_url=owner_url,
        timeout_s=timeout_s,
        allow_loopback=bool(owner_url and deps.allow_loopback_model_urls),
    )
    # Where the key and the model's answer meet: a model server (an owner's own, above all) is
    # sent the key and can echo it in its text, its tool calls' fields or its request id. Nothing
    # of the answer is stored before it is scrubbed of the key in every encoding (design §5).
    try:
        reply = scrub_reply(deps.provider()(call), api_key)
    except ProviderError as exc:
        f = scrub_failure(exc.failure, api_key)
        decision = call_policy.decide_next(f, n, owner_url)
        wait_s, why = (decision.wait_seconds if decision.retry else None), decision.reason
        if f.category == "role_denied":  # the run's reason says which role and what to check
            why = f"{why}: {f.message}"
        left = remaining_seconds(deps, run)
        out_of_time = call_policy.within_time_left(
            f, decision, time_left_s=left, timeout_s=timeout_s, full_timeout_s=deps.settings.model_timeout_s
        )
        if out_of_time:
            wait_s, why = None, out_of_time
        finished = record.model_copy(
            update={
                "outcome": "error",
                "status": f.status,
                "request_id": f.request_id,
                "error_type": f.error_type,
                "error_code": f.error_code,
                "category": f.category,
                "retryable": f.retryable,
                "wait_s": wait_s,
                "decision": why,
                "message": f.message[:1000],
                "body": f.body[:MAX_ERROR_BODY],
                "finished_at": _iso(deps),
            }
        )
        _finish_request(deps, ref.run_id, finished)
        if out_of_time:
            raise RunTimedOut(f"{f.category} ({f.status}): {why}") from None
        if wait_s is not None:  # the next Task's budget is what is left after the Wait
            return state.model_copy(
                update={
                    "model": ModelStep(outcome="wait", wait_seconds=wait_s, requests=n),
                    "budget": task_budget(left - wait_s, CALL_MODEL),
                }
            )
        raise ModelCallFailed(f"{f.category} ({f.status}): {why}") from None
    except TransientError:  # the step is retried as it is (the request stays recorded: it counts)
        raise
    except Exception as exc:  # noqa: BLE001 - not the provider layer's own error: its text may hold anything
        # An error the provider layer did not classify (an SDK or a bug of ours): the request may
        # have been sent, so it counts and ends the call (never retried: never twice first); its
        # text is scrubbed of the key in every encoding before the ledger, the logs or Step
        # Functions' history see it (design §5).
        text = scrub(f"{type(exc).__name__}: {exc}", api_key)[:1000]
        _finish_request(
            deps,
            ref.run_id,
            record.model_copy(
                update={
                    "outcome": "error",
                    "category": "unexpected",
                    "retryable": False,
                    "message": text,
                    "decision": "an error the provider layer did not classify: final",
                    "finished_at": _iso(deps),
                }
            ),
        )
        raise ModelCallFailed(f"unexpected error in the provider call: {text}") from None
    text = reply.text
    truncated = len(text.encode()) > MAX_REPLY_BYTES
    if truncated:
        text = text.encode()[:MAX_REPLY_BYTES].decode(errors="ignore")
    stored = {
        "text": text,
        "truncated": truncated,
        "request_id": reply.request_id,
        "tool_calls": [{"name": c.name, "input": c.input} for c in reply.tool_calls],
    }
    # The reply rides on the request's outcome write (one write: no outcome without its reply);
    # one too large for a ledger item goes to run data first (ReplyStore).
    _finish_request(
        deps,
        ref.run_id,
        record.model_copy(
            update={
                "outcome": "ok",
                "status": reply.status,
                "request_id": reply.request_id,
                "finished_at": _iso(deps),
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.output_tokens,
            }
        ),
        reply=stored,
    )
    return state.model_copy(
        update={"model": ModelStep(outcome="reply", requests=n), "budget": budget(deps, run, DECIDE_AND_POST)}
    )


def _after_earlier_attempt(deps: Deps, state: RunState, ref: Any, run: Any) -> RunState | None:
    """An earlier attempt of this step recorded the request this one meant to make: reuse the
    reply it stored (returns the next state), or count its requests still pending as lost
    (they may have been sent: they count against the cap) and return ``None``."""
    requests = deps.ledger.model_requests(ref.run_id)
    answered = [r for r in requests if r.outcome == "ok"]
    if answered:  # stored with its outcome, in one write: the reply is there
        # The attempt that read it left no state (it died, or its answer never reached Step
        # Functions), so its counts are lost: the reply's tokens are counted here, once.
        r = answered[-1]
        cost_line.count_tokens(r.provider, r.model, r.input_tokens, r.output_tokens)
        return state.model_copy(
            update={
                "model": ModelStep(outcome="reply", requests=answered[-1].n),
                "budget": budget(deps, run, DECIDE_AND_POST),
            }
        )
    for r in requests:
        if r.outcome == "pending":  # sent by an attempt that died before recording its outcome
            _finish_request(
                deps,
                ref.run_id,
                r.model_copy(
                    update={
                        "outcome": "lost",
                        "category": "lost",
                        "retryable": True,
                        "finished_at": _iso(deps),
                        "decision": "outcome unknown (the step died mid-request); counted against the cap",
                    }
                ),
            )
    return None
