"""A company changes and deletes its agents through the API (design §2.2, §12.2): PATCH changes
what the next run reads, DELETE ends the agent for good (its parked run stopped, out of its
rooms, its policy rules gone, its past runs kept, its id never given again); another company's
agent answers 404 to both."""

from __future__ import annotations

import time

import boto3
from apihelpers import ACME_KEY, World

from quayutec.deps import default_deps, secret_name


def _wait(predicate, timeout_s: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_patch_changes_what_the_next_run_reads_and_only_for_its_company(world: World) -> None:
    api, t = world.api, world.tokens
    assert api.call("PATCH", "/agents/acme.a1", t["bob"], {"instructions": "x"}).status == 404
    changed = api.ok("PATCH", "/agents/a1", t["ann"], {"instructions": "Answer in French.", "wake_from": "people"})
    assert (changed["instructions"], changed["wake_from"], changed["model"]) == (
        "Answer in French.",
        "people",
        "claude-test",
    ), "what is left out stays"
    assert api.ok("GET", "/agents/a1", t["amy"])["instructions"] == "Answer in French."
    too_small = api.call("PATCH", "/agents/a1", t["ann"], {"max_context_tokens": 10})
    assert too_small.status == 400 and "max_context_tokens" in too_small.body["message"]
    assert api.call("PATCH", "/agents/a1", t["ann"], {"provider": "openai"}).status in (400, 422), "no provider change"
    bad_key = api.call("PATCH", "/agents/a1", t["ann"], {"api_key": "sk with spaces\n"})
    assert bad_key.status in (400, 422) and "sk with" not in str(bad_key.body), "a bad key is refused, never echoed"
    rotated = api.ok("PATCH", "/agents/a1", t["ann"], {"api_key": "sk-acme-rotated-0002", "wake_from": "anyone"})
    assert rotated["key_stored"] is True and "api_key" not in rotated
    sm = boto3.client("secretsmanager", region_name="us-east-1")
    name = secret_name(default_deps().settings, "acme", "anthropic")
    assert sm.get_secret_value(SecretId=name)["SecretString"] == "sk-acme-rotated-0002"
    sm.put_secret_value(SecretId=name, SecretString=ACME_KEY)  # the provider server expects the seed's key


def test_delete_ends_the_agent_for_good_and_keeps_its_past(world: World, stack_env) -> None:  # type: ignore[no-untyped-def]
    api, t, stack = world.api, world.tokens, stack_env[0]
    api.ok(
        "PUT",
        "/companies/acme/policy",
        t["ann"],
        {"actions": {"remember": "ask"}, "agents": {"A1": {"create_task": "deny"}}},
    )
    assert api.call("DELETE", "/agents/acme.a1", t["bob"]).status == 404, "another company's agent"
    run_id = world.ids["run"]
    assert stack.is_parked(run_id), "a1's run waits on its approval"
    gone = api.ok("DELETE", "/agents/a1", t["ann"])
    assert gone["deleted_by"] == "ann" and gone["deleted_at"] and gone["stopping"] == 1
    stack.wait_quiet(60)
    run = _wait(
        lambda: next((r for r in api.ok("GET", "/rooms/r1/runs", t["ann"])["runs"] if r["status"] == "stopped"), None)
    )
    assert run["run_id"] == run_id, "its parked run ended stopped and stays in the ledger"
    room = api.ok("GET", "/rooms/r1", t["bob"])
    assert [a["id"] for a in room["agents"]] == ["bolt.b1"], "it left the room"
    notices = [m["text"] for m in api.ok("GET", "/rooms/r1/messages", t["bob"])["messages"] if m["kind"] == "notice"]
    assert sum("acme.a1 was deleted by ann (acme)" in n for n in notices) == 1
    assert api.ok("GET", "/companies/acme/policy", t["ann"])["agents"] == {}, "its rules ended"
    assert api.call("GET", "/agents/a1", t["ann"]).status == 404
    assert api.call("PATCH", "/agents/a1", t["ann"], {"instructions": "x"}).status == 404
    assert api.call("POST", "/agents/a1/resume", t["ann"]).status == 404, "a deleted agent is not resumed"
    assert [a["id"] for a in api.ok("GET", "/agents", t["ann"])["agents"]] == []
    again = api.call("POST", "/agents", t["ann"], {"name": "A1", "provider": "anthropic", "model": "claude-test"})
    assert again.status == 409 and "never given to another" in again.body["message"]
    assert api.call("POST", "/rooms/r1/agents", t["ann"], {"agent": "a1"}).status == 404, "not placed again"
    repeat = api.ok("DELETE", "/agents/acme.a1", t["amy"])
    assert (repeat["deleted_at"], repeat["deleted_by"], repeat["stopping"]) == (gone["deleted_at"], "ann", 0)
    notices = [m["text"] for m in api.ok("GET", "/rooms/r1/messages", t["bob"])["messages"] if m["kind"] == "notice"]
    assert sum("acme.a1 was deleted" in n for n in notices) == 1, "a repeat posts nothing new"


def test_a_wake_on_its_way_when_the_agent_is_deleted_starts_no_run(world: World, stack_env) -> None:  # type: ignore[no-untyped-def]
    """A wake relayed before the delete and claimed after it is refused as ``deleted``."""
    api, t, stack = world.api, world.tokens, stack_env[0]
    api.ok("POST", "/agents", t["bob"], {"name": "b2", "provider": "openai", "model": "gpt-test"})
    api.ok("POST", "/rooms/r1/agents", t["bob"], {"agent": "b2"})
    with stack.paused():
        msg = api.ok("POST", "/rooms/r1/messages", t["ann"], {"text": "@b2 are you there?"})
        api.ok("DELETE", "/agents/b2", t["bob"])
    stack.wait_quiet(60)
    refused = _wait(lambda: api.ok("GET", "/rooms/r1/runs", t["bob"])["not_started"])
    assert [(n["agent_id"], n["reason"], n["chain_id"]) for n in refused] == [("bolt.b2", "deleted", msg["id"])]
    assert not any(r["agent_id"] == "bolt.b2" for r in api.ok("GET", "/rooms/r1/runs", t["bob"])["runs"])
