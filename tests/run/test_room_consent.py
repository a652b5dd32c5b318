"""Rooms by consent on the run path (docs/design.md §5): a company invited to a room and not yet
accepted has no agent in it, so a room message wakes none of its agents, by @mention or ``to``;
once a person of it accepts and places its agent, the same message wakes it. Real path on the
local stack: stream, queue, executions, the provider's wire format from the local server."""

from __future__ import annotations

import pytest
from runhelpers import ANN, BOB, Env, hold_cross_company_tasks, until

from quayutec.errors import Forbidden, InvalidInput, NotFound
from quayutec.logic.room_service import RoomService
from quayutec.logic.services import Services
from quayutec.models import Author

ANN_AUTHOR = Author(kind="person", id="ann", company="acme")


def test_an_invited_companys_agents_are_not_woken_before_it_accepts(env: Env) -> None:
    d = env.deps
    svc, rooms = Services(d), RoomService(d.room)
    room = svc.rooms.create(ANN, name="r-invite", members=["bolt"], room_id="r-invite").room
    assert room.members == ["acme"] and room.invited == {"bolt": "acme"}
    svc.rooms.place_agent(ANN, "r-invite", "a1")
    with pytest.raises(Forbidden, match="has not accepted the invitation"):
        svc.rooms.place_agent(BOB, "r-invite", "b1")
    env.server.set_script("b1", [{"reply": {"text": "b1 here"}}])
    env.server.set_script("a1", [{"reply": {"text": "a1 here"}}] * 2)
    posted = rooms.post_message("r-invite", ANN_AUTHOR, "@b1 @a1 are you there?", [])
    assert posted.mentions == ["acme.a1"]
    with pytest.raises(InvalidInput):
        rooms.post_message("r-invite", ANN_AUTHOR, "b1, are you there?", ["bolt.b1"])
    env.stack.wait_quiet(30)
    runs = d.ledger.runs_in_room("r-invite")
    assert [r.agent_id for r in runs] == ["acme.a1"] and env.server.count("b1") == 0
    # bob accepts for bolt and places b1: the same message wakes it now
    svc.rooms.accept(BOB, "r-invite")
    svc.rooms.place_agent(BOB, "r-invite", "b1")
    rooms.post_message("r-invite", ANN_AUTHOR, "@b1 are you there?", [])
    env.stack.wait_quiet(30)
    woken = [r for r in d.ledger.runs_in_room("r-invite") if r.agent_id == "bolt.b1"]
    assert [r.status for r in woken] == ["completed"] and env.server.count("b1") == 1


def test_a_company_that_leaves_stops_its_runs_in_the_room_and_writes_nothing_more(env: Env) -> None:
    """bolt leaves r1 while one run of b1 waits on its model and another on an approval: the run
    in flight writes nothing once the leave is answered (its stop guard holds only while b1 is
    placed) and ends ``stopped``; the run parked on an approval is ended by the leave itself
    (``stopping``), its held task never written. The companies that stay read only the notice."""
    d = env.deps
    svc, rooms = Services(d), RoomService(d.room)
    hold_cross_company_tasks(d, "bolt")
    task = {"kind": "create_task", "to": "a1", "title": "Check", "body": "Check it."}
    env.server.set_script(
        "b1",
        [
            {"reply": {"text": "Asking acme.", "actions": [task]}},
            {"reply": {"text": "posted after my company left"}, "delay_s": 1.5},
        ],
    )
    rooms.post_message("r1", ANN_AUTHOR, "@b1 hand a task over", [])
    until(lambda: any(r.status == "waiting_approval" for r in d.ledger.runs_in_room("r1")))
    rooms.post_message("r1", ANN_AUTHOR, "@b1 and say something", [])
    until(lambda: env.server.count("b1") == 2)  # the second run's request is at the model
    assert svc.rooms.leave(BOB, "r1") == 1, "the parked run was ended by the leave"
    env.stack.wait_quiet(30)
    runs = sorted((r for r in d.ledger.runs_in_room("r1") if r.agent_id == "bolt.b1"), key=lambda r: r.started_at)
    assert [r.status for r in runs] == ["stopped", "stopped"], [(r.status, r.error) for r in runs]
    assert runs[1].reply_message_id is None
    texts = [m.text for m in d.room.all_messages("r1") if m.author.id == "bolt.b1"]
    assert len(texts) == 1 and texts[0].startswith("Asking acme."), "nothing of bolt's landed after the leave"
    assert d.room.all_tasks("r1") == [], "the held task is not written"
    [approval] = d.room.approvals("r1")
    assert approval.status == "stopped" and approval.decided_by == "bob"
    assert d.ledger.active_runs(agent_id="bolt.b1") == []
    notices = [m.text for m in d.room.all_messages("r1") if m.kind == "notice"]
    assert "bolt left the room (bob)." in notices


def test_the_last_member_leaving_drops_the_rooms_pending_invitations(env: Env) -> None:
    """No company joins a room on the word of one that left: when the last member company
    leaves, the room's pending invitations go with it (accepting one is a 404)."""
    svc = Services(env.deps)
    svc.rooms.create(ANN, name="r-alone", members=["bolt"], room_id="r-alone")
    assert [i["room_id"] for i in svc.rooms.invitations(BOB)] == ["r-alone"]
    svc.rooms.leave(ANN, "r-alone")
    assert svc.rooms.invitations(BOB) == []
    with pytest.raises(NotFound):
        svc.rooms.accept(BOB, "r-alone")
    room = env.deps.room.get_room("r-alone")
    assert room is not None and room.members == [] and room.invited == {}


def test_an_invitation_is_not_accepted_once_the_last_member_left(env: Env) -> None:
    """The last member's leave takes it out of the room, then drops the invitations: an accept
    landing between the two finds no member left and is a 404; the room stays without members."""
    svc = Services(env.deps)
    room = svc.rooms.create(ANN, name="r-gone", members=["bolt"], room_id="r-gone").room
    assert env.deps.room.remove_member("r-gone", "acme", room.members)  # the leave's first write alone
    with pytest.raises(NotFound):
        svc.rooms.accept(BOB, "r-gone")
    after = env.deps.room.get_room("r-gone")
    assert after is not None and after.members == [] and "bolt" in after.invited
