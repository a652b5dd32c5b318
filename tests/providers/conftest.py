"""Fixtures for the provider adapter tests: a local provider server and ModelCall factories.

Nothing here reaches the network beyond 127.0.0.1.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from quaylocal.provider_server import ProviderServer
from quayutec.providers import ModelCall

PROVIDERS = ("anthropic", "openai", "openai-compatible", "bedrock")
MODELS = {
    "anthropic": "claude-local-test",
    "openai": "gpt-4.1",
    "openai-compatible": "local-llama",
    "bedrock": "anthropic.claude-3-haiku-20240307-v1:0",
}


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    srv = ProviderServer()
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def make_call(server: ProviderServer) -> Callable[..., ModelCall]:
    """``make_call(provider, agent_id, **overrides)``: a ModelCall aimed at the local server."""

    def factory(provider: str, agent_id: str = "agent-1", **overrides: Any) -> ModelCall:
        fields: dict[str, Any] = {
            "provider": provider,
            "model": MODELS[provider],
            "system": "You are a test agent.",
            "user_text": "Room context line one\n@agent please answer",
            "end_user_id": agent_id,
            "api_key": SecretStr(f"sk-test-{agent_id}-0123456789"),
            "base_url": server.base_url(provider),
            "owner_base_url": provider == "openai-compatible",
            "allow_loopback": True,  # the local server is on 127.0.0.1, as on the local stack
            "timeout_s": 5.0,
        }
        fields.update(overrides)
        return ModelCall(**fields)

    return factory


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
