"""Fixtures of the API tests: one local stack per test module (moto in-process), the local
provider server (a1 is scripted to declare a held action), and the seeded world of apihelpers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from apihelpers import ADMIN_TOKEN, HELD_MEMORY, Api, World, seed

from quaylocal.dev import Gateway, direct_invoke, preload_handlers
from quaylocal.provider_server import ProviderServer
from quaylocal.scenario import PROVIDER_ENV
from quaylocal.stack import LocalStack
from quayutec.dal.auth import TokenStore
from quayutec.deps import default_deps

TIME_SCALE = 0.01
A1_SCRIPT = [
    {
        "reply": {
            "text": "I will remember it once acme agrees.",
            "actions": [{"kind": "remember", "text": HELD_MEMORY, "visibility": "company"}],
        }
    }
]


@pytest.fixture(scope="module")
def stack_env(request: pytest.FixtureRequest) -> Iterator[tuple[LocalStack, ProviderServer]]:
    """The local stack and provider server of a test module. A module may set
    ``PROVIDER_SCRIPTS`` (default: a1 scripted to declare a held memory line) and
    ``STACK_SETTINGS`` (extra function settings) and ``STACK_OPTIONS`` (LocalStack options, e.g.
    ``allow_loopback_model_urls=False``: owners' addresses checked as deployed)."""
    preload_handlers()
    scripts = getattr(request.module, "PROVIDER_SCRIPTS", {"a1": A1_SCRIPT})
    server = ProviderServer(scripts={k: list(v) for k, v in scripts.items()}, keys={})
    server.start()
    try:
        settings = {PROVIDER_ENV[p]: server.base_url(p) for p in PROVIDER_ENV}
        with LocalStack(
            settings={**settings, **getattr(request.module, "STACK_SETTINGS", {})},
            time_scale=TIME_SCALE,
            **getattr(request.module, "STACK_OPTIONS", {}),
        ) as stack:
            TokenStore(default_deps().room.table).issue(None, "admin", admin=True, token=ADMIN_TOKEN)
            yield stack, server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def api(stack_env) -> Api:
    return Api(Gateway(direct_invoke()))


@pytest.fixture(scope="module")
def world(stack_env, api) -> World:
    return seed(api, stack_env[0])


@pytest.fixture(scope="module")
def light_world(stack_env, api) -> World:
    """The seeded world without a1's run (no approval request)."""
    return seed(api, stack_env[0], with_run=False)
