"""Hostile leave trials (docs/design.md §5, §12.2): a company that left a room writes nothing
more into it, whatever comes next."""

from __future__ import annotations

from runhelpers import ANN, BOB, Env, until

from quayutec.logic.room_service import RoomService
from quayutec.logic.services import Services
from quayutec.logic.stops import Stops
from quayutec.models import Author

ANN_AUTHOR = Author(kind="person", id="ann", company="acme")


def _b1_runs(env: Env):
    return sorted(
        (r for r in env.deps.ledger.runs_in_room("r1") if r.agent_id == "bolt.b1"), key=lambda r: r.started_at
    )


def test_a_run_from_before_the_leave_stays_stopped_when_the_agent_is_placed_again(env: Env) -> None:
    """bolt leaves while b1's run waits on its model; ann invites bolt again, bob accepts and
    places b1 again before the reply comes: the old run was stopped by the leave and must stay
    stopped (as a pause and a quick resume still stop a run claimed before them, §12.2)."""
    d = env.deps
    svc, rooms = Services(d), RoomService(d.room)
    env.server.set_script(
        "b1",
        [
            {"reply": {"text": "posted after my company left"}, "delay_s": 2.0},
            {"reply": {"text": "a new run after the return"}},
        ],
    )
    rooms.post_message("r1", ANN_AUTHOR, "@b1 say something", [])
    until(lambda: env.server.count("b1") == 1)
    svc.rooms.leave(BOB, "r1")
    svc.rooms.invite(ANN, "r1", "bolt")
    svc.rooms.accept(BOB, "r1")
    svc.rooms.place_agent(BOB, "r1", "b1")
    env.stack.wait_quiet(30)
    texts = [m.text for m in d.room.all_messages("r1") if m.author.id == "bolt.b1"]
    assert texts == [], f"the run from before the leave wrote after it: {texts}"
    assert [r.status for r in _b1_runs(env)] == ["stopped"]
    # a new run after the return works
    rooms.post_message("r1", ANN_AUTHOR, "@b1 again", [])
    env.stack.wait_quiet(30)
    assert [r.status for r in _b1_runs(env)] == ["stopped", "completed"]


def test_an_agent_placed_while_its_company_leaves_is_not_left_in_the_room(env: Env, monkeypatch) -> None:
    """bob places another agent of bolt while another person's leave of bolt is between its read
    of the room's agents and its removal of bolt: bolt is gone, its agent must not stay."""
    d = env.deps
    svc = Services(d)
    svc.agents.register(BOB, name="b2", provider="openai", model="gpt-test", instructions="Be brief.")
    real = Stops.stop_parked

    def racing(self, runs, person):  # the leave's window: bob places b2 now
        svc.rooms.place_agent(BOB, "r1", "b2")
        return real(self, runs, person)

    monkeypatch.setattr(Stops, "stop_parked", racing)
    svc.rooms.leave(BOB, "r1")
    room = d.room.get_room("r1")
    assert room is not None and "bolt" not in room.members
    left = {a: c for a, c in d.room.room_agents("r1").items() if c == "bolt"}
    assert left == {}, f"bolt left r1 but its agents are still placed: {left}"


def test_a_placement_checked_before_the_leave_does_not_land_after_it(env: Env, monkeypatch) -> None:
    """bob's placement read bolt a member of r1; bolt's leave is answered before its write: the
    placement is refused (404), no agent of bolt is in r1."""
    import pytest

    from quayutec.errors import NotFound
    from quayutec.logic import rooms as rooms_module

    d = env.deps
    svc = Services(d)
    svc.agents.register(BOB, name="b2", provider="openai", model="gpt-test", instructions="Be brief.")
    stale = d.room.get_room("r1")
    svc.rooms.leave(BOB, "r1")
    monkeypatch.setattr(rooms_module, "member_room", lambda store, room_id, who: stale)
    with pytest.raises(NotFound):
        svc.rooms.place_agent(BOB, "r1", "b2")
    assert {a: c for a, c in d.room.room_agents("r1").items() if c == "bolt"} == {}
