"""The limits on what one item holds (docs/design.md §1, "Limits"): a room's agents and member
companies, a company's people and policy rules. Past one, the API answers 409 ``limit_reached``
naming the limit and its setting, and writes nothing. Here the limits are set low (settings, as
``cdk deploy -c maxRoomAgents=...`` sets them); tests/unit/test_item_limits.py writes each item
at the highest values they may be set to."""

from __future__ import annotations

from apihelpers import ADMIN_TOKEN, World

STACK_SETTINGS = {"MAX_ROOM_AGENTS": "2", "MAX_ROOM_MEMBERS": "3", "MAX_COMPANY_PEOPLE": "3", "MAX_POLICY_RULES": "1"}


def _limit(r, setting: str, limit: int) -> None:
    assert r.status == 409, (r.status, r.body)
    assert r.body["error"] == "limit_reached" and r.body["message"].endswith(f"the limit is {limit} ({setting})"), (
        r.body
    )


def test_past_each_limit_is_a_409_naming_it_and_nothing_is_written(light_world: World) -> None:
    api, ann = light_world.api, light_world.tokens["ann"]
    # a room's agents: r1 holds a1 and b1 (2)
    api.ok("POST", "/agents", ann, {"name": "a2", "provider": "anthropic", "model": "claude-test"})
    _limit(api.call("POST", "/rooms/r1/agents", ann, {"agent": "a2"}), "MAX_ROOM_AGENTS", 2)
    assert sorted(a["name"] for a in api.ok("GET", "/rooms/r1", ann)["agents"]) == ["a1", "b1"]
    # a room's member companies: r1 has acme and bolt; cato's pending invitation makes 3 (an
    # invitation holds a seat, design §5); one more is past it, until cato declines
    api.ok("POST", "/companies", ADMIN_TOKEN, {"id": "dune", "people": ["dan"]})
    api.ok("POST", "/rooms/r1/members", ann, {"company": "cato"})
    _limit(api.call("POST", "/rooms/r1/members", ann, {"company": "dune"}), "MAX_ROOM_MEMBERS", 3)
    r1 = api.ok("GET", "/rooms/r1", ann)
    assert (r1["members"], r1["invited"]) == (["acme", "bolt"], ["cato"])
    dan = api.ok("POST", "/companies/dune/tokens", ADMIN_TOKEN, {"member": "dan"})["token"]
    assert api.call("GET", "/invitations", dan).body["invitations"] == []  # nothing written for dune
    api.ok("POST", "/rooms/r1/invitations/decline", light_world.tokens["carl"])
    assert api.ok("POST", "/rooms/r1/members", ann, {"company": "dune"})["status"] == "invited"
    _limit(api.call("POST", "/rooms/r1/members", ann, {"company": "cato"}), "MAX_ROOM_MEMBERS", 3)
    api.ok("POST", "/rooms/r1/invitations/accept", dan)  # the seat it held: no limit at acceptance
    assert api.ok("GET", "/rooms/r1", ann)["members"] == ["acme", "bolt", "dune"]
    created = api.call("POST", "/rooms", ann, {"name": "big", "members": ["bolt", "cato", "dune"]})
    _limit(created, "MAX_ROOM_MEMBERS", 3)
    # a company's people: acme has ann and amy; a third fits, a fourth does not
    api.ok("POST", "/companies/acme/people", ADMIN_TOKEN, {"person": "abe"})
    _limit(api.call("POST", "/companies/acme/people", ADMIN_TOKEN, {"person": "ada"}), "MAX_COMPANY_PEOPLE", 3)
    assert api.ok("GET", "/companies/acme", ann)["people"] == ["ann", "amy", "abe"]
    _limit(
        api.call("POST", "/companies", ADMIN_TOKEN, {"id": "eon", "people": ["e1", "e2", "e3", "e4"]}),
        "MAX_COMPANY_PEOPLE",
        3,
    )
    assert api.call("GET", "/companies/eon", ADMIN_TOKEN).status == 404
    # a company's policy rules: one agent with rules of its own; two are past it
    before = api.ok("GET", "/companies/acme/policy", ann)
    two = {"agents": {"a1": {"remember": "deny"}, "a2": {"remember": "deny"}}}
    _limit(api.call("PUT", "/companies/acme/policy", ann, two), "MAX_POLICY_RULES", 1)
    assert api.ok("GET", "/companies/acme/policy", ann) == before
    api.ok("PUT", "/companies/acme/policy", ann, {"agents": {"a1": {"remember": "deny"}}})
