"""Rooms by consent on the run path (docs/design.md §5): a company invited to a room and not yet
accepted has no agent in it, so a room message wakes none of its agents, by @mention or ``to``;
once a person of it accepts and places its agent, the same message wakes it. Real path on the
local stack: stream, queue, executions, the provider's wire format from the local server."""

from __future__ import annotations

import pytest
from runhelpers import ANN, BOB, Env

from quayutec.errors import Forbidden, InvalidInput
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
