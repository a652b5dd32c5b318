"""Security probe, at the API: numbers in request bodies refuse booleans (``"hop_limit": true`` was
a room with hop limit 1); the room page caches only its shipped files, never a requested name it
does not have; owner model addresses in legacy IPv4 spellings or IPv6 transition ranges are
refused at registration (design §5). The stack's deps refuse loopback model addresses, as deployed."""

from __future__ import annotations

import pytest
from apihelpers import World

from quaylocal.dev import Gateway, direct_invoke
from quayutec.api.routes import page

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")


# conftest's stack_env, with owners' addresses checked as in the deployed stack (loopback off)
# and no scripted replies.
STACK_OPTIONS = {"allow_loopback_model_urls": False}
PROVIDER_SCRIPTS: dict[str, list] = {}


# ----------------------------------------------------------------------------- 3: no booleans for numbers
@pytest.mark.parametrize("value", [True, False, "1", 1.5])
def test_hop_limit_must_be_a_number_not_a_boolean(light_world: World, value: object) -> None:
    r = light_world.api.call("POST", "/rooms", light_world.tokens["ann"], {"members": [], "hop_limit": value})
    assert r.status == 422, (value, r.status, r.body)
    assert r.body["error"] == "validation_error"
    assert [f["field"] for f in r.body["fields"]] == ["body.hop_limit"], r.body


def test_hop_limit_as_a_number_is_still_accepted(light_world: World) -> None:
    r = light_world.api.call("POST", "/rooms", light_world.tokens["ann"], {"members": [], "hop_limit": 1})
    assert r.status == 201, r.body
    assert r.body["hop_limit"] == 1


@pytest.mark.parametrize("value", [True, False])
def test_a_file_size_must_be_a_number_not_a_boolean(light_world: World, value: bool) -> None:
    r = light_world.api.call(
        "POST",
        "/rooms/r1/files",
        light_world.tokens["ann"],
        {"name": "a.md", "content_type": "text/markdown", "size": value},
    )
    assert r.status == 422, (value, r.status, r.body)
    assert [f["field"] for f in r.body["fields"]] == ["body.size"], r.body


# ----------------------------------------------------------------------------- 4: the page caches shipped files only
def _cache_sizes() -> dict[str, int]:
    """The sizes of the page module's own caches (functools caches defined in it)."""
    return {
        name: fn.cache_info().currsize
        for name, fn in vars(page).items()
        if callable(fn) and hasattr(fn, "cache_info") and getattr(fn, "__module__", "") == page.__name__
    }


@pytest.mark.unit
def test_a_missing_page_file_is_not_cached() -> None:
    gateway = Gateway(direct_invoke())
    for name in ("index.html", "app.js", "app.css"):  # shipped: served (and cached)
        assert gateway.handle("GET", f"/app/{name}", {}).status == 200, name
    before = _cache_sizes()
    assert before and sum(before.values()) >= 3
    for i in range(300):  # unauthenticated made-up names, as a scanner would send them
        assert gateway.handle("GET", f"/app/rand{i}.js", {}).status == 404
    assert _cache_sizes() == before
    for name in ("rand1.js", "nope.css", "x.html"):
        assert page._asset(name) is None
    assert _cache_sizes() == before
    assert sum(before.values()) <= len(page.SHIPPED_ASSETS)


# ----------------------------------------------------------------------------- 2: owner addresses, at registration
@pytest.mark.parametrize(
    "url",
    [
        "https://0251.0376.0251.0376/latest",
        "https://2130706433/v1",
        "https://0x7f000001/v1",
        "https://0177.0.0.1/v1",
        "https://127.1/v1",
        "https://0/v1",
        "https://[2002:a9fe:a9fe::1]/v1",
        "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/v1",
        "https://192.0.0.8/v1",
    ],
)
def test_an_owner_address_in_another_spelling_is_refused_at_registration(light_world: World, url: str) -> None:
    r = light_world.api.call(
        "POST",
        "/agents",
        light_world.tokens["ann"],
        {
            "name": "a-spelt",
            "provider": "openai-compatible",
            "model": "m",
            "base_url": url,
            "api_key": "sk-acme-compat-0123456789",
        },
    )
    assert r.status == 422, (url, r.status, r.body)
    assert r.body["fields"][0]["field"] == "body.base_url"
    assert light_world.api.call("GET", "/agents/a-spelt", light_world.tokens["ann"]).status == 404
