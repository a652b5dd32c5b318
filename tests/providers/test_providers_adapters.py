"""The real SDKs (anthropic, openai, boto3) against the local provider server (design §2.3)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import SecretStr

from quaylocal.provider_server import ProviderServer
from quayutec.providers import ModelCall, ProviderError, ProviderFailure, call_model, decide_next
from quayutec.tools import TOOL_SPECS

PROVIDERS = ("anthropic", "openai", "openai-compatible", "bedrock")

ACTIONS = [
    {"kind": "remember", "text": "Launch is 14 March.", "visibility": "room"},
    {"kind": "create_task", "to": "fab-designer", "title": "Banners", "body": "Two sizes."},
]

ANTHROPIC_ERR = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
HTML_502 = "<html><head><title>502 Bad Gateway</title></head><body><center>nginx</center></body></html>"


def fail(make_call: Callable[..., ModelCall], provider: str, agent: str = "agent-1", **kw: Any) -> ProviderFailure:
    with pytest.raises(ProviderError) as info:
        call_model(make_call(provider, agent, **kw))
    return info.value.failure


def script(server: ProviderServer, agent: str, *entries: dict) -> None:
    server.set_script(agent, list(entries))


def err(status: int, body: Any, headers: dict | None = None) -> dict:
    return {"error": {"status": status, "headers": headers or {}, "body": body}}


# ----------------------------------------------------------------- success
@pytest.mark.parametrize("provider", PROVIDERS)
def test_reply_with_tool_calls(provider: str, server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    script(server, "nw-planner", {"reply": {"text": "Plan drafted.", "actions": ACTIONS}})
    reply = call_model(make_call(provider, "nw-planner"))

    assert reply.text == "Plan drafted."
    assert [t.name for t in reply.tool_calls] == ["remember", "create_task"]
    assert reply.tool_calls[0].input == {"text": "Launch is 14 March.", "visibility": "room"}
    assert reply.tool_calls[1].input == {"to": "fab-designer", "title": "Banners", "body": "Two sizes."}
    assert json.loads(reply.tool_calls[1].raw_input) == reply.tool_calls[1].input
    assert all(t.id for t in reply.tool_calls)
    assert reply.status == 200
    assert reply.stop_reason in {"tool_use", "tool_calls"}

    (rec,) = server.requests
    assert rec.agent_id == "nw-planner" and rec.provider == provider and rec.status == 200
    assert reply.request_id == rec.request_id  # read from the provider's request-id header
    body = json.dumps(rec.body)
    for spec in TOOL_SPECS:
        assert spec["name"] in body
    assert "You are a test agent." in body and "@agent please answer" in body


@pytest.mark.parametrize("provider", PROVIDERS)
def test_echo_reply_without_script(provider: str, server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    reply = call_model(make_call(provider, "someone"))
    assert reply.text == "echo: agent please answer"  # an echo mentions no agent (issue 12)
    assert reply.tool_calls == []
    assert server.count("someone") == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_request_shapes_on_the_wire(provider: str, server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    call_model(make_call(provider, "shape-agent", max_tokens=321))
    body = server.requests[0].body
    if provider == "anthropic":
        assert body["metadata"] == {"user_id": "shape-agent"}
        assert body["max_tokens"] == 321 and body["system"] == "You are a test agent."
        assert body["tools"][0]["input_schema"] == TOOL_SPECS[0]["input_schema"]
        assert "stream" not in body or body["stream"] is False
    elif provider == "bedrock":
        assert body["requestMetadata"] == {"end_user_id": "shape-agent"}
        assert body["inferenceConfig"] == {"maxTokens": 321}
        assert body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"] == TOOL_SPECS[0]["input_schema"]
        assert server.requests[0].model == "anthropic.claude-3-haiku-20240307-v1:0"
    else:
        assert body["user"] == "shape-agent"
        assert body["tools"][0] == {
            "type": "function",
            "function": {
                "name": TOOL_SPECS[0]["name"],
                "description": TOOL_SPECS[0]["description"],
                "parameters": TOOL_SPECS[0]["input_schema"],
            },
        }
        token_field = "max_completion_tokens" if provider == "openai" else "max_tokens"
        assert body[token_field] == 321
        assert body["messages"][0] == {"role": "system", "content": "You are a test agent."}
        assert not body.get("stream")


@pytest.mark.unit
def test_non_object_tool_arguments_are_kept_raw() -> None:
    from quayutec.providers.base import tool_call

    assert tool_call("c1", "remember", '["a"]').input is None
    bad = tool_call("c2", "remember", "{not json")
    assert bad.input is None and bad.raw_input == "{not json"
    assert tool_call("c3", "remember", {"text": "t"}).raw_input == '{"text":"t"}'


# ----------------------------------------------------------------- design §2.3 inputs
def test_openai_insufficient_quota_429_is_final(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    script(
        server,
        "agent-1",
        err(
            429,
            {
                "error": {
                    "message": "You exceeded your current quota, please check your plan and billing details.",
                    "type": "insufficient_quota",
                    "param": None,
                    "code": "insufficient_quota",
                }
            },
        ),
    )
    f = fail(make_call, "openai")
    assert (f.status, f.category, f.retryable) == (429, "quota", False)
    assert (f.error_type, f.error_code) == ("insufficient_quota", "insufficient_quota")
    assert decide_next(f, 1, False).reason == "final: quota"


def test_openai_credit_balance_exhausted_429_is_final(
    server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    script(
        server,
        "agent-1",
        err(
            429,
            {
                "error": {
                    "message": "Your credit balance is exhausted.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "credit_balance_exhausted",
                }
            },
        ),
    )
    f = fail(make_call, "openai")
    assert (f.category, f.retryable, f.error_code) == ("spend_limit", False, "credit_balance_exhausted")
    assert not decide_next(f, 1, False).retry


def test_openai_request_too_large_429_is_final(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    script(
        server,
        "agent-1",
        err(
            429,
            {
                "error": {
                    "message": "Request too large for gpt-4.1 in organization org-abc on tokens per min (TPM): "
                    "Limit 30000, Requested 41234. The input or output tokens must be reduced in order to run "
                    "successfully.",
                    "type": "tokens",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            },
            {"retry-after": "2"},
        ),
    )
    f = fail(make_call, "openai")
    assert (f.category, f.retryable) == ("request_too_large", False)
    assert decide_next(f, 1, False).retry is False


def test_openai_plain_rate_limit_429_is_retryable(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    script(
        server,
        "agent-1",
        err(
            429,
            {
                "error": {
                    "message": "Rate limit reached for gpt-4.1 on requests per min (RPM): Limit 500, Used 500.",
                    "type": "requests",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            },
            {"retry-after-ms": "1200"},
        ),
    )
    f = fail(make_call, "openai")
    assert (f.category, f.retryable, f.retry_after_s) == ("rate_limit", True, 1.2)
    d = decide_next(f, 1, False)
    assert (d.retry, d.wait_seconds) == (True, 2)


def test_anthropic_529_without_retry_after_waits_2_then_8_then_final(
    server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    script(server, "agent-1", *[err(529, ANTHROPIC_ERR)] * 3)
    call = make_call("anthropic", owner_base_url=False)
    decisions = []
    for made in (1, 2, 3):
        with pytest.raises(ProviderError) as info:
            call_model(call)
        f = info.value.failure
        assert (f.status, f.error_type, f.category, f.retryable) == (529, "overloaded_error", "overloaded", True)
        assert f.retry_after_s is None
        decisions.append(decide_next(f, made, call.owner_base_url))
    assert [(d.retry, d.wait_seconds) for d in decisions] == [(True, 2), (True, 8), (False, None)]
    assert server.count("agent-1") == 3
    assert server.exhausted == []


def test_anthropic_429_retry_after_171_is_final(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    script(
        server,
        "agent-1",
        err(
            429,
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "Number of request tokens has exceeded your per-minute rate limit",
                },
            },
            {"retry-after": "171"},
        ),
    )
    f = fail(make_call, "anthropic")
    assert (f.category, f.retryable, f.retry_after_s, f.retry_after_header) == (
        "rate_limit",
        True,
        171.0,
        "retry-after: 171",
    )
    d = decide_next(f, 1, False)
    assert not d.retry and d.wait_seconds is None
    assert "171" in d.reason and "not waited for" in d.reason


def test_anthropic_credit_balance_400_is_final(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    script(
        server,
        "agent-1",
        err(
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "Your credit balance is too low to access the Anthropic API. "
                    "Please go to Plans & Billing to upgrade or purchase credits.",
                },
            },
        ),
    )
    f = fail(make_call, "anthropic")
    assert (f.status, f.category, f.retryable) == (400, "spend_limit", False)
    assert decide_next(f, 1, False).reason == "final: spend_limit"


def test_anthropic_enforced_spend_limit_429_is_final(
    server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    script(
        server,
        "agent-1",
        err(
            429,
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "You have reached your specified API usage limits.",
                    "details": {"error_code": "enforced_spend_limit_reached"},
                },
            },
            {"retry-after": "5"},
        ),
    )
    f = fail(make_call, "anthropic")
    assert (f.error_code, f.category, f.retryable) == ("enforced_spend_limit_reached", "spend_limit", False)


def test_openai_compatible_503_is_retryable_but_gets_one_request(
    server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    script(
        server,
        "fab-designer",
        err(503, {"error": {"message": "The server is overloaded", "type": "server_error", "code": None}}),
    )
    call = make_call("openai-compatible", "fab-designer")
    assert call.owner_base_url is True
    with pytest.raises(ProviderError) as info:
        call_model(call)
    f = info.value.failure
    assert (f.status, f.category, f.retryable) == (503, "server_error", True)
    d = decide_next(f, 1, call.owner_base_url)
    assert (d.retry, d.reason) == (False, "owner base URL: one request")


def test_retry_after_decimal_rounds_up(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    script(
        server,
        "agent-1",
        err(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}, {"retry-after": "1.5"}),
    )
    f = fail(make_call, "anthropic")
    assert (f.retry_after_s, f.retry_after_header) == (1.5, "retry-after: 1.5")
    d = decide_next(f, 1, False)
    assert (d.retry, d.wait_seconds, d.reason) == (True, 2, "retry-after: 1.5 -> wait 2 s before request 2")


def test_retry_after_ms_wins(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    script(
        server,
        "agent-1",
        err(
            429,
            {"error": {"message": "slow", "type": "requests", "code": None}},
            {"retry-after": "30", "retry-after-ms": "3500"},
        ),
    )
    f = fail(make_call, "openai")
    assert (f.retry_after_s, f.retry_after_header) == (3.5, "retry-after-ms: 3500")
    assert decide_next(f, 1, False).wait_seconds == 4


def test_retry_after_http_date_in_the_past_is_zero(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    script(
        server,
        "agent-1",
        err(
            503,
            {"message": "unavailable"},
            {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT", "x-amzn-ErrorType": "ServiceUnavailableException"},
        ),
    )
    f = fail(make_call, "bedrock")
    assert (f.error_type, f.category, f.retry_after_s) == ("ServiceUnavailableException", "server_error", 0.0)
    d = decide_next(f, 1, False)
    assert (d.retry, d.wait_seconds) == (True, 0)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_html_502_is_retryable_server_error(
    provider: str, server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    script(server, "agent-1", err(502, HTML_502))
    f = fail(make_call, provider)
    assert (f.status, f.category, f.retryable, f.error_type) == (502, "server_error", True, None)
    assert f.body == HTML_502  # the original body, not an SDK wrapper message
    assert f.request_id == server.requests[0].request_id


@pytest.mark.parametrize("provider", PROVIDERS)
def test_original_error_body_is_kept(
    provider: str, server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    body = (
        {"type": "error", "error": {"type": "not_found_error", "message": "model: nope"}}
        if provider == "anthropic"
        else {
            "error": {
                "message": "The model `nope` does not exist",
                "type": "invalid_request_error",
                "code": "model_not_found",
            }
        }
        if provider != "bedrock"
        else {"message": "Model not found"}
    )
    headers = {"x-amzn-ErrorType": "ResourceNotFoundException"} if provider == "bedrock" else {}
    script(server, "agent-1", err(404, body, headers))
    f = fail(make_call, provider)
    assert json.loads(f.body) == body
    assert (f.status, f.category, f.retryable) == (404, "model_not_found", False)


def test_bedrock_daily_token_quota_is_final_but_throttling_is_not(
    server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    throttle = {"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    script(
        server,
        "agent-1",
        err(429, {"message": "Too many tokens per day, please wait before trying again."}, throttle),
        err(429, {"message": "Too many requests, please wait before trying again."}, throttle),
    )
    daily = fail(make_call, "bedrock")
    assert (daily.error_type, daily.category, daily.retryable) == ("ThrottlingException", "quota", False)
    plain = fail(make_call, "bedrock")
    assert (plain.error_type, plain.category, plain.retryable) == ("ThrottlingException", "rate_limit", True)


# ----------------------------------------------------------------- no response
@pytest.mark.parametrize("provider", PROVIDERS)
def test_connection_refused_is_retryable(provider: str, make_call: Callable[..., ModelCall], closed_port: int) -> None:
    prefix = {
        "anthropic": "/anthropic",
        "openai": "/openai/v1",
        "openai-compatible": "/compat/v1",
        "bedrock": "/bedrock",
    }[provider]
    f = fail(make_call, provider, base_url=f"http://127.0.0.1:{closed_port}{prefix}")
    assert (f.status, f.error_type, f.category, f.retryable) == (None, "connection", "connection", True)
    assert decide_next(f, 1, False).wait_seconds == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_read_timeout_is_retryable(provider: str, server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    script(server, "agent-1", {"reply": {"text": "late", "actions": []}, "delay_s": 1.0})
    f = fail(make_call, provider, timeout_s=0.2)
    assert (f.status, f.error_type, f.category, f.retryable) == (None, "timeout", "timeout", True)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_dropped_connection_is_retryable(
    provider: str, server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    script(server, "agent-1", {"drop": True})
    f = fail(make_call, provider)
    assert f.status is None and f.retryable
    assert f.category in {"connection", "timeout"}


# ----------------------------------------------------------------- keys
@pytest.mark.parametrize("provider", PROVIDERS)
def test_wrong_key_is_final_auth_and_never_leaks(
    provider: str, server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    server.keys["agent-1"] = "sk-the-right-key-123456"
    wrong = "sk-WRONG-key-do-not-leak-987654"
    with pytest.raises(ProviderError) as info:
        call_model(make_call(provider, api_key=SecretStr(wrong)))
    f = info.value.failure
    expected_status = 403 if provider == "bedrock" else 401
    assert (f.status, f.category, f.retryable) == (expected_status, "auth", False)
    assert decide_next(f, 1, False).reason == "final: auth"
    for text in (str(info.value), repr(info.value), f.model_dump_json(), repr(f)):
        assert wrong not in text
    assert info.value.__cause__ is None and info.value.__suppress_context__
    # the right key passes
    assert call_model(make_call(provider, api_key=SecretStr("sk-the-right-key-123456"))).text.startswith("echo: ")


def test_key_echoed_by_a_provider_is_scrubbed(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    call = make_call("openai")
    key = call.api_key.get_secret_value()
    script(
        server,
        "agent-1",
        err(
            401,
            {
                "error": {
                    "message": f"Incorrect API key provided: {key}",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
        ),
    )
    with pytest.raises(ProviderError) as info:
        call_model(call)
    assert key not in str(info.value)
    assert key not in info.value.failure.model_dump_json()
    assert "[redacted]" in info.value.failure.body
    assert key not in repr(call)


@pytest.mark.unit
def test_compatible_needs_a_base_url() -> None:
    with pytest.raises(ValueError):
        ModelCall(
            provider="openai-compatible",
            model="m",
            system="s",
            user_text="u",
            end_user_id="a",
            api_key=SecretStr("k"),
            timeout_s=1,
        )


def test_bedrock_key_is_never_sent_over_plain_http_to_a_remote_host(make_call: Callable[..., ModelCall]) -> None:
    with pytest.raises(ValueError):
        call_model(make_call("bedrock", base_url="http://bedrock.example.invalid"))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unreadable_2xx_is_a_final_failure(
    provider: str, server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    script(
        server,
        "agent-1",
        err(200, "<html>captive portal</html>"),
        err(200, {"error": {"message": "upstream failed", "type": "server_error"}}),
    )
    f = fail(make_call, provider)
    assert (f.status, f.category, f.retryable) == (200, "unexpected", False)
    assert f.body == "<html>captive portal</html>"
    f2 = fail(make_call, provider)  # an error object inside a 200: classified by its type (design §2.3, issue 10)
    assert (f2.status, f2.category, f2.retryable) == (200, "server_error", True)


def test_provider_error_pickles_without_losing_the_failure(
    server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    import pickle

    script(server, "agent-1", err(529, ANTHROPIC_ERR))
    with pytest.raises(ProviderError) as info:
        call_model(make_call("anthropic"))
    copy = pickle.loads(pickle.dumps(info.value))
    assert copy.failure == info.value.failure and str(copy) == str(info.value)


def test_launch_room_sequences(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    """The reference scenario's first model calls: a 429 waited out by retry-after, a 503 by
    the default 2 s, each followed by the reply on the next request."""
    script(
        server,
        "nw-planner",
        err(
            429,
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "Number of request tokens has exceeded your per-minute rate limit",
                },
            },
            {"retry-after": "1"},
        ),
        {"reply": {"text": "Plan.", "actions": ACTIONS[:1]}},
    )
    script(
        server,
        "fab-designer",
        err(503, {"error": {"message": "The server is overloaded", "type": "server_error", "code": None}}),
        {"reply": {"text": "Banners done.", "actions": []}},
    )
    for agent, provider, wait in (("nw-planner", "anthropic", 1), ("fab-designer", "openai", 2)):
        call = make_call(provider, agent)
        with pytest.raises(ProviderError) as info:
            call_model(call)
        d = decide_next(info.value.failure, 1, call.owner_base_url)
        assert (d.retry, d.wait_seconds) == (True, wait)
        assert call_model(call).text in {"Plan.", "Banners done."}
        assert server.count(agent) == 2


@pytest.mark.unit
def test_each_provider_kind_has_its_own_module_and_the_sdk_names_are_not_shadowed() -> None:
    """One module per provider under quayutec.providers; ``providers/anthropic.py`` and
    ``providers/openai.py`` import the SDKs of the same name (absolute imports), not themselves."""
    import importlib

    from quayutec.providers import registry

    assert {kind: adapter.__module__ for kind, adapter in registry.ADAPTERS.items()} == {
        "anthropic": "quayutec.providers.anthropic",
        "openai": "quayutec.providers.openai",
        "openai-compatible": "quayutec.providers.openai",
        "bedrock": "quayutec.providers.bedrock",
    }
    for kind, sdk in registry.SDK_MODULES.items():
        registry.load_sdk(kind)
        module = importlib.import_module(sdk)
        assert module.__name__ == sdk and "quayutec" not in (module.__file__ or "")
