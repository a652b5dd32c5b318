"""Deciding the rights over declared actions (design §4, §5).

Each tool call of the model's reply is validated (kind, fields, targets) and decided against the
owning company's policy: the most specific rule wins — per agent and kind, then
``cross_company`` (when the action targets another company), then ``actions``, then ``default``;
an absent policy allows. A malformed action is denied with a reason, never raised. Reasons name
fields and ids, never the model's text (it may quote company-only text); an id or kind the model
wrote is shown through :func:`shown` (bounded, line breaks and control characters escaped), so it
cannot add lines of its own to the reply's notes (design §2.5, §5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from quayutec.logic.ids import agent_name, name_key, resolve_agent
from quayutec.models import ACTION_MODELS, MAX_ACTIONS, ActionRecord, Agent, Decision, RightsPolicy, Task


@dataclass(frozen=True)
class RoomView:
    """What the rights check needs to know of the room: its agents (id → company) and tasks."""

    agent_company: dict[str, str]
    tasks: dict[str, Task]


def policy_keys_of(policy: RightsPolicy, agent_id: str) -> list[str]:
    """The keys of ``policy.agents`` that name agent ``agent_id``: its id, then its name, each in
    any letter case (:func:`quayutec.logic.ids.name_key`)."""
    by_key: dict[str, list[str]] = {}
    for key in policy.agents:
        by_key.setdefault(name_key(key), []).append(key)
    keys: list[str] = []
    for ref in dict.fromkeys((name_key(agent_id), name_key(agent_name(agent_id)))):
        keys += by_key.get(ref, [])
    return keys


#: Kinds a ``cross_company`` rule can never apply to: a memory line is written in the room by the
#: agent's own company, never at another company (docs/design.md §5).
NEVER_CROSS_COMPANY = ("remember",)


def policy_problems(policy: RightsPolicy, company: str, agents: list[str]) -> tuple[list[str], list[str]]:
    """What is wrong with ``policy`` for ``company`` (its agents' ids: ``agents``): refusals (a rule
    that can never apply, two keys naming one agent) and warnings (a key that names no agent of
    the company yet: policies may be written before their agents)."""
    refusals, warnings = [], []
    for kind in NEVER_CROSS_COMPANY:
        if kind in policy.cross_company:
            refusals.append(
                f"cross_company.{kind}: never applies ({kind} never targets another company: a memory line is "
                "written by the agent's own company); to review lines other companies will read, set "
                f"actions.{kind} or agents.<agent>.{kind} to ask (a person sees each line's visibility before it "
                "is written) or deny"
            )
    seen: dict[str, str] = {}
    for key in policy.agents:
        folded = name_key(agent_name(key) if "." in key and key.split(".", 1)[0] == company else key)
        if folded in seen:
            refusals.append(f"agents.{seen[folded]} and agents.{key} name one agent: keep one of them")
        seen.setdefault(folded, key)
    names = {name_key(agent_name(a)) for a in agents} | {name_key(a) for a in agents}
    for key in policy.agents:
        if name_key(key) not in names:
            warnings.append(f"agents.{key}: no agent of {company} has this name yet; the rule applies once one does")
    return refusals, warnings


def decide(policy: RightsPolicy | None, agent_id: str, kind: str, cross_company: bool) -> tuple[Decision, str]:
    """The decision for one action kind, and which rule gave it (design §5)."""
    p = policy or RightsPolicy()
    # The company's own policy names its agent by id or by name (ids are scoped to the company),
    # in any letter case, as names resolve everywhere (@Planner, GET /agents/Planner): per kind, a
    # rule under the id, else one under the name (the API refuses two keys naming one agent).
    for key in policy_keys_of(p, agent_id):
        if kind in p.agents[key]:
            return p.agents[key][kind], f"rule agents.{key}.{kind}"
    if cross_company and kind in p.cross_company:
        return p.cross_company[kind], f"rule cross_company.{kind}"
    if kind in p.actions:
        return p.actions[kind], f"rule actions.{kind}"
    return p.default, "rule default"


def _validation_reason(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "input"
        if err["type"] == "missing":
            parts.append(f"missing field '{loc}'")
        elif err["type"] == "extra_forbidden":
            parts.append(f"unexpected field '{loc}'")
        elif err["type"] == "string_pattern_mismatch":  # the actions' only pattern: models.NOT_BLANK
            parts.append(f"blank field '{loc}'")
        else:
            parts.append(f"invalid field '{loc}' ({err['type']})")
    return "malformed: " + "; ".join(parts)


def shown(value: str, limit: int = 64) -> str:
    """``value`` as a note or reason may show it: its first ``limit`` characters, each one that is
    not printable (line breaks, controls, escapes, bidirectional overrides) as its Python escape
    (``"\\n"``, ``"\\x1b"``, ``"\\u202e"``)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in value[:limit])


def _deny(index: int, kind: str, reason: str, fields: dict[str, Any] | None = None, target: str = "") -> ActionRecord:
    return ActionRecord(
        index=index,
        kind=shown(kind),
        fields=fields or {},
        decision="deny",
        reason=reason,
        target=target,
        outcome="denied",
        inputs={},
    )


