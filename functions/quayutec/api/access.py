"""Authorization rules shared by the routes, enforced in code (SPEC §5): room membership gates
every room read and write; a non-member learns nothing of a room, not even that it exists (the
same 404 as for an unknown room)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from quayutec.api.context import Caller
from quayutec.dal.auth import TokenStore
from quayutec.dal.store import RoomStore
from quayutec.deps import Deps, default_deps
from quayutec.errors import NotFound
from quayutec.logic.ids import agent_id, agent_name, name_key
from quayutec.logic.room_service import RoomService
from quayutec.models import Agent, Company, Room


@dataclass
class Services:
    deps: Deps

    @property
    def rooms(self) -> RoomService:
        return RoomService(self.deps.room)

    @property
    def directory(self) -> RoomStore:
        return self.deps.room

    @property
    def tokens(self) -> TokenStore:
        return TokenStore(self.deps.room.table)


def services() -> Services:
    return Services(default_deps())


def member_room(svc: Services, room_id: str, who: Caller) -> Room:
    """The room when the caller's company is a member; NotFound otherwise (also for a room that
    exists but the caller's company is not in). Forbidden for an operator token, whatever the
    room (operators administer companies; they read no room)."""
    company = who.require_company()
    room = svc.deps.room.get_room(room_id)
    if room is None or company not in room.members:
        raise NotFound(f"room {room_id!r} does not exist")
    return room


def own_company(svc: Services, company_id: str, who: Caller) -> Company:
    """A company the caller belongs to (or any company for an operator)."""
    company = svc.deps.room.get_company(company_id)
    if company is None or not (who.admin or who.company == company_id):
        raise NotFound(f"company {company_id!r} does not exist")
    return company


def own_agent(svc: Services, agent_ref: str, who: Caller) -> Agent:
    """An agent of the caller's company, by its id or its name (``planner`` → ``acme.planner``);
    another company's agent is NotFound, worded as an unknown one (its configuration is never
    shown, SPEC §5). Forbidden for an operator token, whatever the agent."""
    who.require_company()

    def candidates() -> Iterator[str]:
        if "." in agent_ref or not who.company:
            yield agent_ref
            return
        yield agent_id(who.company, agent_ref)  # a name first
        yield from (
            a
            for a in svc.directory.agents_of(who.company)  # the name in another letter case
            if name_key(agent_name(a)) == name_key(agent_ref)
        )

    for candidate in candidates():
        agent = svc.deps.room.get_agent(candidate)
        if agent is not None and agent.company == who.company:
            return agent
    raise NotFound(f"agent {agent_ref!r} does not exist")
