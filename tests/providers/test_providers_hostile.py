"""Issue 10, findings 2 and 3 at the adapters: a key holding a newline (or NUL, CR LF) never
reaches the ledger's text, is not retried, and costs one request at most; transport error text
never quotes a header; the scrubber covers the key's escaped and URL-encoded forms; an owner's
model address must be https to a public address after DNS resolution, and the connection goes to
the checked address (loopback only where the local stack allows it; these tests run with it off
unless they say otherwise)."""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import quote

import pytest
from pydantic import SecretStr

from quaylocal.provider_server import ProviderServer
from quayutec.providers import ModelCall, ProviderError, call_model, decide_next
from quayutec.providers.egress import AddressRefused, checked_address, pinned_http_client, url_problem
from quayutec.providers.failures import build_failure
from quayutec.providers.keys import key_problem

BAD_KEYS = [
    "sk-live-secret-0123456789\n",
    "sk-live-\x00secret-0123456789",
    "sk-live-secret-0123456789\r\n",
    "sk-live secret-0123456789",
    "short",
    "sk-ünïcode-SECRET123",
]


@pytest.mark.parametrize("key", BAD_KEYS)
def test_a_key_that_cannot_be_a_header_fails_at_once_final_and_unquoted(
    make_call: Callable[..., ModelCall], server: ProviderServer, key: str
) -> None:
    with pytest.raises(ProviderError) as info:
        call_model(make_call("openai", api_key=SecretStr(key)))
    f = info.value.failure
    text = str(info.value) + f.model_dump_json()
    assert key.strip() not in text and "Bearer" not in text, text
    assert "SECRET123" not in text and "U+" not in text and "\\u00fc" not in text, text
    assert not f.retryable and f.category == "auth"
    assert not decide_next(f, 1, False).retry  # one request recorded at most, never three
    assert server.requests == []  # nothing was sent


@pytest.mark.unit
def test_key_rule_printable_no_whitespace_8_to_512_bytes() -> None:
    assert key_problem("sk-ant-api03-abcdefgh") is None
    assert key_problem("x" * 512) is None and key_problem("x" * 513) and key_problem("x" * 7)
    for bad in (
        "sk-abc\tdefgh",
        "sk-abc\u200bdefgh\x7f",
        "sk-abcdefgh\u2028",
        "sk-abc\u00a0defgh",
        "sk-\u00fcn\u00efcode-SECRET123",
    ):
        assert key_problem(bad), bad


@pytest.mark.unit
def test_transport_error_text_never_quotes_the_cause() -> None:
    import openai

    from quayutec.providers._httpsdk import failure_from_sdk_error

    request = __import__("httpx2").Request("POST", "https://api.openai.com/v1/chat/completions")
    exc = openai.APIConnectionError(request=request)
    exc.__cause__ = ValueError("Illegal header value b'Bearer sk-proj-abcdefgh12345\\n'")
    f = failure_from_sdk_error("openai", openai, exc, "", "x-request-id")
    assert f is not None and "Bearer" not in f.message and "sk-proj" not in f.message
    assert "ValueError" in f.message


@pytest.mark.parametrize(
    "encode",
    [
        lambda k: k,
        lambda k: json.dumps(k)[1:-1],
        lambda k: json.dumps(json.dumps(k)[1:-1])[1:-1],
        lambda k: quote(k, safe=""),
        lambda k: repr(k)[1:-1],
    ],
    ids=["raw", "json", "json-twice", "url", "python"],
)
@pytest.mark.unit
def test_the_scrubber_covers_every_encoding(encode: Callable[[str], str]) -> None:
    key = 'sk-"weird"/key+&=\\0123'
    body = json.dumps({"error": {"message": f"bad header: {encode(key)}", "type": "x"}})
    f = build_failure(provider="openai", status=400, headers={}, body_text=body, request_id=None, secret=key)
    assert encode(key) not in f.body and encode(key) not in f.message, (f.body, f.message)
    assert "[redacted]" in f.message


