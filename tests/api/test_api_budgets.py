"""A company's budget and spend through the API (design §12.4): its own people read and set them;
another company, an operator or a company outside the room find no such company; bad limits are
a 4xx that says what is wrong. The spend figures come from the counters the runs keep."""

from __future__ import annotations

import time

from apihelpers import World


def test_only_the_companys_people_read_and_set_its_budget(light_world: World) -> None:
    api, t = light_world.api, light_world.tokens
    got = api.ok("GET", "/companies/acme/budget", t["ann"])
    assert {k: v for k, v in got.items() if v} == {}, "no budget yet: no limit"
    body = {"daily_usd": 20, "monthly_usd": 300, "agents": {"a1": {"daily_usd": 5}}}
    set_ = api.ok("PUT", "/companies/acme/budget", t["ann"], body)
    assert set_["daily_usd"] == 20 and set_["agents"]["a1"]["daily_usd"] == 5
    assert api.ok("GET", "/companies/acme/budget", t["amy"])["monthly_usd"] == 300
    for who in ("bob", "carl", "admin"):  # another company, one outside the room, an operator
        assert api.call("GET", "/companies/acme/budget", t[who]).status == 404, who
        assert api.call("PUT", "/companies/acme/budget", t[who], {"daily_usd": 1}).status == 404, who
        assert api.call("GET", "/companies/acme/spend", t[who]).status == 404, who
    assert api.ok("GET", "/companies/acme/budget", t["ann"])["daily_usd"] == 20, "nothing changed"


def test_bad_limits_are_refused_with_a_reason(light_world: World) -> None:
    api, t = light_world.api, light_world.tokens
    for bad in (
        {"daily_usd": -1},
        {"daily_usd": "twenty"},
        {"daily_tokens": 1.5},
        {"weekly_usd": 5},
        {"agents": {"no such/name": {"daily_usd": 1}}},
        {"agents": {"a1": {"daily_usd": 1, "extra": 2}}},
        [],
    ):
        r = api.call("PUT", "/companies/acme/budget", t["ann"], bad)
        assert 400 <= r.status < 500, (bad, r.status, r.body)
        assert "Traceback" not in str(r.body) and r.body, bad
    r = api.call("GET", "/companies/acme/spend?period=week", t["ann"])
    assert r.status in (400, 422) and "period" in str(r.body), r.body


def test_spend_counts_the_companys_requests_and_not_another_companys(light_world: World) -> None:
    api, t = light_world.api, light_world.tokens
    api.ok("PUT", "/companies/acme/budget", t["ann"], {"daily_usd": 20})
    api.ok("POST", "/rooms/r1/messages", t["ann"], {"text": "@a1 and @b1, hello"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = api.ok("GET", "/rooms/r1/runs", t["ann"])["runs"] + api.ok("GET", "/rooms/r1/runs", t["bob"])["runs"]
        if len(runs) == 2 and all(r["status"] not in ("running", "waiting_approval") for r in runs):
            break
        time.sleep(0.2)
    acme = api.ok("GET", "/companies/acme/spend", t["ann"])
    bolt = api.ok("GET", "/companies/bolt/spend?period=month", t["bob"])
    assert acme["period"] == "day" and acme["budget_usd"] == 20 and acme["reserved_usd"] == 0
    assert bolt["period"] == "month" and bolt["budget_usd"] is None
    # each company's counters hold its own agent's request only
    assert set(acme["agents"]) == {"acme.a1"} and set(bolt["agents"]) == {"bolt.b1"}
    spent = [acme["agents"]["acme.a1"], bolt["agents"]["bolt.b1"]]
    assert all(f["spent_usd"] > 0 or f["spent_tokens"] > 0 for f in spent), spent
