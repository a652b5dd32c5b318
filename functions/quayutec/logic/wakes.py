"""Who wakes, with which id and hop (design §3).

* A message wakes the agents it is addressed to (``to``) or @mentions; one wake per agent.
* A task wakes its assignee when created, and on someone else's update/close wakes the assignee
  and the agent that created it.
* A run's writes wake each agent at most once per write step; an agent never wakes itself.
* Hop: 0 for a person's write; the run's hop + 1 for a run's write. Past the room's hop limit the
  wake is not sent and a system notice says so.
* Chain: a person's write starts one (its id is the write's: the message or task event id); a
  run's wakes carry the chain of the wake that started the run. The claim counts a chain's runs
  (design §12.1, :mod:`quayutec.logic.phases.claim_and_read`); wakes a full chain could only refuse
  are not sent.
* ``wake_from``: who may wake an agent (its owner's setting): ``anyone`` in the room, ``people``
  only, or ``own_company`` (its company's people and agents). Checked at the claim, where the
  agent is read consistently (:func:`may_wake`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from quayutec.logic import ids
from quayutec.models import Author, Message, Task, Wake, now_iso
from quayutec.words import count

MENTION = re.compile(r"(?<![\w@])@([A-Za-z0-9][A-Za-z0-9_.\-]*[A-Za-z0-9]|[A-Za-z0-9])")


def mentions(text: str, room_agents: Iterable[str]) -> list[str]:
    """Agent ids @mentioned in ``text`` that are agents of the room, in first-mention order: an
    agent is mentioned by its id (``@acme.planner``) or its name (``@planner``, ids.resolve_agent)."""
    known = set(room_agents)
    seen: list[str] = []
    for ref in MENTION.findall(text):
        agent = ids.resolve_agent(ref, known)
        if agent is not None and agent not in seen:
            seen.append(agent)
    return seen


def unique(agents: Iterable[str], *, exclude: str | None = None) -> list[str]:
    out: list[str] = []
    for a in agents:
        if a and a != exclude and a not in out:
            out.append(a)
    return out


def task_watchers(task: Task) -> list[str]:
    """The agents an update or close of ``task`` wakes: its assignee and the agent that created
    it, when an agent did (the writer itself is dropped by the caller)."""
    return [task.to] + ([task.created_by.id] if task.created_by.kind == "agent" else [])


WakeFrom = Literal["anyone", "people", "own_company"]


def may_wake(wake_from: str, agent_company: str, by_kind: str, by_company: str | None) -> bool:
    """Whether a write by ``(by_kind, by_company)`` may wake an agent of ``agent_company`` whose
    setting is ``wake_from`` (:data:`WakeFrom`; design §12.1)."""
    if wake_from == "people":
        return by_kind == "person"
    if wake_from == "own_company":
        return by_company is not None and by_company == agent_company
    return True


def person_message_wakes(message: Message, recipients: list[str]) -> list[Wake]:
    """The wakes of a person's message: hop 0, each starting the chain named by the message."""
    return [
        Wake(
            agent_id=a,
            wake_id=ids.message_wake_id(message.id),
            room_id=message.room_id,
            hop=0,
            chain_id=message.id,
            by_kind="person",
            by_company=message.author.company,
            cause_kind="message",
            cause_id=message.id,
        )
        for a in unique(recipients)
    ]


def task_event_wakes(
    room_id: str,
    task_id: str,
    event_id: str,
    agents: list[str],
    hop: int,
    exclude: str | None,
    *,
    by_kind: Literal["person", "agent"],
    by_company: str | None,
    chain_id: str | None = None,
) -> list[Wake]:
    """The wakes of a task event. ``chain_id``: the writing run's chain; ``None`` for a person's
    write, which starts the chain named by the event."""
    return [
        Wake(
            agent_id=a,
            wake_id=ids.task_event_wake_id(event_id),
            room_id=room_id,
            hop=hop,
            chain_id=chain_id or event_id,
            by_kind=by_kind,
            by_company=by_company,
            cause_kind="task_event",
            cause_id=event_id,
            task_id=task_id,
        )
        for a in unique(agents, exclude=exclude)
    ]


def chain_notice(room_id: str, chain_id: str, max_runs: int) -> Message:
    """The one notice of a chain that reached its bound (its id derives from the chain, so every
    run that finds the chain full writes the same item, once)."""
    return Message(
        id=ids.chain_notice_id(chain_id),
        room_id=room_id,
        author=Author(kind="system", id="quayutec"),
        kind="notice",
        chain_id=chain_id,
        created_at=now_iso(),
        text=f"This chain of agent wakes stopped after {count(max_runs, 'run')}; a new message starts a new one.",
    )


def run_wakes(
    *,
    run_id: str,
    room_id: str,
    step: str,
    run_agent: str,
    run_hop: int,
    hop_limit: int,
    targets: list[tuple[str, str, str, str | None]],
    chain_id: str,
    run_company: str,
    chain_full: bool = False,
) -> tuple[list[Wake], list[Message]]:
    """Wakes for one write step of a run, and the notices for wakes past the hop limit.

    ``targets``: ``(agent_id, cause_kind, cause_id, task_id)``, first cause per agent wins; the
    run's own agent is never woken. The wakes carry the run's ``chain_id``; ``chain_full``: the
    chain had no run left when this run was claimed, so no wake is sent (each could only be
    refused at its claim) and the chain's one notice stands for them. Returns ``(wakes, notices)``.
    """
    hop = run_hop + 1
    wakes: list[Wake] = []
    notices: list[Message] = []
    done: set[str] = set()
    for agent_id, cause_kind, cause_id, task_id in targets:
        if agent_id == run_agent or agent_id in done:
            continue
        done.add(agent_id)
        if chain_full:
            continue
        if hop > hop_limit:
            notices.append(
                Message(
                    id=ids.notice_id(run_id, step, agent_id),
                    room_id=room_id,
                    author=Author(kind="system", id="quayutec"),
                    kind="notice",
                    run_id=run_id,
                    chain_id=chain_id,
                    created_at=now_iso(),
                    text=f"{agent_id} was not woken: hop limit {hop_limit} reached (wake by {run_agent}, hop {hop}).",
                )
            )
            continue
        wakes.append(
            Wake(
                agent_id=agent_id,
                wake_id=ids.run_wake_id(run_id, step, agent_id),
                room_id=room_id,
                hop=hop,
                chain_id=chain_id,
                by_kind="agent",
                by_company=run_company,
                cause_kind=cause_kind,
                cause_id=cause_id,
                task_id=task_id,
            )
        )
    return wakes, notices
