"""`GET /runs/{run}/replay` (design §5.1): a1's run, whose held `remember` waits for acme's yes, is
decided again from what it recorded: the same under the same policy, otherwise once acme's
policy changes; only acme sees it; it writes nothing and asks no model."""

from __future__ import annotations

from apihelpers import ADMIN_TOKEN, World


def test_a_run_replays_the_same_until_the_policy_changes(world: World, stack_env) -> None:  # type: ignore[no-untyped-def]
    api, t = world.api, world.tokens
    stack, server = stack_env
    run_id = world.ids["run"]
    before = api.ok("GET", f"/runs/{run_id}", t["ann"])
    requests = server.count("a1")
    same = api.ok("GET", f"/runs/{run_id}/replay", t["ann"])
    assert same["same"] is True and same["differ"] == []
    assert [(d["kind"], d["decision"]) for d in same["then"]] == [("remember", "ask")]
    assert same["now"] == same["then"]
    sections = {s["section"]: s for s in same["sections"]}
    assert set(sections) == {"system", "messages", "open_tasks", "memory", "passages", "prompt"}
    assert sections["messages"]["entries"] >= 1 and sections["prompt"]["tokens"] > sections["system"]["tokens"] > 0
    api.ok("PUT", "/companies/acme/policy", t["ann"], {"actions": {"remember": "deny"}})
    differs = api.ok("GET", f"/runs/{run_id}/replay", t["amy"])
    assert differs["same"] is False and differs["differ"] == [0]
    assert differs["now"][0]["decision"] == "deny" and "rule actions.remember = deny" in differs["now"][0]["reason"]
    assert differs["then"][0]["decision"] == "ask", "what was decided then is as recorded"
    assert api.call("GET", f"/runs/{run_id}/replay", t["bob"]).status == 404, "another company's run"
    assert api.call("GET", f"/runs/{run_id}/replay", ADMIN_TOKEN).status == 403, "operators read no run"
    assert api.call("GET", "/runs/no-such-run/replay", t["ann"]).status == 404
    assert server.count("a1") == requests, "no model request"
    assert api.ok("GET", f"/runs/{run_id}", t["ann"]) == before, "nothing written"
    assert stack.is_parked(run_id), "the run still waits on its approval"
    api.ok("PUT", "/companies/acme/policy", t["ann"], {"actions": {"remember": "ask"}})


def test_a_reply_kept_in_run_data_replays_too(world: World, stack_env) -> None:  # type: ignore[no-untyped-def]
    """A reply too large for the ledger item (here: one declared action of 400 KB, which its
    validation denies) is kept in run data: the replay reads it there."""
    import time

    api, t = world.api, world.tokens
    stack, server = stack_env
    big = {
        "reply": {
            "text": "noted",
            "actions": [{"kind": "remember", "text": "w" * 400_000, "visibility": "company"}],
        }
    }
    server.set_script("b1", [big])
    api.ok("POST", "/rooms/r1/messages", t["bob"], {"text": "@b1 write it all down"})
    stack.wait_quiet(120)
    deadline, runs = time.monotonic() + 60, []
    while time.monotonic() < deadline and not runs:
        runs = [r for r in api.ok("GET", "/rooms/r1/runs", t["bob"])["runs"] if r["status"] == "completed"]
        time.sleep(0.2)
    assert runs, "b1's run completed"
    from quayutec.dal.rundata import run_data_key
    from quayutec.deps import default_deps

    deps = default_deps()
    kept = deps.rundata.s3.head_object(Bucket=deps.rundata.bucket, Key=run_data_key(runs[0]["run_id"], "reply"))
    assert kept["ContentLength"] > 380_000, "the reply is in run data, not in the ledger"
    replayed = api.ok("GET", f"/runs/{runs[0]['run_id']}/replay", t["bob"])
    assert replayed["same"] is True and [(d["kind"], d["decision"]) for d in replayed["now"]] == [("remember", "deny")]
    assert replayed["now"][0]["reason"].startswith("malformed"), replayed["now"][0]
