"""DecideAndPost (design §2.4, §2.5): decide the company's rights over the declared actions, then post
the reply; a reply that declares nothing also records the run's final status (§2.8).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from quayutec.cost import line as cost_line
from quayutec.deps import Deps
from quayutec.errors import RunStopped
from quayutec.logic import ids, rights
from quayutec.logic import wakes as wake_rules
from quayutec.logic.phases.common import (
    APPLY_AND_FINISH,
    _hop_limit_of,
    _iso,
    _need_facts,
    _need_rights,
    _need_run,
    _timing,
    budget,
    context_fit,
    end_turn,
    finish,
    logger,
    metrics,
    post_chain_notice,
    record_stopped,
    run_guard,
    stored_reply,
    turn_to_come,
)
from quayutec.models import (
    MAX_ACTIONS,
    ActionRecord,
    Agent,
    Author,
    Message,
    RightsStep,
    RunState,
)
from quayutec.seams import part

#: The distinct @refs of a reply that are resolved against the room (its first ones, in text
#: order): with the declared actions' ``to`` (at most :data:`MAX_ACTIONS`) at most three reads of
#: 99 keys, whatever the room's size (docs/design.md §2: the run state carries no room roster).
MAX_NAMED_REFS = 3 * 99 - MAX_ACTIONS


def named_refs(reply: dict[str, Any]) -> list[str]:
    """The agent refs a reply names: its first :data:`MAX_NAMED_REFS` distinct @mentions and the
    ``to`` of each declared action (the first :data:`MAX_ACTIONS`), in that order."""
    mentioned = list(dict.fromkeys(wake_rules.MENTION.findall(reply.get("text") or "")))[:MAX_NAMED_REFS]
    targets = [
        c["input"]["to"]
        for c in (reply.get("tool_calls") or [])[:MAX_ACTIONS]
        if isinstance(c.get("input"), dict)
        and isinstance(c["input"].get("to"), str)
        and 0 < len(c["input"]["to"]) <= 256
    ]
    return list(dict.fromkeys(mentioned + targets))


def named_agents(deps: Deps, room_id: str, reply: dict[str, Any]) -> dict[str, str]:
    """The room's agents the reply names → their companies (:func:`named_refs`): no read when it
    names none, else one consistent read (:meth:`quayutec.dal.store.RoomStore.named_room_agents`).
    Resolving a ref among these is resolving it among all the room's agents: a room holds one
    agent per name."""
    refs = named_refs(reply)
    return deps.room.named_room_agents(room_id, refs) if refs else {}


# ----------------------------------------------------------------------------- 4. rights
def _room_view(deps: Deps, room_id: str, tool_calls: list[dict[str, Any]], agents: dict[str, str]) -> rights.RoomView:
    """The room as the rights check needs it: the agents the reply names (:func:`named_agents`),
    and only the tasks the declared actions name (at most 25 point reads: the cost does not grow
    with the room's history)."""
    agent_company = dict(agents)
    named = {
        str(c["input"]["task"])
        for c in tool_calls[:MAX_ACTIONS]
        if isinstance(c.get("input"), dict)
        and isinstance(c["input"].get("task"), str)
        and 0 < len(c["input"]["task"]) <= 256
    }
    tasks = {t.id: t for t in (deps.room.get_task(room_id, task_id) for task_id in sorted(named)) if t}
    return rights.RoomView(agent_company=agent_company, tasks=tasks)


def decide_rights(
    deps: Deps, state: RunState, reply: dict[str, Any] | None = None, agents: dict[str, str] | None = None
) -> RunState:
    """Decide each declared action (allow / ask / deny) and record it in the ledger, once
    (design §2.4, §4, §5). Returns the indexes held for approval. ``reply``: the stored reply when
    the caller has read it already; ``agents``: :func:`named_agents` of it, when read already."""
    ref = _need_run(state)
    run = _timing(state, ref)
    reply = reply if reply is not None else stored_reply(deps, state, ref)
    if not reply["tool_calls"]:  # a plain reply declares nothing: no policy, room or ledger to read
        if reply["truncated"]:
            deps.ledger.update_run(
                ref.run_id, {"actions_over_limit": 0, "reply_truncated": True, "updated_at": _iso(deps)}
            )
        return state.model_copy(
            update={
                "rights": RightsStep(held=[], held_count=0, actions=0, over_limit=0),
                "budget": budget(deps, run, APPLY_AND_FINISH),
            }
        )
    recorded = {a.index: a for a in deps.ledger.actions(ref.run_id)}
    facts = _need_facts(state)
    # The rights rest on the agent's company (read consistently at claim) and its company's
    # policy, read now, consistently.
    agent = Agent(id=ref.agent_id, company=facts.company, provider=facts.provider, model=facts.model)
    company = deps.room.get_company(agent.company)
    records, over = rights.decide_all(
        reply["tool_calls"],
        agent,
        company.rights if company else None,
        _room_view(
            deps,
            ref.room_id,
            reply["tool_calls"],
            agents if agents is not None else named_agents(deps, ref.room_id, reply),
        ),
    )
    final: list[ActionRecord] = []
    for rec in records:
        if rec.index not in recorded:
            deps.ledger.record_action(ref.run_id, rec)
            recorded[rec.index] = rec
        final.append(recorded[rec.index])
    if over or reply["truncated"]:
        deps.ledger.update_run(
            ref.run_id,
            {"actions_over_limit": over, "reply_truncated": reply["truncated"], "updated_at": _iso(deps)},
        )
    held = [r.index for r in final if r.decision == "ask"]
    return state.model_copy(
        update={
            "rights": RightsStep(held=held, held_count=len(held), actions=len(final), over_limit=over),
            "budget": budget(deps, run, APPLY_AND_FINISH),
        }
    )


# ----------------------------------------------------------------------------- 5. post the reply
def compose_reply(text: str, actions: list[ActionRecord], over_limit: int, truncated: bool, company: str) -> str:
    """The reply text plus notes on held and denied actions (kind and target, never quoted text).
    A denial by the policy of ``company`` (the agent's) says so, not which rule: the policy is
    the company's own (its page answers 404 to others); the rule stays in its ledger (design §2.5)."""
    notes = []
    for a in actions:
        if a.decision == "ask":
            notes.append(f"⏸ held for approval: {rights.describe(a)}")
        elif a.decision == "deny":
            why = f"by {company}'s policy" if rights.by_policy(a) else a.reason
            notes.append(f"✗ denied: {rights.describe(a)} ({why})")
    if over_limit:
        notes.append(f"✗ denied: {over_limit} more action(s) over the limit of 25")
    if truncated:
        notes.append("(reply truncated to 32 KiB)")
    return text.rstrip() + ("\n\n" + "\n".join(notes) if notes else "")


def post_reply(
    deps: Deps,
    state: RunState,
    reply: dict[str, Any] | None = None,
    finish_states: int | None = None,
    agents: dict[str, str] | None = None,
) -> RunState:
    """Post the reply, the run's first write to the room (design §2.5). Its id derives from the
    run id; it wakes only the agents it @mentions. ``finish_states``: the reply declared no action,
    so the run ends here — its final ledger write (status ``completed``, the cost line with
    ``finish_states`` states for this end, design §2.8, §10) lands in the same transaction as the
    reply and its notices."""
    ref = _need_run(state)
    run = _timing(state, ref)
    facts = _need_facts(state)
    reply = reply if reply is not None else stored_reply(deps, state, ref)
    step = _need_rights(state)
    actions = [] if step.actions == 0 else deps.ledger.actions(ref.run_id)
    text = compose_reply(reply["text"], actions, step.over_limit, reply["truncated"], facts.company)
    msg_id = ids.reply_message_id(ref.run_id)
    agents = agents if agents is not None else named_agents(deps, ref.room_id, reply)
    mentioned = wake_rules.mentions(reply["text"], list(agents))
    wakes, notices = wake_rules.run_wakes(
        run_id=ref.run_id,
        room_id=ref.room_id,
        step="reply",
        run_agent=ref.agent_id,
        run_hop=ref.hop,
        hop_limit=_hop_limit_of(deps, facts.hop_limit),
        targets=[(a, "message", msg_id, None) for a in mentioned],
        chain_id=ref.chain_id,
        run_company=facts.company,
        chain_full=facts.chain_full,
    )
    msg = Message(
        id=msg_id,
        room_id=ref.room_id,
        author=Author(kind="agent", id=ref.agent_id, company=facts.company),
        text=text,
        mentions=mentioned,
        kind="reply",
        run_id=ref.run_id,
        chain_id=ref.chain_id,
        created_at=_iso(deps),
    )
    guard = run_guard(deps, ref, facts)
    if finish_states is not None and len(notices) <= MAX_NOTICES_IN_TRANSACTION:
        _post_and_finish(deps, state, msg, wakes, notices, finish_states, guard)
        end_turn(deps, state)  # after the final write (design §12.3)
        # The reply is the run's first write to the room; a full chain's notice comes after it
        # (a retried step writes it once; a crash between them leaves the chain without it).
        post_chain_notice(deps, ref, facts, mentioned)
        return state.model_copy(update={"budget": budget(deps, run, APPLY_AND_FINISH)})
    deps.room.put_message(msg, wakes, guard)
    for notice in notices:
        deps.room.put_message(notice)
    post_chain_notice(deps, ref, facts, mentioned)
    if finish_states is not None:  # too many notices for one transaction: the final write after them
        finish(deps, state, states=finish_states)
    # The reply's id derives from the run: the final ledger write records it (no write here).
    return state.model_copy(update={"budget": budget(deps, run, APPLY_AND_FINISH)})


#: A transaction holds at most 100 entries (TransactWriteItems, DynamoDB API reference): the
#: reply, its hop-limit notices (one per agent it could not wake), the run's final write and
#: the two entries of its stop guard.
MAX_NOTICES_IN_TRANSACTION = 96


def _post_and_finish(
    deps: Deps, state: RunState, msg: Message, wakes: list[Any], notices: list[Message], states: int, guard: Any
) -> None:
    """The reply, its notices and the run's final write, in one transaction (design §2.5, §2.8). A
    retried step finds what an earlier attempt landed: all of it (nothing to do), or the reply
    without the final write (then it writes that alone); a run that got a final status meanwhile
    (closed by RecordFailure or the reconciler) gets no reply now."""
    ref = _need_run(state)
    cost = cost_line.so_far(
        state.cost, states, writes_to_come=cost_line.plus(cost_line.FINAL_TRANSACTION, turn_to_come(state))
    ).model_dump(mode="json")
    final = deps.ledger.finish_run_item(
        ref.run_id, "completed", reply_message_id=msg.id, cost=cost, context=context_fit(state)
    )
    failed = deps.room.put_messages_with([(msg, wakes), *[(n, None) for n in notices]], final, guard)
    if failed is None:
        metrics.add_metric(name="RunCompleted", unit=MetricUnit.Count, value=1)
        return
    existed, run_final = failed
    if run_final:
        logger.info("run has a final status already: reply not posted now", extra={"run_id": ref.run_id})
        return
    # An earlier attempt posted the reply (and maybe notices) but not the final write.
    for notice, landed in zip(notices, existed[1 : 1 + len(notices)], strict=True):
        if not landed:
            deps.room.put_message(notice)
    finish(deps, state, states=states)  # its cost line counts the cancelled transaction too


def decide_and_post(deps: Deps, state: RunState) -> RunState:
    """Decide the rights (design §2.4), then post the reply (§2.5), reading the stored reply once.
    A reply that declares no action has nothing to hold or write: the run's final status is
    recorded with the reply, in one transaction (§2.8), and ``finished`` tells the ASL to end.
    A run whose agent was paused or whose chain was stopped since its claim posts no reply: its
    final status ``stopped`` is recorded and ``finished`` ends it too (design §12.2)."""
    ref = _need_run(state)
    reply = stored_reply(deps, state, ref)
    agents = named_agents(deps, ref.room_id, reply)  # one read, for the rights and the mentions
    with part("decide_rights"):
        state = decide_rights(deps, state, reply, agents)
    plain = _need_rights(state).actions == 0
    with part("post_reply"):  # plain: DecideAndPost, Finished? and Done are this end's states
        try:
            state = post_reply(deps, state, reply, finish_states=3 if plain else None, agents=agents)
        except RunStopped:  # paused or stopped since the claim: no reply (design §12.2)
            return record_stopped(deps, state, reply_posted=False, states=3)
    return state.model_copy(update={"finished": plain})
