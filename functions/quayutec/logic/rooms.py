"""Rooms and who is in them (docs/design.md §3, §5): a company's person creates a room (the
service picks its id; the caller's company is always a member), a member invites another company
(a person of it accepts or declines; a company leaves a room), and a company places its own
agents (one agent per name in a room, so ``@name`` names one agent). The domain service of
``/rooms``, ``/rooms/{id}/members|agents`` and the invitations; the scenario player, the chaos lab
and the test fixtures create rooms and place agents through it too."""

from __future__ import annotations

import builtins
import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

from quayutec.dal.pages import Page
from quayutec.deps import Deps
from quayutec.errors import Conflict, Forbidden, InvalidInput, LimitReached, NotFound
from quayutec.logic import ids
from quayutec.logic.access import Principal, member_room, own_agent
from quayutec.logic.stops import Stops
from quayutec.models import DEFAULT_MAX_RUNS_PER_CHAIN, Author, Message, Room, now_iso


@dataclass(frozen=True)
class RoomView:
    """A room and its agents (agent id → owning company: never their configuration)."""

    room: Room
    agents: dict[str, str]
    busy_agents: list[str] = field(default_factory=list)  # read by get() only: design §9


class Rooms:
    """``deps``: the runtime's stores and settings (the room limits)."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room

    def view(self, room: Room) -> RoomView:
        return RoomView(room=room, agents=self.store.room_agents(room.id))

    def create(
        self,
        who: Principal,
        *,
        name: str | None = None,
        members: list[str] | None = None,
        hop_limit: int | None = None,
        max_runs_per_chain: int = DEFAULT_MAX_RUNS_PER_CHAIN,
        idempotency_key: str | None = None,
        room_id: str | None = None,
    ) -> RoomView:
        """A new room of the caller's company, ``members`` invited to it (design §5: each becomes a
        member once a person of it accepts, :meth:`accept`; until then it sees only the
        invitation; the caller's company is a member at once). Its id is the service's
        (:func:`quayutec.logic.ids.new_room_id`): a caller never learns that an id is taken,
        since it never chooses one; a repeat with the same Idempotency-Key gets the same room.
        ``room_id``: set-up only (the test fixtures' fixed ids, as ``Companies.create``'s
        ``rights_policy``); the API never passes one, its callers never pick an id.
        Raises Forbidden (an operator), LimitReached, InvalidInput (an unknown company),
        Conflict (an id collision: retry)."""
        company = who.require_company()
        all_members = list(dict.fromkeys([company, *(members or [])]))
        most = self.deps.settings.max_room_members
        if len(all_members) > most:
            raise LimitReached(f"a room of {len(all_members)} member companies", most, "MAX_ROOM_MEMBERS")
        unknown = [m for m in all_members if self.store.get_company(m) is None]
        if unknown:
            raise InvalidInput(f"members: no such company: {', '.join(unknown)}")
        room = Room(
            id=room_id or ids.new_room_id(idempotency_key),
            name=name,
            members=[company],
            invited=dict.fromkeys(all_members[1:], company),
            hop_limit=hop_limit,
            max_runs_per_chain=max_runs_per_chain,
            created_by=company,
        )
        if not self.store.create_room(room, now_iso()):
            existing = self.store.get_room(room.id)
            if existing is None or company not in existing.members:
                raise Conflict("room id collision: retry")
            room = existing
        return self.view(room)

    def list(self, who: Principal) -> list[str]:
        """The ids of the rooms the caller's company is a member of, sorted."""
        return sorted(self.store.rooms_of(who.require_company()))

    def page(self, who: Principal, limit: int, cursor: str | None = None) -> Page:
        """One page of the ids of the rooms the caller's company is a member of, in id order
        (part ``rooms``, :meth:`quayutec.dal.rooms.RoomRecords.rooms_page`). Raises
        InvalidInput."""
        return self.store.rooms_page(who.require_company(), limit, cursor)

    def members_page(self, who: Principal, room_id: str, limit: int, cursor: str | None = None) -> tuple[Room, Page]:
        """A room of the caller's company (its member companies: at most ``MAX_ROOM_MEMBERS``)
        and one page of its agents in id order (part ``agents``: ``(agent id, company)``,
        :meth:`quayutec.dal.rooms.RoomRecords.room_agents_page`). Raises NotFound,
        InvalidInput."""
        room = member_room(self.store, room_id, who)
        return room, self.store.room_agents_page(room_id, limit, cursor)

    def get(self, who: Principal, room_id: str) -> RoomView:
        """A room of the caller's company, with the agents that have a run in flight now
        (``busy_agents``, any company's: design §9); NotFound otherwise."""
        return replace(
            self.view(member_room(self.store, room_id, who)), busy_agents=self.deps.ledger.busy_agents(room_id)
        )

    def invite(self, who: Principal, room_id: str, company: str) -> dict[str, Any]:
        """Invite a company to a room (by a person of a member company; design §5): until a
        person of it accepts (:meth:`accept`), the company sees only the invitation, not the room,
        and cannot place its agents in it. A pending invitation holds a seat: members and
        invitations together stay within ``MAX_ROOM_MEMBERS``. Returns ``room_id``, ``company``,
        ``room_name`` (``None`` for an unnamed room), ``invited_by``, ``invited_at`` (ISO 8601),
        ``status`` (``"invited"``). Raises NotFound,
        InvalidInput (no such company), LimitReached, Conflict (a member or invited already; the
        room kept changing: retry)."""
        by = who.require_company()
        if self.store.get_company(company) is None:
            raise InvalidInput(f"company: no such company {company!r}")
        most = self.deps.settings.max_room_members
        for _ in range(3):
            room = member_room(self.store, room_id, who)
            if company in room.members:
                raise Conflict(f"company {company!r} is a member of room {room_id!r} already")
            if company in room.invited:
                raise Conflict(f"company {company!r} is invited to room {room_id!r} already")
            seats = len(room.members) + len(room.invited)
            if seats >= most:
                raise LimitReached(
                    f"room {room_id!r} has {len(room.members)} member companies and {len(room.invited)} "
                    "pending invitations",
                    most,
                    "MAX_ROOM_MEMBERS",
                )
            at = now_iso()
            if self.store.invite(room_id, company, by, at, room):
                found = {"room_id": room_id, "room_name": room.name, "company": company, "invited_by": by}
                return found | {"invited_at": at, "status": "invited"}
        raise Conflict(f"room {room_id!r} changed meanwhile: retry")

    def invitations(self, who: Principal) -> builtins.list[dict[str, Any]]:
        """The caller's company's pending invitations (``room_id``, ``room_name``: the room's name
        when it was invited, ``company``, ``invited_by``, ``invited_at``), in room id order."""
        return self.store.invitations_of(who.require_company())

    def accept(self, who: Principal, room_id: str) -> RoomView:
        """A person of the invited company accepts: in one transaction the invitation is gone and
        the company is a member (design §5). Raises NotFound (no pending invitation),
        LimitReached (the room's member limit was lowered since), Conflict."""
        company = who.require_company()
        most = self.deps.settings.max_room_members
        if not self.store.accept_invitation(room_id, company, most):
            room = self.store.get_room(room_id)
            if self.store.get_invitation(room_id, company) is None or room is None or not room.members:
                # no member left: the last one's leave is dropping the invitations (design §5)
                raise NotFound(f"no invitation of company {company!r} to room {room_id!r}")
            if len(room.members) >= most:
                raise LimitReached(
                    f"room {room_id!r} has {len(room.members)} member companies", most, "MAX_ROOM_MEMBERS"
                )
            raise Conflict(f"room {room_id!r} changed meanwhile: retry")
        return self.view(member_room(self.store, room_id, who))

    def decline(self, who: Principal, room_id: str) -> None:
        """A person of the invited company declines: the invitation is gone, its seat free.
        Raises NotFound."""
        company = who.require_company()
        if not self.store.decline_invitation(room_id, company):
            raise NotFound(f"no invitation of company {company!r} to room {room_id!r}")

    def leave(self, who: Principal, room_id: str) -> int:
        """The caller's company leaves a room: its agents are taken out of it first (no message
        wakes them there again; their runs in flight there write nothing more and end
        ``stopped``, their stop guard holds only while the agent is placed, and those waiting on
        approvals are ended now, design §12.2), then the company: it no longer sees the room
        (design §5); a system notice tells the companies that stay ("bolt left the room (bob)").
        The last member company's leave also drops the room's pending invitations (no company
        joins a room on the word of one that left). Returns how many parked runs it ended.
        Raises NotFound, Conflict (the room changed meanwhile: retry), TransientError (Step
        Functions did not take a stop: repeat the request)."""
        room = member_room(self.store, room_id, who)
        company = who.require_company()
        mine = self._take_out_agents(room_id, company)
        # every agent of the company, not only those still linked: a repeat after a fault finds
        # the runs the first attempt did not end (their links are gone already)
        agents = sorted(set(mine) | set(self.store.agents_of(company)))
        parked = [r for a in agents for r in self.deps.ledger.active_runs(agent_id=a) if r.room_id == room_id]
        stopping = Stops(self.deps).stop_parked(parked, who.author())
        if not self.store.remove_member(room_id, company, room.members):
            raise Conflict(f"room {room_id!r} changed meanwhile: retry")
        # an agent its people placed meanwhile (their placement checks the member item, gone now:
        # none lands after this): out too, its runs stopped by their guard
        self._take_out_agents(room_id, company)
        if room.members == [company]:
            for invited in room.invited:
                self.store.decline_invitation(room_id, invited)
        at = now_iso()
        digest = hashlib.sha256(f"{company}\x00{at}".encode()).hexdigest()[:24]
        self.store.put_message(
            Message(
                id=f"notice-leave-{digest}",
                room_id=room_id,
                author=Author(kind="system", id="quayutec"),
                kind="notice",
                created_at=at,
                text=f"{company} left the room ({who.member}).",
            )
        )
        return stopping

    def _take_out_agents(self, room_id: str, company: str) -> builtins.list[str]:
        """Take ``company``'s agents out of the room (link, name item, the room's map); their ids."""
        mine = [agent_id for agent_id, owner in self.store.room_agents(room_id).items() if owner == company]
        for agent_id in mine:
            self.store.remove_room_agent(room_id, agent_id)
        return mine

    def place_agent(self, who: Principal, room_id: str, agent_ref: str) -> RoomView:
        """Place one of the caller's company's agents (id or name) in a room of its company.
        Raises NotFound, Forbidden (the caller's company is invited and has not accepted the
        invitation, design §5), LimitReached (``max_room_agents``), Conflict (in the room
        already, or the room has an agent of that name)."""
        try:
            room = member_room(self.store, room_id, who)
        except NotFound:
            company = who.require_company()
            if self.store.get_invitation(room_id, company) is None:
                raise
            raise Forbidden(
                f"company {company!r} has not accepted the invitation to room {room_id!r}: a person of it "
                "accepts it first (POST /rooms/{room}/invitations/accept, quay room accept ROOM)"
            ) from None
        agent = own_agent(self.store, agent_ref, who)
        # the agent's own link and the room's holder of its name: one read, whatever the room's size
        name = ids.agent_name(agent.id)
        present = self.store.named_room_agents(room_id, [agent.id, name])
        if agent.id in present:
            raise Conflict(f"agent {agent.id!r} is in room {room_id!r} already")
        # @name must name one agent of the room, letter case aside (its members see the room's
        # agents: no leak); the room's name item makes it hold under concurrent placements too
        same = [a for a in present if ids.name_key(ids.agent_name(a)) == ids.name_key(name)]
        if same or not self.store.add_room_agent(room_id, agent.id, agent.company, self.deps.settings.max_room_agents):
            holder = same[0] if same else "another agent"
            raise Conflict(
                f"room {room_id!r} has an agent named {name!r} already ({holder}): register yours under another name"
            )
        # its company's leave may have been answered since the read above (after its sweep of
        # the room's agents): then this placement is undone, no agent of a company that left stays
        now = self.store.get_room(room_id)
        if now is None or agent.company not in now.members:
            self.store.remove_room_agent(room_id, agent.id)
            raise NotFound(f"room {room_id!r} does not exist")
        return self.view(room)
