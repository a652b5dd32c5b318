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


def test_the_invitation_routes_accept_decline_and_leave(light_world: World) -> None:
    """``GET /invitations``, ``POST /rooms/{room}/invitations/accept|decline`` and
    ``POST /rooms/{room}/leave`` (design §5): what the invited company's person sees and does."""
    api, ann, bob = light_world.api, light_world.tokens["ann"], light_world.tokens["bob"]
    room = api.ok("POST", "/rooms", ann, {"name": "r-consent-api"})["id"]
    rooms = Services(default_deps()).rooms
    rooms.invite(Caller(company="acme", member="ann"), room, "bolt")
    pending = api.ok("GET", "/invitations", bob)["invitations"]
    assert [(i["room_id"], i["company"], i["invited_by"]) for i in pending if i["room_id"] == room] == [
        (room, "bolt", "acme")
    ]
    assert room not in api.ok("GET", "/rooms", bob)["rooms"]
    assert api.call("GET", f"/rooms/{room}", bob).status == 404
    assert api.call("POST", f"/rooms/{room}/invitations/accept", ann).status == 404  # acme is not invited
    assert "bolt" in api.ok("POST", f"/rooms/{room}/invitations/accept", bob)["members"]
    assert room in api.ok("GET", "/rooms", bob)["rooms"]
    assert not [i for i in api.ok("GET", "/invitations", bob)["invitations"] if i["room_id"] == room]
    assert api.ok("POST", f"/rooms/{room}/leave", bob) == {"room_id": room, "left": "bolt"}
    assert room not in api.ok("GET", "/rooms", bob)["rooms"]
    assert "bolt" not in api.ok("GET", f"/rooms/{room}", ann)["members"]
    assert api.call("POST", f"/rooms/{room}/leave", bob).status == 404
    rooms.invite(Caller(company="acme", member="ann"), room, "bolt")
    assert api.ok("POST", f"/rooms/{room}/invitations/decline", bob) == {"room_id": room, "declined": "bolt"}
    assert api.call("POST", f"/rooms/{room}/invitations/accept", bob).status == 404
    assert api.call("POST", f"/rooms/{room}/invitations/decline", bob).status == 404
    assert room not in api.ok("GET", "/rooms", bob)["rooms"]


def test_the_openapi_document_has_the_invitation_routes() -> None:
    import json

    from quayutec.api.app import openapi_json

    paths = json.loads(openapi_json())["paths"]
    assert "get" in paths["/invitations"]
    for path in (
        "/rooms/{room_id}/invitations/accept",
        "/rooms/{room_id}/invitations/decline",
        "/rooms/{room_id}/leave",
    ):
        assert "post" in paths[path], path
