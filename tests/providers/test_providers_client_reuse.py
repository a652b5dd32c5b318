"""SDK clients are kept across warm invocations per provider, base URL and key (issue 13 item 1):
a warm Lambda does not build a client (and open a TLS connection) per model request. Counted,
never timed: the clients kept, and that no key is in what keys them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import SecretStr

from quaylocal.provider_server import ProviderServer
from quayutec.providers import ModelCall, base, call_model


@pytest.fixture(autouse=True)
def _no_kept_clients() -> Any:
    base.clear_clients()
    yield
    base.clear_clients()


@pytest.mark.parametrize("provider", ["anthropic", "openai", "bedrock"])
def test_one_client_per_provider_base_url_and_key(
    provider: str, server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    for i in range(3):
        server.set_script("a1", [{"reply": {"text": f"ok {i}"}}])
        assert call_model(make_call(provider, "a1", timeout_s=5.0 + i)).text == f"ok {i}"
    kept = [k for k in base._CLIENTS if k[0] == provider]
    assert len(kept) == (3 if provider == "bedrock" else 1)  # botocore's timeout is the client's

    server.set_script("a1", [{"reply": {"text": "rotated"}}])
    rotated = make_call(provider, "a1", api_key=SecretStr("sk-test-rotated-key-0123456789"))
    assert call_model(rotated).text == "rotated"
    assert len([k for k in base._CLIENTS if k[0] == provider]) == len(kept) + 1  # a new key, a new client
    text = repr(list(base._CLIENTS))
    assert "sk-test" not in text and "0123456789" not in text  # keyed by the key's digest only


def test_an_owner_address_gets_a_client_per_request(
    server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    """An owner's own address is resolved, checked and pinned for each request (design §5)."""
    for i in range(2):
        server.set_script("a1", [{"reply": {"text": f"ok {i}"}}])
        assert call_model(make_call("openai-compatible", "a1")).text == f"ok {i}"
    assert not base._CLIENTS


def test_the_cache_is_bounded(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    for i in range(base.CLIENT_CACHE_SIZE + 3):
        server.set_script("a1", [{"reply": {"text": "ok"}}])
        call_model(make_call("anthropic", "a1", api_key=SecretStr(f"sk-test-key-{i}-0123456789")))
    assert len(base._CLIENTS) == base.CLIENT_CACHE_SIZE
