"""``GET /me`` (issue 24, items 10 and 11): who the token is (company, person, operator or not),
for ``quay whoami`` and the room page, which offers only the task actions its person may take."""

from __future__ import annotations

import pytest
from apihelpers import World

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")


def test_me_names_the_tokens_company_and_person(light_world: World) -> None:
    api = light_world.api
    assert api.ok("GET", "/me", light_world.tokens["ann"]) == {"company": "acme", "member": "ann", "admin": False}
    assert api.ok("GET", "/me", light_world.tokens["admin"])["admin"] is True
    assert api.call("GET", "/me").status == 401
