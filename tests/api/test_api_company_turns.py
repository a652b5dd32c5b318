"""A company's ``max_concurrent_runs`` (docs/design.md §12.3): an operator sets it on ``POST
/companies`` and ``PATCH /companies/{company}``; the company's record answers it and its turns
counter holds the copy the runs' turn transactions compare against. Bad values are the API's
validation error (422 ``validation_error`` naming the field, as every body); anyone but an
operator gets 403, an unknown company 404."""

from __future__ import annotations

import pytest
from apihelpers import ADMIN_TOKEN, World

from quayutec.deps import default_deps


def _cap(company: str) -> object:
    return default_deps().turns.counter(company).get("cap")


def test_an_operator_sets_max_concurrent_runs_on_create_and_patch(light_world: World) -> None:
    api = light_world.api
    made = api.ok("POST", "/companies", ADMIN_TOKEN, {"id": "turnco", "people": ["tia"], "max_concurrent_runs": 3})
    assert made["max_concurrent_runs"] == 3 and _cap("turnco") == 3
    plain = api.ok("POST", "/companies", ADMIN_TOKEN, {"id": "plainco", "people": ["pat"]})
    assert plain["max_concurrent_runs"] == 10 and _cap("plainco") is None  # the default: no copy needed
    patched = api.ok("PATCH", "/companies/turnco", ADMIN_TOKEN, {"max_concurrent_runs": 7})
    assert patched["max_concurrent_runs"] == 7 and _cap("turnco") == 7
    assert api.ok("GET", "/companies/turnco", ADMIN_TOKEN)["max_concurrent_runs"] == 7


@pytest.mark.parametrize("value", [0, -1, 1001, "5", True, 2.5, None])
def test_a_bad_max_concurrent_runs_is_refused_and_changes_nothing(light_world: World, value: object) -> None:
    api = light_world.api
    before = api.ok("GET", "/companies/acme", ADMIN_TOKEN)["max_concurrent_runs"]
    r = api.call("PATCH", "/companies/acme", ADMIN_TOKEN, {"max_concurrent_runs": value})
    assert r.status == 422 and r.body["error"] == "validation_error", (r.status, r.body)
    assert "max_concurrent_runs" in str(r.body), r.body
    assert api.ok("GET", "/companies/acme", ADMIN_TOKEN)["max_concurrent_runs"] == before
    r = api.call("POST", "/companies", ADMIN_TOKEN, {"id": "badco", "max_concurrent_runs": value})
    assert r.status == 422 and api.call("GET", "/companies/badco", ADMIN_TOKEN).status == 404


def test_only_an_operator_patches_and_an_unknown_company_is_404(light_world: World) -> None:
    api, ann = light_world.api, light_world.tokens["ann"]
    r = api.call("PATCH", "/companies/acme", ann, {"max_concurrent_runs": 50})
    assert r.status == 403, r.body
    r = api.call("PATCH", "/companies/nosuchco", ADMIN_TOKEN, {"max_concurrent_runs": 5})
    assert r.status == 404, r.body
    assert _cap("nosuchco") is None, "nothing written for an unknown company"
    r = api.call("PATCH", "/companies/acme", ADMIN_TOKEN, {})
    assert r.status == 422 and "max_concurrent_runs" in r.body["message"], r.body
