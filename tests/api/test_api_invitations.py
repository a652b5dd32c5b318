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
    assert [(i["room_id"], i["room_name"], i["company"], i["invited_by"]) for i in pending if i["room_id"] == room] == [
        (room, "r-consent-api", "bolt", "acme")  # the name too: the invited company cannot read the room yet
    ]
    assert room not in api.ok("GET", "/rooms", bob)["rooms"]
    assert api.call("GET", f"/rooms/{room}", bob).status == 404
    assert api.call("POST", f"/rooms/{room}/invitations/accept", ann).status == 404  # acme is not invited
    assert "bolt" in api.ok("POST", f"/rooms/{room}/invitations/accept", bob)["members"]
    assert room in api.ok("GET", "/rooms", bob)["rooms"]
    assert not [i for i in api.ok("GET", "/invitations", bob)["invitations"] if i["room_id"] == room]
    assert api.ok("POST", f"/rooms/{room}/leave", bob) == {"room_id": room, "left": "bolt", "stopping": 0}
    assert room not in api.ok("GET", "/rooms", bob)["rooms"]
    assert "bolt" not in api.ok("GET", f"/rooms/{room}", ann)["members"]
    notices = [m["text"] for m in api.ok("GET", f"/rooms/{room}/messages", ann)["messages"] if m["kind"] == "notice"]
    assert notices == ["bolt left the room (bob)."], notices  # the companies that stay are told
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


def test_adding_a_company_invites_it_and_its_agents_wait_for_its_yes(light_world: World) -> None:
    """``POST /rooms`` with ``members`` and ``POST /rooms/{room}/members`` invite (design §5): the
    answer says ``invited``, the room lists the company under ``invited``, its person sees only
    the invitation, and placing its agent is a 403 saying it has not accepted; after accepting
    it is a member and places its agent."""
    api, ann, bob, carl = (light_world.api, *(light_world.tokens[p] for p in ("ann", "bob", "carl")))
    made = api.call("POST", "/rooms", ann, {"name": "r-invites", "members": ["cato"]})
    assert made.status == 201 and (made.body["members"], made.body["invited"]) == (["acme"], ["cato"])
    room = made.body["id"]
    assert room not in api.ok("GET", "/rooms", carl)["rooms"]
    assert api.call("GET", f"/rooms/{room}", carl).status == 404
    assert [
        (i["invited_by"], i["room_name"])
        for i in api.ok("GET", "/invitations", carl)["invitations"]
        if i["room_id"] == room
    ] == [("acme", "r-invites")]
    api.ok("POST", "/agents", carl, {"name": "c1", "provider": "openai", "model": "m", "api_key": "sk-cato-test-0001"})
    refused = api.call("POST", f"/rooms/{room}/agents", carl, {"agent": "c1"})
    assert refused.status == 403 and "has not accepted the invitation" in refused.body["message"], refused.body
    again = api.call("POST", f"/rooms/{room}/members", ann, {"company": "cato"})
    assert again.status == 409 and "invited" in again.body["message"]
    invited = api.call("POST", f"/rooms/{room}/members", ann, {"company": "bolt"})
    assert invited.status == 201
    assert {k: invited.body[k] for k in ("room_id", "company", "invited_by", "status")} == {
        "room_id": room,
        "company": "bolt",
        "invited_by": "acme",
        "status": "invited",
    }
    assert invited.body["invited_at"]
    assert api.ok("GET", f"/rooms/{room}", ann)["members"] == ["acme"]
    assert api.call("POST", f"/rooms/{room}/members", carl, {"company": "bolt"}).status == 404  # cato is no member
    assert api.ok("POST", f"/rooms/{room}/invitations/accept", carl)["invited"] == ["bolt"]
    assert api.call("POST", f"/rooms/{room}/agents", carl, {"agent": "c1"}).status == 201
    joined = api.ok("POST", f"/rooms/{room}/invitations/accept", bob)
    assert (joined["members"], joined["invited"]) == (["acme", "cato", "bolt"], [])
    assert api.call("POST", f"/rooms/{room}/agents", bob, {"agent": "b1"}).status == 201
    # leaving takes the company's agents out with it: none of them is woken there again
    api.ok("POST", f"/rooms/{room}/leave", bob)
    left = api.ok("GET", f"/rooms/{room}", ann)
    assert left["members"] == ["acme", "cato"] and [a["id"] for a in left["agents"]] == ["cato.c1"]
    posted = api.ok("POST", f"/rooms/{room}/messages", ann, {"text": "@b1 still there?"})
    assert posted["mentions"] == []


def test_accepting_is_one_transaction(light_world: World) -> None:
    """The invitation's end and the membership are written together (design §5): accepting
    makes exactly one DynamoDB write call, a ``TransactWriteItems``, so no crash leaves a member
    with a pending invitation or an invitation gone without the membership."""
    rooms = Services(default_deps()).rooms
    ann, bob = Caller(company="acme", member="ann"), Caller(company="bolt", member="bob")
    room = rooms.create(ann, name="r-one-write", members=["bolt"]).room.id
    writes: list[str] = []
    events = rooms.store.db.meta.events

    def seen(model, **_: object) -> None:
        if not model.name.startswith(("Get", "Query", "BatchGet", "Scan", "Describe")):
            writes.append(model.name)

    events.register("before-call.dynamodb", seen)
    try:
        view = rooms.accept(bob, room)
    finally:
        events.unregister("before-call.dynamodb", seen)
    assert writes == ["TransactWriteItems"]
    assert view.room.members == ["acme", "bolt"] and view.room.invited == {}
    assert rooms.store.get_invitation(room, "bolt") is None
    assert not [i for i in rooms.invitations(bob) if i["room_id"] == room]


def test_a_room_item_from_before_invitations_takes_one(light_world: World) -> None:
    """A room item written before invitations has no ``invited`` map: inviting to it still works
    (the data layer gives it an empty map, then holds the seat)."""
    from quayutec.dal import keys

    rooms = Services(default_deps()).rooms
    ann = Caller(company="acme", member="ann")
    room = rooms.create(ann, name="r-old").room.id
    store = rooms.store
    store.db.update_item(TableName=store.table, Key=keys.room_key(room), UpdateExpression="REMOVE invited")
    assert "invited" not in store.db.get_item(TableName=store.table, Key=keys.room_key(room))["Item"]
    assert rooms.invite(ann, room, "bolt")["status"] == "invited"
    assert rooms.get(ann, room).room.invited == {"bolt": "acme"}
    rooms.accept(Caller(company="bolt", member="bob"), room)
    assert rooms.get(ann, room).room.members == ["acme", "bolt"]
