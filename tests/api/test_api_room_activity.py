"""What the room page shows of the room's activity (docs/design.md §9): a reply and a run's notices
name their run (``run_id``); a failed run's room notice says whom and what to ask again
(``ask_again``); the agents with a run in flight are ``busy_agents`` of ``GET /rooms/{room}`` and
of every changes answer, for every member, their ids and nothing more; a message whose wake the
claim refused carries ``not_woken`` (who, why) in the listing, and the changes poll brings each
refusal once (``not_woken``), also when it came after the message did."""

from __future__ import annotations

import json
from typing import Any

from apihelpers import World

REJECTED = {
    "error": {
        "status": 400,
        "headers": {},
        "body": {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}},
    }
}


def changes(w: World, person: str, since: str | None = None) -> dict[str, Any]:
    return w.api.ok("GET", "/rooms/r1/changes" + (f"?since={since}" if since else ""), w.tokens[person])


def drain(w: World, person: str, since: str) -> tuple[list[dict[str, Any]], str]:
    answers = []
    for _ in range(50):
        got = changes(w, person, since)
        answers.append(got)
        since = got["cursor"]
        if not got["more"]:
            return answers, since
    raise AssertionError("the changes never ended")


def messages(w: World, person: str) -> list[dict[str, Any]]:
    return w.api.ok("GET", "/rooms/r1/messages?limit=100&order=desc", w.tokens[person])["messages"]


def test_busy_agents_name_the_agents_with_a_run_in_flight_for_every_member(stack_env, world: World) -> None:
    w, (stack, _) = world, stack_env
    run_id = w.ids["run"]  # a1's run, parked on its held action: in flight
    for person in ("ann", "bob"):
        room = w.api.ok("GET", "/rooms/r1", w.tokens[person])
        assert room["busy_agents"] == ["acme.a1"], room
        start = changes(w, person)
        assert start["busy_agents"] == ["acme.a1"] and start["not_woken"] == []
        assert changes(w, person, start["cursor"])["busy_agents"] == ["acme.a1"]
    # the busy field says who, never which run: bolt's answers hold no id of acme's run
    bob_room = w.api.ok("GET", "/rooms/r1", w.tokens["bob"])
    assert run_id not in json.dumps(bob_room)
    bob_cursor = changes(w, "bob")["cursor"]
    assert run_id not in json.dumps(changes(w, "bob", bob_cursor))

    w.api.ok("POST", f"/rooms/r1/approvals/{w.ids['approval']}/deny", w.tokens["ann"])  # a1's run ends
    stack.wait_quiet(60)
    assert w.api.ok("GET", "/rooms/r1", w.tokens["bob"])["busy_agents"] == []
    answers, _ = drain(w, "bob", bob_cursor)
    assert answers[-1]["busy_agents"] == []
    # other routes answering a room do not read it
    assert w.api.ok("GET", "/rooms/r1/members", w.tokens["ann"])["busy_agents"] == []


def test_replies_and_run_notices_name_their_run_and_a_failed_one_says_what_to_ask_again(
    stack_env, world: World
) -> None:
    w, (stack, server) = world, stack_env
    stack.wait_quiet(60)
    server.set_script("a1", [REJECTED, {"reply": {"text": "The plan: stalls first."}}])
    asked = w.api.ok("POST", "/rooms/r1/messages", w.tokens["bob"], {"text": "@a1 what is the plan?"})
    stack.wait_quiet(60)
    failed = [
        r for r in w.api.ok("GET", "/rooms/r1/runs", w.tokens["ann"])["runs"] if r["wake_id"].endswith(asked["id"])
    ]
    assert [r["status"] for r in failed] == ["failed_before_reply"], failed
    run_id = failed[0]["run_id"]
    for person in ("ann", "bob"):
        [notice] = [m for m in messages(w, person) if m["kind"] == "notice" and m.get("ask_again")]
        assert notice["run_id"] == run_id and notice["text"].startswith("acme.a1 could not answer")
        assert notice["ask_again"] == {"agent": "acme.a1", "message_id": asked["id"]}
    # acme's own notice with the cause names the run too
    [why] = [m for m in messages(w, "ann") if m.get("visible_to") == "acme" and run_id in m["text"]]
    assert why["run_id"] == run_id and why.get("ask_again") is None

    # asking again: a new message, a new run, whose reply names it
    again = w.api.ok("POST", "/rooms/r1/messages", w.tokens["bob"], {"text": "@a1 asking again: what is the plan?"})
    stack.wait_quiet(60)
    [run] = [
        r for r in w.api.ok("GET", "/rooms/r1/runs", w.tokens["ann"])["runs"] if r["wake_id"].endswith(again["id"])
    ]
    assert run["status"] == "completed" and run["reply_message_id"]
    for person in ("ann", "bob"):
        [reply] = [m for m in messages(w, person) if m["id"] == run["reply_message_id"]]
        assert reply["kind"] == "reply" and reply["run_id"] == run["run_id"]


def test_a_message_whose_wake_was_refused_says_who_did_not_wake_and_why(stack_env, world: World) -> None:
    w, (stack, _) = world, stack_env
    stack.wait_quiet(60)
    cursors = {p: changes(w, p)["cursor"] for p in ("ann", "bob")}
    w.api.ok("POST", "/agents/b1/pause", w.tokens["bob"])
    w.api.ok("PATCH", "/agents/a1", w.tokens["ann"], {"wake_from": "own_company"})
    try:
        # ann's message: a1 (her company's) may be woken by her and runs; b1 is paused
        both = w.api.ok("POST", "/rooms/r1/messages", w.tokens["ann"], {"text": "@a1 @b1 status?"})
        # bob's: a1 admits its own company only
        other = w.api.ok("POST", "/rooms/r1/messages", w.tokens["bob"], {"text": "@a1 can bolt ask?"})
        stack.wait_quiet(60)
        for person in ("ann", "bob"):
            seen = {m["id"]: m for m in messages(w, person)}
            assert seen[both["id"]]["not_woken"] == [{"agent": "bolt.b1", "why": "paused"}]
            assert seen[other["id"]]["not_woken"] == [{"agent": "acme.a1", "why": "wake_from"}]
            answers, cursor = drain(w, person, cursors[person])
            got = [n for a in answers for n in a["not_woken"]]
            assert sorted(got, key=lambda n: n["message_id"]) == sorted(
                [
                    {"message_id": both["id"], "agent": "bolt.b1", "why": "paused"},
                    {"message_id": other["id"], "agent": "acme.a1", "why": "wake_from"},
                ],
                key=lambda n: n["message_id"],
            )
            assert changes(w, person, cursor)["not_woken"] == []  # each refusal once
    finally:
        w.api.ok("POST", "/agents/b1/resume", w.tokens["bob"])
        w.api.ok("PATCH", "/agents/a1", w.tokens["ann"], {"wake_from": "anyone"})
        stack.wait_quiet(60)
