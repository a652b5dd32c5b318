"""The local provider server on its own: scripts, echo, exhaustion, keys, request ids, threads."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from quaylocal.provider_server import ProviderServer
from quayutec.providers import ModelCall, ProviderError, call_model, decide_next


def post(url: str, body: Any, headers: dict | None = None) -> tuple[int, dict, str]:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def anthropic_body(agent: str, text: str = "hi") -> dict:
    return {
        "model": "m",
        "max_tokens": 10,
        "metadata": {"user_id": agent},
        "messages": [{"role": "user", "content": text}],
    }


def test_script_exhausted_is_a_final_400(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    server.set_script("agent-1", [{"reply": {"text": "only one", "actions": []}}])
    assert call_model(make_call("anthropic")).text == "only one"
    with pytest.raises(ProviderError) as info:
        call_model(make_call("anthropic"))
    f = info.value.failure
    assert (f.status, f.category, f.retryable) == (400, "bad_request", False)
    assert "script exhausted" in f.message
    assert server.exhausted == ["agent-1"]
    assert decide_next(f, 1, False).retry is False


@pytest.mark.parametrize("provider", ["openai", "openai-compatible", "bedrock"])
def test_script_exhausted_in_each_format(
    provider: str, server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    server.set_script("agent-2", [])
    with pytest.raises(ProviderError) as info:
        call_model(make_call(provider, "agent-2"))
    assert info.value.failure.status == 400 and "script exhausted" in info.value.failure.message
    assert server.exhausted == ["agent-2"]


def test_substitute_is_applied_to_actions(make_call: Callable[..., ModelCall]) -> None:
    def substitute(actions: list) -> list:
        return [{**a, "task": "T-42"} if a.get("task") == "$task:1" else a for a in actions]

    srv = ProviderServer(
        scripts={
            "fab": [
                {
                    "reply": {
                        "text": "done",
                        "actions": [{"kind": "close_task", "task": "$task:1", "result": "Delivered."}],
                    }
                }
            ]
        },
        substitute=substitute,
    )
    root = srv.start()
    try:
        call = make_call("openai", "fab", base_url=srv.base_url("openai"))
        reply = call_model(call)
        assert reply.tool_calls[0].input == {"task": "T-42", "result": "Delivered."}
        assert srv.base_url("openai") == root + "/openai/v1"
    finally:
        srv.stop()


def test_every_response_has_a_request_id(server: ProviderServer) -> None:
    root = server.root_url
    server.set_script("a", [{"error": {"status": 500, "headers": {}, "body": "oops"}}])
    status, headers, _ = post(root + "/anthropic/v1/messages", anthropic_body("a"))
    assert status == 500 and headers.get("request-id", "").startswith("req_")
    status, headers, body = post(root + "/anthropic/v1/messages", anthropic_body("nobody", "l1\nlast line\n"))
    assert status == 200 and headers.get("request-id")
    assert json.loads(body)["content"] == [{"type": "text", "text": "echo: last line"}]
    status, headers, _ = post(
        root + "/openai/v1/chat/completions",
        {"model": "m", "user": "u", "messages": [{"role": "user", "content": "x"}]},
    )
    assert status == 200 and headers.get("x-request-id")
    status, headers, _ = post(
        root + "/bedrock/model/m/converse", {"messages": [{"role": "user", "content": [{"text": "x"}]}]}
    )
    assert status == 200 and headers.get("x-amzn-RequestId")


def test_error_entry_is_sent_verbatim(server: ProviderServer) -> None:
    server.set_script(
        "a", [{"error": {"status": 418, "headers": {"X-Custom": "yes", "retry-after": "3"}, "body": {"weird": [1, 2]}}}]
    )
    status, headers, body = post(server.root_url + "/anthropic/v1/messages", anthropic_body("a"))
    assert status == 418 and headers["X-Custom"] == "yes" and headers["retry-after"] == "3"
    assert json.loads(body) == {"weird": [1, 2]}


def test_keys_are_checked_and_do_not_consume_the_script(server: ProviderServer) -> None:
    server.keys["a"] = "right"
    server.set_script("a", [{"reply": {"text": "ok", "actions": []}}])
    url = server.root_url + "/anthropic/v1/messages"
    assert post(url, anthropic_body("a"))[0] == 401  # no key
    assert post(url, anthropic_body("a"), {"x-api-key": "wrong"})[0] == 401
    status, _, body = post(url, anthropic_body("a"), {"x-api-key": "right"})
    assert status == 200 and json.loads(body)["content"][0]["text"] == "ok"
    assert server.count("a") == 3
    assert [r.status for r in server.requests] == [401, 401, 200]
    assert all("right" not in json.dumps(r.body) for r in server.requests)


def test_unknown_route_is_404(server: ProviderServer) -> None:
    status, headers, _ = post(server.root_url + "/nope", {})
    assert status == 404 and headers.get("x-request-id")


def test_concurrent_requests_consume_each_entry_once(server: ProviderServer) -> None:
    n = 24
    server.set_script("busy", [{"reply": {"text": str(i), "actions": []}} for i in range(n)])
    url = server.root_url + "/anthropic/v1/messages"

    def one(_: int) -> str:
        status, _, body = post(url, anthropic_body("busy"))
        assert status == 200
        return json.loads(body)["content"][0]["text"]

    with ThreadPoolExecutor(max_workers=8) as pool:
        texts = list(pool.map(one, range(n)))
    assert sorted(texts, key=int) == [str(i) for i in range(n)]
    assert server.count("busy") == n and server.exhausted == []


def test_stop_is_idempotent_and_frees_the_port() -> None:
    srv = ProviderServer()
    root = srv.start()
    srv.stop()
    srv.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(root + "/anthropic/v1/messages", data=b"{}", timeout=2)
