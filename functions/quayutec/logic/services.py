"""The domain services over one set of collaborators (:class:`quayutec.deps.Deps`): what the API
routes call (one service call per route), and what the scenario player, the chaos lab and the
test fixtures use to set up companies, agents and rooms as the API would."""

from __future__ import annotations

from dataclasses import dataclass

from quayutec.deps import Deps
from quayutec.logic.agents import Agents
from quayutec.logic.approvals import Approvals
from quayutec.logic.changes import Changes
from quayutec.logic.companies import Companies
from quayutec.logic.files import Files
from quayutec.logic.memory import Memory
from quayutec.logic.messages import Messages
from quayutec.logic.replay import Replays
from quayutec.logic.rooms import Rooms
from quayutec.logic.runs import Runs
from quayutec.logic.tasks import Tasks
from quayutec.logic.tokens import Tokens


@dataclass(frozen=True)
class Services:
    """Each service built on ``deps`` when asked for (a service holds no state of its own)."""

    deps: Deps

    @property
    def companies(self) -> Companies:
        return Companies(self.deps)

    @property
    def tokens(self) -> Tokens:
        return Tokens(self.deps)

    @property
    def agents(self) -> Agents:
        return Agents(self.deps)

    @property
    def rooms(self) -> Rooms:
        return Rooms(self.deps)

    @property
    def messages(self) -> Messages:
        return Messages(self.deps)

    @property
    def tasks(self) -> Tasks:
        return Tasks(self.deps)

    @property
    def memory(self) -> Memory:
        return Memory(self.deps)

    @property
    def files(self) -> Files:
        return Files(self.deps)

    @property
    def approvals(self) -> Approvals:
        return Approvals(self.deps)

    @property
    def runs(self) -> Runs:
        return Runs(self.deps)

    @property
    def replays(self) -> Replays:
        return Replays(self.deps)

    @property
    def changes(self) -> Changes:
        return Changes(self.deps)
