"""ApplyAndFinish (design §2.7, §2.8): write the allowed and approved actions and the run's wakes,
then record the final status.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_lambda_powertools.metrics import MetricUnit

from quayutec.dal.aws import Guard
from quayutec.dal.keys import memory_partition
from quayutec.deps import Deps
from quayutec.errors import RunStopped
from quayutec.logic import ids
from quayutec.logic import wakes as wake_rules
from quayutec.logic.phases.common import (
    _hop_limit_of,
    _iso,
    _load_run,
    _need_facts,
    _need_rights,
    _need_run,
    _Started,
    budget,
    finish,
    metrics,
    post_chain_notice,
    record_stopped,
    run_guard,
)
from quayutec.models import (
    APPROVAL_STATUSES,
    ActionRecord,
    Author,
    MemoryLine,
    RunRecord,
    RunState,
    Task,
    TaskEvent,
    parse_iso,
)
from quayutec.seams import part


# ----------------------------------------------------------------------------- 7. write
def _write_action(
    deps: Deps, run: RunRecord, agent_author: Author, a: ActionRecord, guard: Guard, memory_marked: list[str]
) -> tuple[str, str, list[tuple]]:
    """Write one allowed/approved action, keyed from (run, index), under the run's stop
    ``guard``. ``memory_marked``: the partitions known to hold lines (RunFacts.memory_marked).
    Returns (outcome, note, wake targets). Raises RunStopped (nothing written)."""
    now = _iso(deps)
    f = a.fields
    if a.kind == "remember":
        line = MemoryLine(
            id=ids.action_write_id(run.run_id, a.index, "mem"),
            room_id=run.room_id,
            text=f["text"],
            visibility=f["visibility"],
            company=run.company,
            author=agent_author,
            run_id=run.run_id,
            created_at=now,
        )
        partition = memory_partition(line.visibility, line.company)
        deps.room.put_memory(line, guard, marked=partition in memory_marked)
        if partition not in memory_marked:
            memory_marked.append(partition)  # marked now: the run's next line needs no mark
        return "written", "", []
    if a.kind == "create_task":
        task_id = ids.action_write_id(run.run_id, a.index, "task")
        created = Task(
            id=task_id,
            room_id=run.room_id,
            title=f["title"],
            body=f["body"],
            to=f["to"],
            created_by=agent_author,
            created_at=now,
            updated_at=now,
        )
        event = TaskEvent(
            id=ids.action_write_id(run.run_id, a.index, "tev"),
            room_id=run.room_id,
            task_id=task_id,
            kind="created",
            text=f["title"],
            by=agent_author,
            run_id=run.run_id,
            created_at=now,
        )
        deps.room.create_task(created, event, guard=guard)
        return "written", f"task {task_id}", [(f["to"], "task_event", event.id, task_id)]
    task = deps.room.get_task(run.room_id, f["task"])
    if task is None:
        return "not_reached", "task not found", []
    kind = "update" if a.kind == "update_task" else "close"
    event = TaskEvent(
        id=ids.action_write_id(run.run_id, a.index, "tev"),
        room_id=run.room_id,
        task_id=task.id,
        kind=kind,
        text=f["note"] if kind == "update" else f["result"],
        by=agent_author,
        run_id=run.run_id,
        created_at=now,
    )
    result = deps.room.add_task_event(event, guard=guard)
    if result == "task_closed":
        return "not_reached", "the task was closed before the write", []
    return "written", "", _task_event_targets(task, event.id)


def apply_actions(deps: Deps, state: RunState) -> RunState:
    """Write the allowed and approved actions in declared order, then the run's wakes, after all
    writes have landed (design §2.7, §3). Rejected / expired actions are recorded, not written."""
    ref = _need_run(state)
    facts = _need_facts(state)
    if _need_rights(state).actions == 0:  # nothing declared: nothing to write
        return state.model_copy(update={"budget": budget(deps, _Started(ref.run_id, facts.started_at), None)})
    run = _load_run(deps, ref)
    approvals = {o.index: o.outcome for o in state.approvals or []}
    agent_author = Author(kind="agent", id=run.agent_id, company=run.company)
    targets: list[tuple] = []
    if run.parked_since:  # the run is back from its approvals: parked time stops counting
        metrics.add_metric(name="ApprovalClosed", unit=MetricUnit.Count, value=len(approvals))
        parked = (deps.clock() - parse_iso(run.parked_since)).total_seconds()
        deps.ledger.update_run(
            ref.run_id,
            {"parked_s": run.parked_s + parked, "parked_since": None, "status": "running", "updated_at": _iso(deps)},
        )
        run = _load_run(deps, ref)
    guard = run_guard(deps, ref, facts)
    marked = list(facts.memory_marked)
    if "stopped" in approvals.values():  # a person stopped the run while it waited (design §12.2)
        _settle_stopped(deps, run, approvals)
        raise RunStopped(f"run {ref.run_id} was stopped while it waited on its approvals")
    for a in deps.ledger.actions(ref.run_id):
        if a.decision == "deny":
            continue
        if a.decision == "ask":
            outcome = approvals.get(a.index)
            if outcome is None:
                continue
            # The run's side settles the approval row with the outcome Step Functions gave it
            # (design §2.6): also when the API's row update was lost after its answer landed, or a
            # retry found the token used and left the row deciding.
            deps.room.set_approval_status(
                run.room_id,
                run.run_id,
                a.index,
                outcome,
                None,
                from_statuses=tuple(s for s in APPROVAL_STATUSES if s != outcome),
            )
            if outcome != "approved":
                deps.ledger.set_action_outcome(ref.run_id, a.index, outcome, approval=outcome)
                continue
        if a.outcome in ("written", "not_reached"):
            # written by an earlier attempt of this step: its wake targets still count
            if a.outcome == "written":
                targets += _targets_of_written(deps, run, a)
            continue
        written, note, wake_targets = _write_action(deps, run, agent_author, a, guard, marked)
        targets += wake_targets
        deps.ledger.set_action_outcome(
            ref.run_id, a.index, written, note, approval="approved" if a.decision == "ask" else None
        )
    wakes, notices = wake_rules.run_wakes(
        run_id=ref.run_id,
        room_id=ref.room_id,
        step="actions",
        run_agent=run.agent_id,
        run_hop=ref.hop,
        hop_limit=_hop_limit_of(deps, facts.hop_limit),  # as the run's room read found it
        targets=targets,
        chain_id=ref.chain_id,
        run_company=facts.company,
        chain_full=facts.chain_full,
    )
    post_chain_notice(deps, ref, facts, [t[0] for t in targets])
    for notice in notices:
        deps.room.put_message(notice)
    if wakes:
        deps.room.put_outbox(ref.room_id, f"{ref.run_id}#actions", ref.run_id, wakes, guard)
    return state.model_copy(update={"budget": budget(deps, run, None)})


def _settle_stopped(deps: Deps, run: RunRecord, approvals: Mapping[int, str]) -> None:
    """The approval rows of a stopped run: each as its Map iteration ended (``stopped``, or the
    answer it was given before the stop), so none shows pending."""
    for index, outcome in approvals.items():
        deps.room.set_approval_status(
            run.room_id,
            run.run_id,
            index,
            outcome,
            None,
            from_statuses=tuple(s for s in APPROVAL_STATUSES if s != outcome),
        )


def _settle_unwritten(deps: Deps, state: RunState) -> None:
    """A run stopped in its action writes: the approval rows of its held actions not written
    say ``stopped`` (an approval answered just before the stop wrote nothing either)."""
    ref = _need_run(state)
    held = [a for a in deps.ledger.actions(ref.run_id) if a.decision == "ask" and a.outcome != "written"]
    for a in held:
        deps.room.set_approval_status(
            ref.room_id,
            ref.run_id,
            a.index,
            "stopped",
            None,
            from_statuses=tuple(s for s in APPROVAL_STATUSES if s != "stopped"),
        )


def _task_event_targets(task: Task, event_id: str) -> list[tuple]:
    """Who an update/close of ``task`` wakes: its assignee and the agent that created it (the
    run's own agent is dropped later, design §3)."""
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


def apply_and_finish(deps: Deps, state: RunState) -> RunState:
    """Write the allowed and approved actions and the run's wakes (design §2.7), then record the
    final status (§2.8). A run whose agent was paused or whose chain was stopped since its claim
    (an approval ended ``stopped``, or a write's stop guard failed) writes nothing more and
    ends ``stopped``, its reply posted (design §12.2)."""
    with part("apply_actions"):
        try:
            state = apply_actions(deps, state)
        except RunStopped:
            _settle_unwritten(deps, state)
            return record_stopped(deps, state, reply_posted=True, states=apply_and_finish_states(state))
    with part("finish"):
        return finish(deps, state, states=apply_and_finish_states(state))


def apply_and_finish_states(state: RunState) -> int:
    """States entered from Finished? on: ApplyAndFinish and, when an action was held, the
    HeldActions Map with, per held action, its RequestApproval and outcome states (the cost
    line's estimate; Finished? skips the Map when nothing is held)."""
    held = len(state.approvals or [])
    return 1 + (1 + 2 * held if held else 0)
