"""People stop what agents do (design §3): a person of an agent's company pauses it (no run of it
starts until it is resumed) and resumes it; any person in a room stops a chain of wakes there (no
further run of it starts). One domain service for the API and the scenario
player alike.

A pause is checked where it cannot be passed: the claim refuses a paused agent's wake, both by the
agent item its key read found and by a ``ConditionCheck`` on that item in the claim's own
transaction, so no run of the agent starts once the pause is answered (design §3). A run already
past its claim when the pause lands is not stopped by it (it finishes its current reply); its
wakes of other agents still count against the chain.

Each pause and resume is a system notice in every room the agent is placed in, naming who did
it; its id derives from the agent and the pause's instant, so a repeated request posts it once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from quayutec.dal.directory import Directory
from quayutec.dal.ledger import LedgerStore
from quayutec.dal.room import RoomStore
from quayutec.errors import NotFound
from quayutec.models import Agent, Author, Message, now_iso


@dataclass(frozen=True)
class PauseResult:
    """The agent as it stands after the request, and whether this request changed it."""

    agent: Agent
    changed: bool


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
    """Pause and resume an agent. ``store``: the room table; ``directory``: its listings."""

    def __init__(self, store: RoomStore, directory: Directory, ledger: LedgerStore | None = None) -> None:
        self.store = store
        self.directory = directory
        self.ledger = ledger

    def stop_chain(self, room_id: str, chain_id: str, person: Author) -> bool:
        """Stop a chain of wakes of ``room_id`` (``person``: any person of a member company, the
        caller checked membership): no further run of it starts (the claim refuses its wakes,
        design §3), and one notice names who stopped it. Returns whether this request stopped it
        (``False``: it was stopped before). Raises NotFound when no run of the room was ever
        claimed in that chain, TransientError on throttling."""
        assert self.ledger is not None, "Stops needs the ledger to stop a chain"
        outcome = self.ledger.stop_chain(room_id, chain_id, person.id, now_iso())
        if outcome == "unknown":
            raise NotFound(f"room {room_id!r} has no chain {chain_id!r}")
        if outcome == "stopped":
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
        return outcome == "stopped"

    def _rooms_of_agent(self, agent: Agent) -> list[str]:
        """The rooms of the agent's company the agent is placed in (one query per room)."""
        return [r for r in self.directory.rooms_of(agent.company) if agent.id in self.store.room_agents(r)]

    def pause(self, agent: Agent, person: Author) -> PauseResult:
        """Pause ``agent`` (of ``person``'s company: the caller checked it). Idempotent: pausing a
        paused agent changes nothing (the first pause, its time and who, stand) and posts
        nothing. Raises TransientError on throttling."""
        at = now_iso()
        changed = self.store.set_agent_paused(agent.id, person.id, at)
        current = self.store.get_agent(agent.id) or agent
        if changed:
            text = f"{agent.id} was paused by {person.id} ({person.company}): no run of it starts until it is resumed."
            for room_id in self._rooms_of_agent(current):
                self.store.put_message(_notice(room_id, current, f"pause\x00{at}", text))
        return PauseResult(current, changed)

    def resume(self, agent: Agent, person: Author) -> PauseResult:
        """Resume a paused ``agent``: the next message or task meant for it wakes it again.
        Idempotent like :meth:`pause`. Raises TransientError on throttling."""
        paused_at = agent.paused_at
        changed = self.store.clear_agent_paused(agent.id)
        current = self.store.get_agent(agent.id) or agent
        if changed:
            text = f"{agent.id} was resumed by {person.id} ({person.company})."
            for room_id in self._rooms_of_agent(current):
                self.store.put_message(_notice(room_id, current, f"resume\x00{paused_at}", text))
        return PauseResult(current, changed)
