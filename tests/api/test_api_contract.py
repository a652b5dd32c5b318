"""The API's contract at the edges (issue 4): Idempotency-Key on POSTs (first response again,
nothing written twice, scoped to the caller, 409 in progress, 422 on a different body), errors as
4xx JSON naming what is wrong, payload limits, unknown ids, pagination."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from importlib import metadata

import pytest
from apihelpers import Api, World

from quayinfra.build_code import project_version
from quayutec.api.context import Caller, scoped_idempotency_key
from quayutec.errors import TransientError
from quayutec.logic.room_service import RoomService

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")


def _texts(api: Api, token: str, room: str = "r1") -> list[str]:
    out, cursor = [], None
    while True:
        page = api.ok("GET", f"/rooms/{room}/messages" + (f"?cursor={cursor}" if cursor else ""), token)
        out += [m["text"] for m in page["messages"]]
        cursor = page["next_cursor"]
        if not cursor:
            return out


# ----------------------------------------------------------------------------- idempotency
def test_a_repeat_returns_the_first_response_and_writes_once(light_world: World) -> None:
    api, ann = light_world.api, light_world.tokens["ann"]
    first = api.call("POST", "/rooms/r1/messages", ann, {"text": "once only"}, key="k-once")
    again = api.call("POST", "/rooms/r1/messages", ann, {"text": "once only"}, key="k-once")
    assert first.status == again.status == 201
    assert again.body == first.body and again.header("Idempotent-Replayed") == "true"
    assert first.header("Idempotent-Replayed") is None
    assert _texts(api, ann).count("once only") == 1
    scoped = scoped_idempotency_key(
        {"httpMethod": "POST", "path": "/rooms/r1/messages", "headers": {"Idempotency-Key": "k-once"}},
        Caller("acme", "ann"),
    )
    assert first.body["id"] == "msg-" + hashlib.sha256(scoped.encode()).hexdigest()[:24]  # derived from the key


def test_a_repeat_with_a_different_body_is_422_and_writes_nothing(light_world: World) -> None:
    api, ann = light_world.api, light_world.tokens["ann"]
    assert api.call("POST", "/rooms/r1/messages", ann, {"text": "v1"}, key="k-diff").status == 201
    r = api.call("POST", "/rooms/r1/messages", ann, {"text": "v2"}, key="k-diff")
    assert r.status == 422 and r.body["error"] == "idempotency_key_reused"
    assert "v2" not in _texts(api, ann)


def test_the_key_is_scoped_to_caller_and_path(light_world: World) -> None:
    api, t = light_world.api, light_world.tokens
    a = api.ok("POST", "/rooms/r1/messages", t["ann"], {"text": "same key"}, key="k-shared")
    b = api.ok("POST", "/rooms/r1/messages", t["bob"], {"text": "same key"}, key="k-shared")
    c = api.ok("POST", "/rooms/r1/messages", t["amy"], {"text": "same key"}, key="k-shared")
    assert len({a["id"], b["id"], c["id"]}) == 3
    assert (b["author"]["id"], c["author"]["id"]) == ("bob", "amy")
    task = api.ok("POST", "/rooms/r1/tasks", t["ann"], {"to": "b1", "title": "same key"}, key="k-shared")
    assert task["id"].startswith("task-")
    assert _texts(api, t["ann"]).count("same key") == 3


def test_a_repeat_in_progress_gets_409_with_retry_after(light_world: World, monkeypatch) -> None:
    from quaylocal.dev import Gateway, direct_invoke

    api, ann = light_world.api, light_world.tokens["ann"]
    original = RoomService.post_message
    started = threading.Event()

    def slow(self, *args, **kwargs):
        started.set()
        time.sleep(1.0)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(RoomService, "post_message", slow)
    results = {}
    first = threading.Thread(
        target=lambda: results.setdefault(
            "first", api.call("POST", "/rooms/r1/messages", ann, {"text": "slow one"}, key="k-slow")
        )
    )
    first.start()
    assert started.wait(10)
    other_sandbox = Api(Gateway(direct_invoke()))  # a second Lambda sandbox, as a concurrent request gets
    second = other_sandbox.call("POST", "/rooms/r1/messages", ann, {"text": "slow one"}, key="k-slow")
    first.join(10)
    assert second.status == 409 and second.body["error"] == "request_in_progress"
    assert int(second.header("Retry-After")) >= 1
    assert results["first"].status == 201
    third = api.call("POST", "/rooms/r1/messages", ann, {"text": "slow one"}, key="k-slow")
    assert third.status == 201 and third.body == results["first"].body


def test_a_server_error_is_not_kept(light_world: World, monkeypatch) -> None:
    api, ann = light_world.api, light_world.tokens["ann"]
    original = RoomService.post_message
    calls = []

    def flaky(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise TransientError("throttled")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(RoomService, "post_message", flaky)
    r1 = api.call("POST", "/rooms/r1/messages", ann, {"text": "after a fault"}, key="k-flaky")
    assert r1.status == 503 and r1.header("Retry-After")
    r2 = api.call("POST", "/rooms/r1/messages", ann, {"text": "after a fault"}, key="k-flaky")
    assert r2.status == 201 and len(calls) == 2


def test_an_issued_token_is_never_kept_in_the_idempotency_table(light_world: World, stack_env) -> None:
    api, bob = light_world.api, light_world.tokens["bob"]  # bolt's people issue its tokens (design §5)
    first = api.ok("POST", "/companies/bolt/tokens", bob, {"member": "bob"}, key="k-token")
    again = api.call("POST", "/companies/bolt/tokens", bob, {"member": "bob"}, key="k-token")
    assert first["token"] and again.status == 201 and again.body["token"] is None
    assert again.body["token_id"] == first["token_id"]
    from quayutec import resources as R

    dump = repr(stack_env[0].client("dynamodb").scan(TableName=R.IDEMPOTENCY_TABLE.default_name)["Items"])
    assert "k-token" not in dump  # stored under a hash of the scoped key
    assert first["token"] not in dump and "k-token" not in dump


@pytest.mark.parametrize("key", ["", "x" * 256, "bad\nkey"])
def test_a_malformed_key_is_400(light_world: World, key: str) -> None:
    r = light_world.api.call(
        "POST", "/rooms/r1/messages", light_world.tokens["ann"], {"text": "k"}, headers={"Idempotency-Key": key}
    )
    assert r.status == 400 and "Idempotency-Key" in r.body["message"]


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "body.text"),
        ({"text": 5}, "body.text"),
        ({"text": "hi", "too": ["a1"]}, "body.too"),
        ({"text": "hi", "to": "a1"}, "body.to"),
        ({"text": ""}, "body.text"),
    ],
)
def test_validation_errors_name_the_field(light_world: World, body, field: str) -> None:
    r = light_world.api.call("POST", "/rooms/r1/messages", light_world.tokens["ann"], body)
    assert r.status == 422 and r.body["error"] == "validation_error"
    assert field in [f["field"] for f in r.body["fields"]] and field in r.body["message"]


@pytest.mark.parametrize(
    "method, path, field",
    [
        ("GET", "/rooms/r1/messages?limit=0", "query.limit"),
        ("GET", "/rooms/r1/messages?limit=many", "query.limit"),
        ("GET", "/rooms/r1/messages?order=sideways", "query.order"),
        ("GET", "/rooms/r%20one/messages", "path.room_id"),
        ("GET", "/rooms/r1/tasks?status=maybe", "query.status"),
    ],
)
def test_bad_parameters_name_the_parameter(light_world: World, method: str, path: str, field: str) -> None:
    r = light_world.api.call(method, path, light_world.tokens["ann"])
    assert r.status == 422, r.body
    assert field in [f["field"] for f in r.body["fields"]]


def test_bad_json_and_payload_limits(light_world: World) -> None:
    api, ann = light_world.api, light_world.tokens["ann"]
    r = api.call("POST", "/rooms/r1/messages", ann, raw=b"{not json")  # issue 10: 400 naming line and column
    assert r.status == 400 and r.body["error"] == "malformed_json" and "line 1 column 2" in r.body["message"]
    ok = api.call("POST", "/rooms/r1/messages", ann, {"text": "x" * 32 * 1024})
    assert ok.status == 201
    over = api.call(
        "POST",
        "/rooms/r1/messages",
        ann,  # 32 KiB + 2 bytes of UTF-8
        raw=json.dumps({"text": "é" * (16 * 1024 + 1)}, ensure_ascii=False).encode(),
    )
    assert over.status == 413 and "body.text" in over.body["message"]
    huge = api.call("POST", "/rooms/r1/messages", ann, {"text": "x" * 70_000})
    assert huge.status == 413 and huge.body["error"] == "payload_too_large"


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("GET", "/rooms/nope", None),
        ("GET", "/rooms/r1/tasks/task-nope", None),
        ("POST", "/rooms/r1/tasks/task-nope/updates", {"note": "n"}),
        ("POST", "/rooms/r1/approvals/run-nope:0/approve", None),
        ("POST", "/rooms/r1/approvals/garbage/deny", None),
        ("GET", "/runs/run-nope", None),
        ("GET", "/agents/nope", None),
        ("GET", "/companies/nope", None),
        ("GET", "/no/such/route", None),
        ("DELETE", "/no/such/route", None),
    ],
)
def test_unknown_ids_are_404(light_world: World, method: str, path: str, body) -> None:
    r = light_world.api.call(method, path, light_world.tokens["ann"], body)
    assert r.status == 404 and r.body["error"] in ("not_found", "no_route") and r.body["message"]


def test_domain_errors_map_to_4xx(light_world: World) -> None:
    api, bob = light_world.api, light_world.tokens["bob"]
    task = api.ok("POST", "/rooms/r1/tasks", bob, {"to": "b1", "title": "to close"})
    assert api.call("POST", f"/rooms/r1/tasks/{task['id']}/close", bob, {"result": "done"}).status == 200
    r = api.call("POST", f"/rooms/r1/tasks/{task['id']}/updates", bob, {"note": "late"})
    assert r.status == 409 and r.body["error"] == "conflict"
    r = api.call("POST", "/rooms/r1/messages", bob, {"text": "hi", "to": ["ghost"]})
    assert r.status == 400 and "ghost" in r.body["message"]
    r = api.call("POST", "/rooms/r1/members", bob, {"company": "bolt"})
    assert r.status == 409 and r.body["error"] == "conflict"
    r = api.call("GET", "/rooms/r1/messages?cursor=Zm9vYmFy", bob)
    assert r.status == 400 and "cursor" in r.body["message"]
    r = api.call("POST", "/agents", bob, {"name": "c9", "provider": "openai", "model": "m"})
    assert r.status == 201  # bolt's openai key is stored already: no api_key needed
    r = api.call("POST", "/agents", bob, {"name": "c8", "provider": "anthropic", "model": "m"})
    assert r.status == 400 and "api_key" in r.body["message"]


def test_messages_page_in_time_order(light_world: World) -> None:
    api, carl = light_world.api, light_world.tokens["carl"]
    for i in range(5):
        api.ok("POST", "/rooms/r-cato/messages", carl, {"text": f"m{i}"})
    seen, cursor, pages = [], None, 0
    while True:
        q = "?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = api.ok("GET", f"/rooms/r-cato/messages{q}", carl)
        seen += [m["text"] for m in page["messages"]]
        pages += 1
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == [f"m{i}" for i in range(5)] and pages >= 3
    newest = api.ok("GET", "/rooms/r-cato/messages?limit=1&order=desc", carl)["messages"]
    assert [m["text"] for m in newest] == ["m4"]


def test_openapi_and_docs_are_served_without_a_token(light_world: World) -> None:
    spec = light_world.api.call("GET", "/openapi.json")
    assert spec.status == 200 and "/rooms/{room_id}/messages" in spec.body["paths"]
    assert spec.body["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    # One version: pyproject's, as the package metadata carries it (quay --version prints the same).
    assert spec.body["info"]["version"] == metadata.version("quayutec") == project_version()
    docs = light_world.api.call("GET", "/docs")
    assert docs.status == 200 and "swagger" in docs.text.lower()


def test_a_storm_of_one_idempotency_key_writes_one_message(light_world: World) -> None:
    """The same POST with one Idempotency-Key 50 times at once (issue 6): one message, and every
    answer is the first response or a 409 "in progress" — never a second write. moto is not atomic
    under threads: the local stack serialises calls into it, so this proves our logic on top."""
    api, ann = light_world.api, light_world.tokens["ann"]
    results: list = []
    lock = threading.Lock()
    gate = threading.Barrier(50)

    def post() -> None:
        gate.wait()
        r = api.call("POST", "/rooms/r1/messages", ann, {"text": "storm once"}, key="k-storm")
        with lock:
            results.append(r)

    threads = [threading.Thread(target=post) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 50
    assert {r.status for r in results} <= {201, 409}
    created = {r.body["id"] for r in results if r.status == 201}
    assert len(created) == 1
    assert _texts(api, ann).count("storm once") == 1


def test_a_new_key_rotates_the_company_s_secret(light_world: World) -> None:
    """Registering an agent with a key for a provider whose secret exists puts a new version
    (PutSecretValue: the API never reads a key back)."""
    import boto3

    api, bob = light_world.api, light_world.tokens["bob"]
    r = api.call(
        "POST", "/agents", bob, {"name": "c7", "provider": "openai", "model": "m", "api_key": "sk-bolt-rotated-0001"}
    )
    assert r.status == 201 and r.body["key_stored"] is True
    sm = boto3.client("secretsmanager", region_name="us-east-1")
    names = [s["Name"] for s in sm.list_secrets()["SecretList"] if s["Name"].endswith("/bolt/openai")]
    assert len(names) == 1
    assert sm.get_secret_value(SecretId=names[0])["SecretString"] == "sk-bolt-rotated-0001"


def test_max_context_tokens_is_bounded_with_a_clear_400(light_world: World) -> None:
    """design §2.2: at least 8,000 tokens; at most the model's own window when it is known
    (gpt-4o: 128,000), else 2,000,000. Out of range is a 400 naming the bound; in range the agent
    keeps it, and the OpenAPI document shows the field."""
    api, bob = light_world.api, light_world.tokens["bob"]
    agent = {"provider": "openai", "model": "gpt-4o"}
    r = api.call("POST", "/agents", bob, {"name": "ctx1", **agent, "max_context_tokens": 7999})
    assert r.status == 400 and r.body["error"] == "invalid_input", r.body
    assert r.body["message"].startswith("max_context_tokens: 7,999 is less than 8,000"), r.body
    r = api.call("POST", "/agents", bob, {"name": "ctx1", **agent, "max_context_tokens": 128_001})
    assert r.status == 400 and "more than gpt-4o's context window of 128,000 tokens" in r.body["message"], r.body
    r = api.call(
        "POST", "/agents", bob, {"name": "ctx1", "provider": "openai", "model": "m", "max_context_tokens": 2_000_001}
    )
    assert r.status == 400 and "2,000,000, the most an agent may have" in r.body["message"], r.body
    r = api.call("POST", "/agents", bob, {"name": "ctx1", **agent, "max_context_tokens": "60000"})
    assert r.status == 422  # a number, not a string
    assert api.ok("GET", "/agents", bob)["agents"] and not [
        a for a in api.ok("GET", "/agents", bob)["agents"] if a["name"] == "ctx1"
    ]  # nothing refused was registered
    made = api.ok("POST", "/agents", bob, {"name": "ctx1", **agent, "max_context_tokens": 128_000})
    assert made["max_context_tokens"] == 128_000
    assert api.ok("POST", "/agents", bob, {"name": "ctx2", **agent})["max_context_tokens"] == 60_000
    assert api.ok("GET", f"/agents/{made['id']}", bob)["max_context_tokens"] == 128_000
    doc = api.ok("GET", "/openapi.json", bob)
    field = doc["components"]["schemas"]["AgentIn"]["properties"]["max_context_tokens"]
    assert field["type"] == "integer" and field["default"] == 60_000 and field["minimum"] == 8_000
    assert "context window" in field["description"]
    assert "max_context_tokens" in doc["components"]["schemas"]["AgentOut"]["properties"]
