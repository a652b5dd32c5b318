"""Hostile and careless input (issue 10, findings 1 and 11): the exact inputs that answered 5xx,
a form body answered 422 "extra inputs", broken JSON answered without a line and column, errors
without ``fields``, and the same JSON base64-encoded answered 422 by the idempotency layer. Each
must now answer a documented 4xx ``{error, message, fields}``."""

from __future__ import annotations

import base64
import json

import pytest
from apihelpers import World

from quayutec.api.errors import ERRORS
from quayutec.models import ID_RULE

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

ROOM = "r1"  # the seeded room (its id, when the world says it: see _room)


def _room(world: World) -> str:
    return world.ids.get("room", ROOM)


# conftest's stack_env, with owners' addresses checked as in the deployed stack (loopback off)
# and no scripted replies.
STACK_OPTIONS = {"allow_loopback_model_urls": False}
PROVIDER_SCRIPTS: dict[str, list] = {}


def _is_error(r, status: int, code: str | None = None) -> None:
    assert r.status == status, (r.status, r.body)
    assert isinstance(r.body, dict) and set(r.body) == {"error", "message", "fields"}, r.body
    assert isinstance(r.body["fields"], list) and isinstance(r.body["message"], str) and r.body["message"]
    assert r.body["error"] in ERRORS and ERRORS[r.body["error"]].status == status, r.body
    if code is not None:
        assert r.body["error"] == code, r.body


@pytest.mark.parametrize("key", [None, "k-nested-3000"])
def test_3000_nested_brackets_are_400_with_and_without_idempotency_key(light_world: World, key: str | None) -> None:
    r = light_world.api.call(
        "POST", f"/rooms/{_room(light_world)}/messages", light_world.tokens["ann"], raw=b"[" * 3000, key=key
    )
    _is_error(r, 400, "malformed_json")
    assert "line 1 column" in r.body["message"]


def test_a_cursor_decoding_to_1500_brackets_is_400(light_world: World) -> None:
    cursor = base64.urlsafe_b64encode(b"[" * 1500).decode().rstrip("=")
    r = light_world.api.call("GET", f"/rooms/{_room(light_world)}/messages?cursor={cursor}", light_world.tokens["ann"])
    _is_error(r, 400)


def test_hop_limit_as_a_5000_digit_number_is_4xx(light_world: World) -> None:
    raw = b'{"id": "r-huge", "hop_limit": ' + b"9" * 5000 + b"}"
    r = light_world.api.call("POST", "/rooms", light_world.tokens["ann"], raw=raw)
    _is_error(r, 400, "malformed_json")
    raw = b'{"id": "r-huge", "hop_limit": ' + b"9" * 100 + b"}"  # parses, then out of range
    _is_error(light_world.api.call("POST", "/rooms", light_world.tokens["ann"], raw=raw), 400, "malformed_json")
    r = light_world.api.call("POST", "/rooms", light_world.tokens["ann"], {"id": "r-huge", "hop_limit": 101})
    _is_error(r, 422, "validation_error")


def test_a_policy_nested_2000_deep_is_400(light_world: World) -> None:
    raw = ('{"actions": ' + '{"a": ' * 2000 + '"allow"' + "}" * 2000 + "}").encode()
    r = light_world.api.call("PUT", "/companies/acme/policy", light_world.tokens["ann"], raw=raw)
    _is_error(r, 400, "malformed_json")


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/xml", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
@pytest.mark.parametrize("key", [None, "k-ctype"])
def test_a_body_that_is_not_json_is_415(light_world: World, content_type: str, key: str | None) -> None:
    body = b"text=hello" if "form" in content_type else b"<message>hello</message>"
    r = light_world.api.call(
        "POST",
        f"/rooms/{_room(light_world)}/messages",
        light_world.tokens["ann"],
        raw=body,
        headers={"Content-Type": content_type},
        key=key,
    )
    _is_error(r, 415, "unsupported_media_type")


