"""Rooms with consent (design §5): adding a company to a room is an invitation that a person of
that company accepts or declines; until then it does not see the room; a company can leave."""

from __future__ import annotations

import pytest
from apihelpers import World

from quayutec.deps import default_deps
from quayutec.errors import Conflict, NotFound
from quayutec.logic.access import Caller
from quayutec.logic.services import Services

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")


def test_an_invited_company_sees_the_room_only_once_it_accepts_and_may_decline_or_leave(
    light_world: World,
) -> None:
    rooms = Services(default_deps()).rooms
    ann, bob = Caller(company="acme", member="ann"), Caller(company="bolt", member="bob")
    room = rooms.create(ann, name="r-consent").room.id
    rooms.invite(ann, room, "bolt")
    assert room not in rooms.list(bob)
    assert [i["room_id"] for i in rooms.invitations(bob) if i["room_id"] == room] == [room]
    with pytest.raises(Conflict):
        rooms.invite(ann, room, "bolt")
    rooms.accept(bob, room)
    assert room in rooms.list(bob) and not [i for i in rooms.invitations(bob) if i["room_id"] == room]
    rooms.leave(bob, room)
    assert room not in rooms.list(bob)
    rooms.invite(ann, room, "bolt")
    rooms.decline(bob, room)
    with pytest.raises(NotFound):
        rooms.accept(bob, room)
    assert room not in rooms.list(bob)
