"""People stop what agents do (design §12.2): a person of an agent's company pauses it (no run of it
starts until it is resumed) and resumes it; any person in a room stops a chain of wakes there (no
further run of it starts). One domain service for the API and the scenario
player alike.

A pause is checked where it cannot be passed: the claim refuses a paused agent's wake, both by the
agent item its key read found and by a ``ConditionCheck`` on that item in the claim's own
transaction, so no run of the agent starts once the pause is answered (design §12.2).

Runs already past their claim are stopped in two steps. The stop intent is the pause (the agent
item's ``paused_at`` and its pause count) or the chain's ``stopped_at``, written first; every
model request, reply and action write of a run carries a stop guard on both items in its
transaction, so none lands once the request is answered, and the run records the final status
``stopped`` at its next step. Then the runs that wait on approvals (found through the ledger's
active-runs index) are ended through ``SendTaskFailure`` with ``RunStopped``, which the state
machine's Map catches: without it they would wait until their approvals expire. A run in flight
is not aborted with ``StopExecution``: a Lambda invocation already running finishes anyway, and
its writes are what the guard refuses.

Each pause and resume is a system notice in every room the agent is placed in, naming who did
it; its id derives from the agent and the pause's instant, so a repeated request posts it once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger
from botocore.exceptions import BotoCoreError, ClientError

from quayutec.dal.aws import error_code
from quayutec.dal.ledger import ActiveRun
from quayutec.deps import Deps
from quayutec.errors import NotFound, RunStopped, TransientError
from quayutec.logic.rights import policy_keys_of
from quayutec.models import Agent, Author, Message, now_iso

logger = Logger(child=True)

#: Task tokens Step Functions no longer takes: the run ended meanwhile (nothing to stop).
_DEAD_TOKEN = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})


@dataclass(frozen=True)
class PauseResult:
    """The agent as it stands after the request, and whether this request changed it."""

    agent: Agent
    changed: bool
    stopping: int = 0  # runs of it waiting on approvals that this request ended (design §12.2)


def _notice(room_id: str, agent: Agent, key: str, text: str) -> Message:
    digest = hashlib.sha256(f"{agent.id}\x00{key}".encode()).hexdigest()[:24]
    return Message(
        id=f"notice-pause-{digest}",
        room_id=room_id,
        author=Author(kind="system", id="quayutec"),
        kind="notice",
        created_at=now_iso(),
        text=text,
    )


class Stops:
    """Pause and resume an agent, stop a chain, and stop the runs they reach. ``deps``: the
    runtime's stores and clients."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room
        self.ledger = deps.ledger

    def stop_chain(self, room_id: str, chain_id: str, person: Author) -> tuple[bool, int]:
        """Stop a chain of wakes of ``room_id`` (``person``: any person of a member company, the
        caller checked membership): no further run of it starts (the claim refuses its wakes),
        its running runs write nothing more and end ``stopped`` (design §12.2), and one notice
        names who stopped it. Returns whether this request stopped it (``False``: it was
        stopped before; the runs it reaches are stopped again all the same) and how many runs
        waiting on approvals it ended. Raises NotFound when no run of the room was ever claimed
        in that chain, TransientError on throttling or when Step Functions did not take a stop
        (the chain is stopped: repeat the request)."""
        outcome = self.ledger.stop_chain(room_id, chain_id, person.id, now_iso())
        if outcome == "unknown":
            raise NotFound(f"room {room_id!r} has no chain {chain_id!r}")
        if outcome in ("stopped", "already"):  # again on a repeat: a notice lost to a fault is written now, once
            digest = hashlib.sha256(f"{room_id}\x00{chain_id}".encode()).hexdigest()[:24]
            self.store.put_message(
                Message(
                    id=f"notice-chain-stop-{digest}",
                    room_id=room_id,
                    author=Author(kind="system", id="quayutec"),
                    kind="notice",
                    chain_id=chain_id,
                    created_at=now_iso(),
                    text=f"The chain of agent wakes {chain_id} was stopped by {person.id} ({person.company}): "
                    "no further run of it starts.",
                )
            )
        stopping = self.stop_parked(self.ledger.active_runs(room_id=room_id, chain_id=chain_id), person)
        return outcome == "stopped", stopping

    def _rooms_of_agent(self, agent: Agent) -> list[str]:
        """The rooms of the agent's company the agent is placed in (one query per room)."""
        return [r for r in self.store.rooms_of(agent.company) if agent.id in self.store.room_agents(r)]

    def pause(self, agent: Agent, person: Author) -> PauseResult:
        """Pause ``agent`` (of ``person``'s company: the caller checked it): no run of it starts,
        its running runs write nothing more and end ``stopped`` (design §12.2). Idempotent: pausing
        a paused agent changes nothing (the first pause, its time and who, stand) and posts
        nothing, but stops the runs it reaches again. Raises TransientError on throttling or
        when Step Functions did not take a stop (the agent is paused: repeat the request)."""
        at = now_iso()
        changed = self.store.set_agent_paused(agent.id, person.id, at)
        current = self.store.get_agent(agent.id) or agent
        if current.paused_at is not None:  # also on a repeat: a notice lost to a fault is written now, once
            text = (
                f"{agent.id} was paused by {current.paused_by or person.id} ({person.company}): "
                "no run of it starts until it is resumed."
            )
            for room_id in self._rooms_of_agent(current):
                self.store.put_message(_notice(room_id, current, f"pause\x00{current.paused_at}", text))
        stopping = 0
        if current.paused_at is not None:  # resumed meanwhile: the runs it reached are stopped by their guard
            stopping = self.stop_parked(self.ledger.active_runs(agent_id=agent.id), person)
        return PauseResult(current, changed, stopping)

    def resume(self, agent: Agent, person: Author) -> PauseResult:
        """Resume a paused ``agent``: the next message or task meant for it wakes it again (the
        runs the pause stopped stay stopped). Idempotent like :meth:`pause`. Raises
        TransientError on throttling."""
        paused_at = agent.paused_at
        changed = self.store.clear_agent_paused(agent.id)
        current = self.store.get_agent(agent.id) or agent
        if changed:
            text = f"{agent.id} was resumed by {person.id} ({person.company})."
            for room_id in self._rooms_of_agent(current):
                self.store.put_message(_notice(room_id, current, f"resume\x00{paused_at}", text))
        return PauseResult(current, changed)

    def delete(self, agent: Agent, person: Author) -> PauseResult:
        """Delete ``agent`` (of ``person``'s company: the caller checked it), for good: it is
        paused (no run of it starts; its running runs write nothing more and end ``stopped``,
        those waiting on approvals now), taken out of every room it is placed in (a notice in
        each names who deleted it), and its company's policy rules for it end; its past runs
        stay in the ledger, and its id is never given to another agent (design §12.2).
        Idempotent: a repeat finishes what a fault left (rooms, rules, notices once each).
        Raises TransientError on throttling or when Step Functions did not take a stop."""
        at = now_iso()
        changed = self.store.set_agent_deleted(agent.id, person.id, at)
        current = self.store.get_agent(agent.id) or agent
        deleted_at = current.deleted_at or at
        text = (
            f"{agent.id} was deleted by {current.deleted_by or person.id} ({person.company}): it answers "
            "no more here; its past runs stay in the ledger."
        )
        for room_id in self._rooms_of_agent(current):  # the notice first: a repeat finds the room again
            self.store.put_message(_notice(room_id, current, f"delete\x00{deleted_at}", text))
            self.store.remove_room_agent(room_id, agent.id)
        company = self.store.get_company(agent.company)
        if company is not None:
            stale = policy_keys_of(company.rights, agent.id)
            if stale:
                rules = {k: v for k, v in company.rights.agents.items() if k not in stale}
                self.store.set_policy(agent.company, company.rights.model_copy(update={"agents": rules}))
        stopping = self.stop_parked(self.ledger.active_runs(agent_id=agent.id), person)
        return PauseResult(current, changed, stopping)

    def stop_parked(self, runs: list[ActiveRun], person: Author) -> int:
        """End each of ``runs`` that waits on approvals (design §12.2): its pending approval rows
        become ``stopped`` and their task tokens get ``SendTaskFailure`` with ``RunStopped``
        (the Map catches it; ApplyAndFinish records the run stopped); each run's approvals are
        read whatever its status says (one that just recorded its request may not say parked
        yet). Runs not parked need nothing: their next write fails its stop guard. An approval a person is answering now
        (``deciding``) is left to that answer, which the guard then refuses. Returns how many
        tokens were ended. Raises TransientError when Step Functions did not take one (that row
        is pending again; a repeated request retries it)."""
        sfn = self.deps.stepfunctions()
        ended, refused = 0, 0
        for run in runs:  # also one whose status does not say parked yet: its approval may be recorded
            for approval, token in self.store.run_approvals(run.room_id, run.run_id):
                if approval.status != "pending" or not self.store.set_approval_status(
                    run.room_id, run.run_id, approval.index, "stopped", person.id
                ):
                    continue
                try:
                    sfn.send_task_failure(
                        taskToken=token,
                        error=RunStopped.__name__,
                        cause=f"stopped by {person.id} of {person.company}",
                    )
                    ended += 1
                except (ClientError, BotoCoreError) as exc:
                    if isinstance(exc, ClientError) and error_code(exc) in _DEAD_TOKEN:
                        continue  # the run ended meanwhile: nothing waits on it
                    self.store.set_approval_status(
                        run.room_id, run.run_id, approval.index, "pending", None, from_statuses=("stopped",)
                    )
                    refused += 1
                    logger.warning("Step Functions did not take a stop", extra=_why(run, exc))
        if refused:
            raise TransientError(f"{refused} run(s) waiting on approvals were not stopped yet: repeat the request")
        return ended


def _why(run: ActiveRun, exc: Exception) -> dict[str, Any]:
    return {"run_id": run.run_id, "error": type(exc).__name__}
