"""A pause's or a chain's stop notice survives a fault (design §12.2): when its write fails once
(the request answers 503 though the stop landed), the client's retry writes it, once."""

from __future__ import annotations

import time

from apihelpers import World

from quayutec.dal import store as room_mod
from quayutec.errors import TransientError


def _wait(fn, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("timeout")


def test_a_stop_notice_lost_to_a_fault_is_written_by_the_retry(light_world: World, monkeypatch) -> None:
    api, t = light_world.api, light_world.tokens
    msg = api.ok("POST", "/rooms/r1/messages", t["ann"], {"text": "@b1 hello"})
    # the run ended, so its claim (which counts the chain) has landed whatever the load
    _wait(lambda: [r for r in api.ok("GET", "/rooms/r1/runs", t["bob"])["runs"] if r["status"] != "running"])
    orig = room_mod.RoomStore.put_message
    state = {"failed": 0}

    def put_message(self, m, *a, **kw):
        if m.id.startswith(("notice-chain-stop-", "notice-pause-")) and state["failed"] < 1:
            state["failed"] += 1
            raise TransientError("injected throttling")
        return orig(self, m, *a, **kw)

    monkeypatch.setattr(room_mod.RoomStore, "put_message", put_message)
    r1 = api.call("POST", f"/rooms/r1/chains/{msg['id']}/stop", t["ann"], key="s1")
    r2 = api.call("POST", f"/rooms/r1/chains/{msg['id']}/stop", t["ann"], key="s1")
    assert (r1.status, r2.status) == (503, 200), (r1.body, r2.body)
    notices = [
        m["text"] for m in api.ok("GET", "/rooms/r1/messages?limit=200", t["bob"])["messages"] if m["kind"] == "notice"
    ]
    # pause: the same
    state["failed"] = 0
    p1 = api.call("POST", "/agents/a1/pause", t["ann"], key="p1")
    p2 = api.call("POST", "/agents/a1/pause", t["ann"], key="p1")
    assert (p1.status, p2.status) == (503, 200), (p1.body, p2.body)
    notices2 = [
        m["text"] for m in api.ok("GET", "/rooms/r1/messages?limit=200", t["bob"])["messages"] if m["kind"] == "notice"
    ]
    assert sum("was stopped by ann" in n for n in notices) == 1, notices
    assert sum("was paused by ann" in n for n in notices2) == 1, notices2
