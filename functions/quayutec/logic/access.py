"""Who may read and act on what, enforced in code (docs/design.md §5): room membership gates
every room read and write; a non-member learns nothing of a room, not even that it exists (the
same NotFound as for an unknown room); a company's agents and configuration are its own. The
domain services check these before they act; the caller is the API's authenticated caller (or
a local tool acting as a person) as a :class:`Caller`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quayutec.errors import Forbidden, NotFound
from quayutec.logic.ids import agent_id, agent_name, name_key
from quayutec.models import Agent, Author, Company, Room

if TYPE_CHECKING:
    from quayutec.dal.store import RoomStore


@dataclass(frozen=True)
class Caller:
    """Who calls: a person of a company (``company`` set; ``member`` the person) or an operator
    (``admin``, maybe with no company). The API's is the authenticated caller
    (:func:`quayutec.api.context.caller`); the local tools and the test fixtures act as one too."""

    company: str | None
    member: str
    admin: bool = False

    def author(self) -> Author:
        """The caller as the author of what it writes. Raises Forbidden for an operator token."""
        if not self.company:
            raise Forbidden("an operator token cannot act in rooms: use a token of a company's person")
        return Author(kind="person", id=self.member, company=self.company)

    def require_company(self) -> str:
        if not self.company:
            raise Forbidden("an operator token cannot act in rooms: use a token of a company's person")
        return self.company

    def require_admin(self) -> None:
        if not self.admin:
            raise Forbidden("this needs an operator (admin) token")


#: What the domain services take for their caller.
Principal = Caller

#: The operator, as the local tools act (creating companies).
OPERATOR = Caller(company=None, member="operator", admin=True)


def member_room(store: RoomStore, room_id: str, who: Principal) -> Room:
    """The room when the caller's company is a member; NotFound otherwise (also for a room that
    exists but the caller's company is not in). Forbidden for an operator token, whatever the
    room (operators administer companies; they read no room)."""
    company = who.require_company()
    room = store.get_room(room_id)
    if room is None or company not in room.members:
        raise NotFound(f"room {room_id!r} does not exist")
    return room


def own_company(store: RoomStore, company_id: str, who: Principal) -> Company:
    """A company the caller belongs to (or any company for an operator); NotFound otherwise."""
    company = store.get_company(company_id)
    if company is None or not (who.admin or who.company == company_id):
        raise NotFound(f"company {company_id!r} does not exist")
    return company


def own_agent(store: RoomStore, agent_ref: str, who: Principal, *, deleted: bool = False) -> Agent:
    """An agent of the caller's company, by its id or its name (``planner`` → ``acme.planner``);
    another company's agent is NotFound, worded as an unknown one (its configuration is never
    shown, docs/design.md §5), and so is a deleted one unless ``deleted`` (a repeated delete).
    Forbidden for an operator token, whatever the agent."""
    who.require_company()

    def candidates() -> Iterator[str]:
        if "." in agent_ref or not who.company:
            yield agent_ref
            return
        yield agent_id(who.company, agent_ref)  # a name first
        named = store.company_agent_named(who.company, agent_ref)  # the name in another letter case
        if named:
            yield named
            return
        yield from (  # an agent registered before name items (docs/deploy.md: the backfill)
            a for a in store.agents_of(who.company) if name_key(agent_name(a)) == name_key(agent_ref)
        )

    for candidate in candidates():
        agent = store.get_agent(candidate)
        if agent is not None and agent.company == who.company:
            if agent.deleted_at is not None and not deleted:
                raise NotFound(f"agent {agent.id!r} was deleted at {agent.deleted_at}")
            return agent
    raise NotFound(f"agent {agent_ref!r} does not exist")


def own_people(store: RoomStore, company_id: str, who: Principal) -> Company:
    """The company, when the caller is one of its own people: anyone else (another company, an
    operator) finds no such company (its budget and spend, docs/design.md §12.4)."""
    if who.company != company_id:
        raise NotFound(f"company {company_id!r} does not exist")
    return own_company(store, company_id, who)