@pytest.mark.parametrize("content_type", ["APPLICATION/JSON", "Application/Json; charset=UTF-8", "application/JSON"])
def test_the_json_media_type_in_any_letter_case_is_json(light_world: World, content_type: str) -> None:
    # media types are case-insensitive (RFC 9110 §8.3.1); Powertools' own check answered 500
    room = _room(light_world)
    r = light_world.api.call(
        "POST",
        f"/rooms/{room}/messages",
        light_world.tokens["ann"],
        {"text": "cased"},
        headers={"Content-Type": content_type},
    )
    assert r.status == 201, (r.status, r.body)
    assert r.body["text"] == "cased"
    r = light_world.api.call(
        "PUT",
        "/companies/acme/policy",
        light_world.tokens["ann"],
        {"default": "allow"},
        headers={"Content-Type": content_type},
    )
    assert r.status == 200, (r.status, r.body)


@pytest.mark.parametrize("path", ["/rooms/%0a", "/rooms%0A", "/rooms/r1/messages%0d"])
def test_a_path_with_a_line_break_is_400_not_another_route(light_world: World, path: str) -> None:
    r = light_world.api.call("GET", path, light_world.tokens["ann"])
    _is_error(r, 400, "invalid_input")
    assert "line break" in r.body["message"]


def test_a_query_parameter_given_twice_says_so(light_world: World) -> None:
    r = light_world.api.call("GET", f"/rooms/{_room(light_world)}/messages?limit=1&limit=2", light_world.tokens["ann"])
    _is_error(r, 422, "validation_error")
    assert r.body["fields"][0]["field"] == "query.limit" and "given 2 times" in r.body["message"], r.body


def test_a_trailing_slash_is_the_same_request_for_the_idempotency_key(light_world: World) -> None:
    room, ann = _room(light_world), light_world.tokens["ann"]
    first = light_world.api.call("POST", f"/rooms/{room}/messages", ann, {"text": "once"}, key="k-slash")
    again = light_world.api.call("POST", f"/rooms/{room}/messages/", ann, {"text": "once"}, key="k-slash")
    assert first.status == again.status == 201, (first.body, again.body)
    assert again.body["id"] == first.body["id"]
    assert again.headers.get("Idempotent-Replayed") == "true"
    texts = [m["text"] for m in light_world.api.ok("GET", f"/rooms/{room}/messages", ann)["messages"]]
    assert texts.count("once") == 1


def test_broken_json_is_400_naming_line_and_column(light_world: World) -> None:
    raw = b'{"text": "hi",\n "to": }'
    r = light_world.api.call("POST", f"/rooms/{_room(light_world)}/messages", light_world.tokens["ann"], raw=raw)
    _is_error(r, 400, "malformed_json")
    assert "line 2 column" in r.body["message"], r.body
    assert r.body["fields"] and r.body["fields"][0]["line"] == 2


def test_every_error_carries_fields(light_world: World) -> None:
    api, ann = light_world.api, light_world.tokens["ann"]
    _is_error(api.call("GET", "/rooms/no-such-room", ann), 404)
    _is_error(api.call("GET", "/no/such/path", ann), 404, "no_route")
    r = api.call("DELETE", "/rooms", ann)
    _is_error(r, 405, "method_not_allowed")
    assert "POST" in (r.header("Allow") or "")
    bob, room = light_world.tokens["bob"], _room(light_world)
    task = api.ok("POST", f"/rooms/{room}/tasks", bob, {"to": "b1", "title": "closed twice"})["id"]
    api.ok("POST", f"/rooms/{room}/tasks/{task}/close", bob, {"result": "done"})
    _is_error(api.call("POST", f"/rooms/{room}/tasks/{task}/close", bob, {"result": "again"}), 409)
    _is_error(api.call("POST", "/companies", ann, {"id": "x-co"}), 403)
    _is_error(api.call("GET", "/rooms", None), 401)
    _is_error(api.call("GET", "/rooms", "qyt_junk"), 401)


def _event_for(world: World, body: str, *, b64: bool, key: str) -> dict:
    gw = world.api.gateway
    data = body.encode()
    event = gw.proxy_event(
        "POST",
        f"/rooms/{_room(world)}/messages",
        "",
        [("Content-Type", "application/json"), ("Idempotency-Key", key)],
        data,
        {"company": "acme", "member": "ann", "admin": "false", "principalId": "ann"},
    )
    if b64:
        event["body"], event["isBase64Encoded"] = base64.b64encode(data).decode(), True
    return event


