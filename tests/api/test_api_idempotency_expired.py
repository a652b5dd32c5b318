"""A repeat of an Idempotency-Key after its record expired (24 h) never answers text that was not
stored (docs/api.md, Idempotency-Key): the same request gets the earlier write as stored, another
request under the key is a 409 and writes nothing."""

from __future__ import annotations

from apihelpers import World

from quayutec import resources as R


def _expire_idempotency_records(world_stack) -> None:
    ddb = world_stack.client("dynamodb")
    table = R.IDEMPOTENCY_TABLE.default_name
    for item in ddb.scan(TableName=table)["Items"]:
        ddb.delete_item(TableName=table, Key={"id": item["id"]})


def test_a_memory_line_repeated_after_expiry(stack_env, light_world: World) -> None:
    stack, _ = stack_env
    api, ann = light_world.api, light_world.tokens["ann"]
    first = api.ok("POST", "/rooms/r1/memory", ann, {"text": "the crane opens at six", "visibility": "room"}, key="m1")
    _expire_idempotency_records(stack)
    again = api.ok("POST", "/rooms/r1/memory", ann, {"text": "the crane opens at six", "visibility": "room"}, key="m1")
    assert again["id"] == first["id"] and again["text"] == "the crane opens at six"
    _expire_idempotency_records(stack)
    other = api.call("POST", "/rooms/r1/memory", ann, {"text": "something else", "visibility": "room"}, key="m1")
    assert other.status == 409 and "Idempotency-Key was used for another memory line" in other.body["message"]
    texts = [m["text"] for m in api.ok("GET", "/rooms/r1/memory", ann)["lines"]]
    assert "something else" not in texts and texts.count("the crane opens at six") == 1


def test_a_task_update_repeated_after_expiry(stack_env, light_world: World) -> None:
    stack, _ = stack_env
    api, bob = light_world.api, light_world.tokens["bob"]
    task = light_world.ids["task"]
    path = f"/rooms/r1/tasks/{task}/updates"
    first = api.ok("POST", path, bob, {"note": "half done"}, key="u1")
    _expire_idempotency_records(stack)
    again = api.ok("POST", path, bob, {"note": "half done"}, key="u1")
    assert again["id"] == first["id"] and again["text"] == "half done"
    _expire_idempotency_records(stack)
    other = api.call("POST", path, bob, {"note": "all done"}, key="u1")
    assert other.status == 409 and "Idempotency-Key was used for another update" in other.body["message"], other.body
    events = api.ok("GET", f"/rooms/r1/tasks/{task}", bob)["events"]
    assert [e["text"] for e in events if e["kind"] == "update"] == ["half done"]
