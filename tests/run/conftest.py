"""Fixtures for the run-path tests: the local stack (moto in-process) with scaled Step Functions
time, a room (see ``runhelpers.make_room``) and a local provider server with scripted replies."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from runhelpers import TIME_SCALE, Env, make_room

from quaylocal.provider_server import ProviderServer
from quaylocal.stack import LocalStack


@pytest.fixture
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    """``make_room``'s room; a test may pass ``make_room``'s options as the fixture's indirect
    parameter (``@pytest.mark.parametrize("env", [{"a1_model": "..."}], indirect=True)``)."""
    server = ProviderServer(scripts={}, keys={})
    server.start()
    settings = {
        "ANTHROPIC_BASE_URL": server.base_url("anthropic"),
        "OPENAI_BASE_URL": server.base_url("openai"),
        "BEDROCK_ENDPOINT_URL": server.base_url("bedrock"),
    }
    try:
        with LocalStack(settings=settings, time_scale=TIME_SCALE) as stack:
            keys = make_room(stack, server, **getattr(request, "param", {}))
            yield Env(stack=stack, server=server, keys=keys)
    finally:
        server.stop()