def test_the_same_json_base64_encoded_or_plain_is_the_same_request(light_world: World) -> None:
    from quayutec.api.idempotency import request_fingerprint

    body = json.dumps({"text": "encoded once, plain once"})
    plain = _event_for(light_world, body, b64=False, key="k-b64")
    encoded = _event_for(light_world, body, b64=True, key="k-b64")
    assert request_fingerprint(plain) == request_fingerprint(encoded)
    first = light_world.api.gateway.invoke("ApiFunction", plain)[0]
    again = light_world.api.gateway.invoke("ApiFunction", encoded)[0]
    assert first["statusCode"] == again["statusCode"] == 201, (first, again)
    assert json.loads(again["body"]) == json.loads(first["body"])


@pytest.mark.unit
def test_the_dev_gateways_own_errors_have_the_same_shape() -> None:
    """401/403/413/429/500/502 answered by `quay dev`'s gateway (as API Gateway's Gateway Responses
    in the deployed stack): `{error, message, fields}` with a documented code."""
    from quaylocal.dev import MAX_PAYLOAD, Gateway

    def fails(logical_id: str, event: dict) -> tuple:
        if logical_id == "AuthorizerFunction":
            if event["authorizationToken"] == "Bearer deny":
                return {"principalId": "x", "policyDocument": {"Statement": []}}, None
            if event["authorizationToken"] == "Bearer broken":
                return None, {"errorMessage": "boom", "errorType": "RuntimeError"}
            return {
                "principalId": "x",
                "context": {"company": "acme", "member": "ann"},
                "policyDocument": {"Statement": [{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "*"}]},
            }, None
        return None, {"errorMessage": "crash", "errorType": "RuntimeError"}

    gw = Gateway(fails, rate_limit=(0.001, 3))
    answers = {
        401: gw.handle("GET", "/rooms", {}),
        403: gw.handle("GET", "/rooms", {"Authorization": "Bearer deny"}),
        413: gw.handle("POST", "/rooms", {"Authorization": "Bearer ok"}, b"x" * (MAX_PAYLOAD + 1)),
        500: gw.handle("GET", "/rooms", {"Authorization": "Bearer broken"}),
    }
    answers[429] = gw.handle("GET", "/rooms", {"Authorization": "Bearer ok"})  # the bucket (3) is used up
    answers[502] = Gateway(fails).handle("GET", "/rooms", {"Authorization": "Bearer ok"})
    for status, result in answers.items():
        body = json.loads(result.body)
        assert result.status == status, (status, result.status, body)
        assert set(body) == {"error", "message", "fields"} and ERRORS[body["error"]].status == status, body


# ----------------------------------------------------------------------------- finding 2: keys
@pytest.mark.parametrize(
    "key",
    [
        "sk-live-secret-0123456789\n",
        "sk-live-\x00secret-0123456789",
        "sk-live-secret-0123456789\r\n",
        "sk live",
        "sk-1",
        "sk-ünïcode-SECRET123",
    ],
)
def test_a_key_with_whitespace_or_control_characters_is_refused_at_registration(light_world: World, key: str) -> None:
    r = light_world.api.call(
        "POST",
        "/agents",
        light_world.tokens["ann"],
        {"name": "a-badkey", "provider": "openai", "model": "gpt-test", "api_key": key},
    )
    _is_error(r, 422, "validation_error")
    assert r.body["fields"][0]["field"] == "body.api_key"
    assert key.strip() not in r.text and json.dumps(key.strip())[1:-1] not in r.text
    assert "U+" not in r.text and not any(ch in r.text for ch in key if not ch.isascii())  # not one of its characters
    assert light_world.api.call("GET", "/agents/a-badkey", light_world.tokens["ann"]).status == 404


# ----------------------------------------------------------------------------- ids every AWS name accepts
@pytest.mark.parametrize("company", ["acme:eu", "acme.eu", "acme/eu", "acme eu", "x" * 64, "-acme", "acmé"])
def test_a_company_id_no_aws_name_accepts_is_refused_saying_what_is_allowed(light_world: World, company: str) -> None:
    """A company id becomes part of a secret name and an S3 key (design §5): anything outside
    quayutec.models.ID_PART is a 422 at creation naming the allowed set."""
    r = light_world.api.call("POST", "/companies", light_world.tokens["admin"], {"id": company, "people": ["zed"]})
    _is_error(r, 422, "validation_error")
    assert r.body["fields"][0]["field"] == "body.id"
    assert ID_RULE in r.body["message"], r.body


