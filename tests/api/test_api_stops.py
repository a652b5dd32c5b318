"""Who may pause an agent and stop a chain, through the API (design §12.2): a person of the agent's
company pauses and resumes it (another company's person gets 404, as for any of its agents); any
person in the room stops a chain there (a company outside the room may not)."""

from __future__ import annotations

import time

from apihelpers import World


def test_only_the_agents_company_pauses_and_resumes_it(light_world: World) -> None:
    api, t = light_world.api, light_world.tokens
    assert api.call("POST", "/agents/acme.a1/pause", t["bob"]).status == 404, "another company's agent"
    paused = api.ok("POST", "/agents/a1/pause", t["ann"])
    assert paused["paused_by"] == "ann" and paused["paused_at"]
    assert api.ok("POST", "/agents/a1/pause", t["amy"])["paused_by"] == "ann", "idempotent: the first pause stands"
    notices = [m["text"] for m in api.ok("GET", "/rooms/r1/messages", t["bob"])["messages"] if m["kind"] == "notice"]
    assert notices == ["acme.a1 was paused by ann (acme): no run of it starts until it is resumed."]
    # a message for the paused agent: it does not wake, and its company's runs listing says why
    msg = api.ok("POST", "/rooms/r1/messages", t["bob"], {"text": "@a1 are you there?"})
    deadline, refused = time.monotonic() + 60, []
    while time.monotonic() < deadline and not refused:
        refused = api.ok("GET", "/rooms/r1/runs", t["ann"])["not_started"]
        time.sleep(0.2)
    assert [(n["agent_id"], n["reason"], n["chain_id"], n["by_company"]) for n in refused] == [
        ("acme.a1", "paused", msg["id"], "bolt")
    ]
    assert api.ok("GET", "/rooms/r1/runs", t["ann"])["runs"] == [], "no run started"
    assert api.ok("GET", "/rooms/r1/runs", t["bob"])["not_started"] == [], "another company's agents: not listed"
    resumed = api.ok("POST", "/agents/a1/resume", t["amy"])
    assert resumed.get("paused_at") is None
    assert api.call("POST", "/agents/acme.a1/resume", t["bob"]).status == 404


def test_any_person_in_the_room_stops_a_chain_and_outsiders_may_not(light_world: World) -> None:
    api, t = light_world.api, light_world.tokens
    msg = api.ok("POST", "/rooms/r1/messages", t["ann"], {"text": "@a1 hello"})
    deadline = time.monotonic() + 60
    runs: list = []
    while time.monotonic() < deadline and not runs:
        runs = api.ok("GET", "/rooms/r1/runs", t["ann"])["runs"]
        time.sleep(0.2)
    assert runs and runs[0]["chain_id"] == msg["id"], "a person's message names the chain of its wakes"
    chain = runs[0]["chain_id"]
    assert api.call("POST", f"/rooms/r1/chains/{chain}/stop", t["carl"]).status in (403, 404), "not in the room"
    assert api.call("POST", "/rooms/r1/chains/no-such-chain/stop", t["bob"]).status == 404
    first = api.ok("POST", f"/rooms/r1/chains/{chain}/stop", t["bob"])
    assert {k: first[k] for k in ("room_id", "chain_id", "stopped")} == {
        "room_id": "r1",
        "chain_id": chain,
        "stopped": True,
    }
    assert first["stopping"] in (0, 1), "a1's run, parked on its approval or not, is the chain's only run"
    assert api.ok("POST", f"/rooms/r1/chains/{chain}/stop", t["ann"])["stopped"] is False
    texts = [m["text"] for m in api.ok("GET", "/rooms/r1/messages", t["ann"])["messages"]]
    assert sum("was stopped by bob (bolt)" in x for x in texts) == 1
