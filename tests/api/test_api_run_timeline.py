"""GET /runs/{run}'s timeline (docs/design.md §2.8): a finished run's phases with their spans and
durations, its model requests with a retry's wait and reason, and the cost line in words
(design §10), all from the ledger entries the run wrote (no execution history)."""

from __future__ import annotations

import time

from apihelpers import World, seed

# a1's first request gets a 429 with retry-after 1 (a Wait of 1 s), the second its reply.
PROVIDER_SCRIPTS = {
    "a1": [
        {
            "error": {
                "status": 429,
                "headers": {"retry-after": "1"},
                "body": {
                    "type": "error",
                    "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"},
                },
            }
        },
        {"reply": {"text": "Noted, after one wait."}},
    ]
}


def _finished_run(world: World, stack) -> dict:
    world.api.ok("POST", "/rooms/r1/messages", world.tokens["ann"], {"text": "@a1 hello"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = world.api.ok("GET", "/rooms/r1/runs", world.tokens["ann"])["runs"]
        done = [r for r in runs if r["agent_id"] == "acme.a1" and r["status"] == "completed"]
        if done:
            stack.wait_quiet(60)
            return world.api.ok("GET", f"/runs/{done[0]['run_id']}", world.tokens["ann"])
        time.sleep(0.1)
    raise AssertionError("a1's run never completed")


def test_a_finished_run_answers_its_timeline(stack_env, api) -> None:
    stack, _ = stack_env
    world = seed(api, stack, with_run=False)
    detail = _finished_run(world, stack)
    tl = detail["timeline"]
    phases = [p["phase"] for p in tl["phases"]]
    # ClaimAndRead, CallModel (the 429: a Wait follows), CallModel again (the reply), DecideAndPost
    assert phases == ["ClaimAndRead", "CallModel", "CallModel", "DecideAndPost"], phases
    assert all(isinstance(p["duration_ms"], int) and p["duration_ms"] >= 0 for p in tl["phases"])
    assert all(p["start"] <= p["end"] for p in tl["phases"])
    first, second = tl["requests"]
    assert (first["status"], first["outcome"], first["wait_s"]) == (429, "error", 1)
    assert "retry-after" in first["decision"] and "rate limit" in first["message"]
    assert (second["status"], second["outcome"]) == (200, "ok")
    assert tl["reply_message_id"] == detail["run"]["reply_message_id"]
    assert tl["duration_ms"] is not None and tl["parked_s"] == 0
    text = detail["cost_text"]
    assert text.startswith("$") and "tokens in" in text and "AWS calls (DynamoDB " in text, text
    # `quay ledger RUN` prints the same timeline: each phase with its duration, the retry's Wait
    # with its reason after the CallModel that got the 429, the cost in words
    from quaycli.render import request_line, timeline_lines

    lines = timeline_lines(tl, text)
    assert lines[0].startswith("timeline (") and " in all):" in lines[0]
    named = [line.split()[0] for line in lines[1:]]
    assert named == ["ClaimAndRead", "CallModel", "Wait", "CallModel", "DecideAndPost", "cost"], lines
    assert all(line.split()[2:3] and line.split()[-1].strip("█") == "" for line in lines[1:3]), lines
    wait = lines[3]
    assert "1 s" in wait and "retry-after" in wait, wait
    assert lines[-1] == f"  cost {text}"
    # a failed request's line carries the provider's own message
    assert "provider said: Number of requests has exceeded your rate limit" in request_line(detail["requests"][0])


def test_a_request_without_a_message_prints_the_body_the_provider_sent() -> None:
    from quaycli.render import request_line

    q = {
        "n": 1,
        "sent_at": "2026-12-03T10:42:07.000000Z",
        "provider": "openai",
        "status": 400,
        "outcome": "error",
        "category": "bad_request",
        "body": '{"error": {"message": "max_tokens is too large"}}',
    }
    assert 'provider said: {"error": {"message": "max_tokens is too large"}}' in request_line(q)