@pytest.mark.parametrize("name", ["a.b", "a:b", "x" * 64, "_a"])
def test_an_agent_name_no_aws_name_accepts_is_refused_saying_what_is_allowed(light_world: World, name: str) -> None:
    r = light_world.api.call(
        "POST", "/agents", light_world.tokens["ann"], {"name": name, "provider": "openai", "model": "gpt-test"}
    )
    _is_error(r, 422, "validation_error")
    assert r.body["fields"][0]["field"] == "body.name"
    assert ID_RULE in r.body["message"], r.body


# ----------------------------------------------------------------------------- finding 3: owner addresses
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:18999/v1",
        "http://169.254.169.254/latest/meta-data/",
        "https://169.254.169.254/v1",
        "https://10.1.2.3/v1",
        "https://localhost/v1",
        "https://[::1]/v1",
        "http://api.example.com/v1",
    ],
)
def test_an_owner_address_to_an_internal_host_is_refused_at_registration(light_world: World, url: str) -> None:
    r = light_world.api.call(
        "POST",
        "/agents",
        light_world.tokens["ann"],
        {
            "name": "a-ssrf",
            "provider": "openai-compatible",
            "model": "m",
            "base_url": url,
            "api_key": "sk-acme-compat-0123456789",
        },
    )
    _is_error(r, 422, "validation_error")
    assert r.body["fields"][0]["field"] == "body.base_url"
    assert "https" in r.body["message"] or "address" in r.body["message"], r.body
    assert light_world.api.call("GET", "/agents/a-ssrf", light_world.tokens["ann"]).status == 404


def test_a_public_https_owner_address_is_accepted(light_world: World) -> None:
    r = light_world.api.call(
        "POST",
        "/agents",
        light_world.tokens["ann"],
        {
            "name": "a-public",
            "provider": "openai-compatible",
            "model": "m",
            "base_url": "https://models.example.com/v1",
            "api_key": "sk-acme-compat-0123456789",
        },
    )
    assert r.status == 201, r.body


# ----------------------------------------------------------------------------- finding 11: canonical events
def _canonical(method: str, path: str, body: str | None, headers: dict[str, str], *, b64: bool = False) -> dict:
    """The Powertools sample REST proxy event (tests/events), as API Gateway would send it for
    this request after the authorizer let ann of acme through."""
    from pathlib import Path

    event = json.loads(
        (Path(__file__).resolve().parents[1] / "events" / "powertools-apiGatewayProxyEvent.json").read_text()
    )
    event.update(
        {
            "httpMethod": method,
            "path": path,
            "resource": "/{proxy+}",
            "headers": headers,
            "multiValueHeaders": {k: [v] for k, v in headers.items()},
            "queryStringParameters": None,
            "multiValueQueryStringParameters": None,
            "isBase64Encoded": b64,
            "body": base64.b64encode(body.encode()).decode() if (b64 and body) else body,
        }
    )
    event["requestContext"].update(
        {
            "httpMethod": method,
            "path": path,
            "authorizer": {"company": "acme", "member": "ann", "admin": "false", "principalId": "ann"},
        }
    )
    return event


def test_canonical_events_text_plain_is_415_and_base64_is_the_same_request(light_world: World) -> None:
    invoke = light_world.api.gateway.invoke
    out, err = invoke(
        "ApiFunction",
        _canonical("POST", f"/rooms/{_room(light_world)}/messages", "hello", {"Content-Type": "text/plain"}),
    )
    assert err is None and out["statusCode"] == 415, (out, err)
    body = json.dumps({"text": "canonical, encoded and plain"})
    hdrs = {"Content-Type": "application/json", "Idempotency-Key": "k-canonical-b64"}
    path = f"/rooms/{_room(light_world)}/messages"
    first, _ = invoke("ApiFunction", _canonical("POST", path, body, hdrs, b64=True))
    again, _ = invoke("ApiFunction", _canonical("POST", path, body, hdrs))
    assert first["statusCode"] == again["statusCode"] == 201, (first, again)
    assert json.loads(first["body"])["id"] == json.loads(again["body"])["id"]