def decide_action(
    index: int, name: str, arguments: dict[str, Any] | None, agent: Agent, policy: RightsPolicy | None, room: RoomView
) -> ActionRecord:
    """Validate and decide one declared action. Never raises for bad model output."""
    model = ACTION_MODELS.get(name)
    if model is None:
        if not name:
            return _deny(index, "?", "malformed: the action has no kind (tool name)")
        return _deny(index, name, f"unknown action kind '{shown(name)}'")
    if not isinstance(arguments, dict):
        return _deny(index, name, "malformed: arguments are not a JSON object (or nest too deep)")
    try:
        action = model.model_validate(arguments)
    except ValidationError as exc:
        return _deny(index, name, _validation_reason(exc))
    fields = action.model_dump()
    target_company = agent.company
    inputs: dict[str, Any] = {}
    if name == "remember":
        target = f"memory ({fields['visibility']})"
    elif name == "create_task":
        to = resolve_agent(fields["to"], room.agent_company)  # an id, or the name of one agent
        inputs = {"agents": {to: room.agent_company[to]} if to is not None else {}}
        if to is None:
            return _deny(
                index,
                name,
                f"agent '{shown(fields['to'])}' is not in the room",
                fields,
                f"task for {shown(fields['to'])}",
            ).model_copy(update={"inputs": inputs})
        fields["to"] = to
        target = f"task for {to}"
        target_company = room.agent_company[to]
    else:
        task_id = fields["task"]
        target = f"task {shown(task_id, 80)}"
        task = room.tasks.get(task_id)
        inputs = {"task": task_facts(task) if task is not None else None}
        if task is None:
            denied = _deny(index, name, f"task '{shown(task_id, 80)}' is not in this room", fields, target)
            return denied.model_copy(update={"inputs": inputs})
        if task.status != "open":
            denied = _deny(index, name, f"task '{task_id}' is closed", fields, target)
            return denied.model_copy(update={"inputs": inputs})
        # Typed: the assignee is always an agent; the creator counts only when it is this agent
        # (an agent whose id equals a person's id is not that person, design §5).
        if task.to != agent.id and not task.created_by.is_("agent", agent.id, agent.company):
            denied = _deny(index, name, "the agent is neither the task's assignee nor its creator", fields, target)
            return denied.model_copy(update={"inputs": inputs})
        target_company = task.created_by.company or agent.company
    cross = target_company != agent.company
    decision, rule = decide(policy, agent.id, name, cross)
    reason = f"{agent.company} policy: {rule} = {decision}" + (f"; the target is {target_company}'s" if cross else "")
    outcome = {"allow": "pending", "ask": "held", "deny": "denied"}[decision]
    return ActionRecord(
        index=index,
        kind=name,
        fields=fields,
        decision=decision,
        reason=reason,
        target=target,
        target_company=target_company,
        outcome=outcome,
        inputs=inputs,
    )


def task_facts(task: Task) -> dict[str, Any]:
    """What a task action's decision reads of its task (recorded with the action for a replay)."""
    return {"id": task.id, "to": task.to, "status": task.status, "created_by": task.created_by.model_dump(mode="json")}


def view_of(inputs: dict[str, Any], room_id: str = "") -> RoomView:
    """The room as one recorded action's decision saw it (:attr:`ActionRecord.inputs`): the
    agents and the task it read, nothing else (a replay, design §5)."""
    tasks: dict[str, Task] = {}
    task = inputs.get("task")
    if isinstance(task, dict):
        tasks[str(task["id"])] = Task(
            id=str(task["id"]),
            room_id=room_id,
            title="",
            body="",
            to=str(task["to"]),
            created_by=task["created_by"],
            status=task["status"],
            created_at="",
            updated_at="",
        )
    return RoomView(agent_company={str(k): str(v) for k, v in (inputs.get("agents") or {}).items()}, tasks=tasks)


def decide_all(
    tool_calls: list[dict[str, Any]], agent: Agent, policy: RightsPolicy | None, room: RoomView
) -> tuple[list[ActionRecord], int]:
    """Decide every declared action in order; at most 25 (the rest are "over limit").

    ``tool_calls``: ``[{"name": str, "input": dict | None}]``. Returns ``(records, over_limit)``.
    """
    records = [
        decide_action(i, str(c.get("name") or ""), c.get("input"), agent, policy, room)
        for i, c in enumerate(tool_calls[:MAX_ACTIONS])
    ]
    return records, max(0, len(tool_calls) - MAX_ACTIONS)


def by_policy(record: ActionRecord) -> bool:
    """Whether the company's policy decided ``record`` (a valid action), not its validation (a
    malformed or impossible one, denied before any rule: those carry no target company)."""
    return record.target_company is not None


def describe(record: ActionRecord) -> str:
    """A one-line, safe description of an action: kind and target, never its text."""
    return f"{record.kind} → {record.target}" if record.target else record.kind