# ----------------------------------------------------------------------------- owner addresses
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:18999/v1",
        "https://127.0.0.1/v1",
        "http://169.254.169.254/latest/meta-data/",
        "https://169.254.169.254/v1",
        "https://10.1.2.3/v1",
        "https://192.168.0.10/v1",
        "https://172.16.5.4/v1",
        "https://[::1]/v1",
        "https://[fd00::1]/v1",
        "https://[fe80::1]/v1",
        "https://[::ffff:10.0.0.1]/v1",
        "https://localhost/v1",
        "https://api.localhost/v1",
        "https://0.0.0.0/v1",
        "https://100.64.0.1/v1",
        "http://api.example.com/v1",
        "ftp://api.example.com/v1",
        "https://user:pw@api.example.com/v1",
        "https://api.example.com:0/v1",
    ],
)
@pytest.mark.unit
def test_owner_addresses_must_be_https_to_public_hosts(url: str) -> None:
    assert url_problem(url, allow_loopback=False), url


@pytest.mark.unit
def test_loopback_is_allowed_only_by_the_local_setting() -> None:
    assert url_problem("http://127.0.0.1:8999/v1", allow_loopback=True) is None
    assert url_problem("http://169.254.169.254/", allow_loopback=True)  # never metadata
    assert url_problem("https://api.example.com/v1") is None


def _resolver(table: dict[str, list[str]]) -> Callable[[str, int], list[str]]:
    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError("no such host")
        return table[host]

    return resolve


@pytest.mark.unit
def test_names_are_checked_after_resolution() -> None:
    r = _resolver(
        {
            "rebind.example": ["93.184.216.34", "10.0.0.7"],
            "meta.example": ["169.254.169.254"],
            "ok.example": ["93.184.216.34"],
        }
    )
    for host in ("rebind.example", "meta.example", "gone.example"):
        with pytest.raises(AddressRefused):
            checked_address(f"https://{host}/v1", resolver=r)
    assert checked_address("https://ok.example/v1", resolver=r) == "93.184.216.34"


def test_an_owner_address_on_loopback_is_refused_at_request_time_with_nothing_sent(
    make_call: Callable[..., ModelCall], server: ProviderServer
) -> None:
    call = make_call("openai-compatible", allow_loopback=False)
    with pytest.raises(ProviderError) as info:
        call_model(call)
    f = info.value.failure
    assert (f.category, f.retryable, f.status) == ("address_refused", False, None)
    assert server.requests == []
    reply = call_model(make_call("openai-compatible", allow_loopback=True))  # the local stack's setting
    assert reply.text


def test_the_connection_goes_to_the_checked_address(server: ProviderServer) -> None:
    """A name that resolves (here, by the resolver given) to the checked address is connected to
    that address: the request reaches the local server although the name resolves nowhere else."""
    base = server.base_url("openai-compatible")  # http://127.0.0.1:PORT/...
    url = base.replace("127.0.0.1", "model.owner.test")
    resolver = _resolver({"model.owner.test": ["127.0.0.1"]})
    with pytest.raises(AddressRefused):
        pinned_http_client(url, timeout_s=5, allow_loopback=False, resolver=resolver)
    client = pinned_http_client(url, timeout_s=5, allow_loopback=True, resolver=resolver)
    with client:
        r = client.post(
            url.rstrip("/") + "/chat/completions",
            headers={"Authorization": "Bearer sk-test-0123456789"},
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "user": "agent-x"},
        )
    assert r.status_code == 200, r.text
    assert any(q.agent_id == "agent-x" for q in server.requests)


def test_an_anthropic_agent_with_an_owner_address_is_pinned_too(
    make_call: Callable[..., ModelCall], server: ProviderServer
) -> None:
    with pytest.raises(ProviderError) as info:
        call_model(make_call("anthropic", owner_base_url=True, allow_loopback=False))
    assert info.value.failure.category == "address_refused" and server.requests == []
    assert call_model(make_call("anthropic", owner_base_url=True, allow_loopback=True)).text
