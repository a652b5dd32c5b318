"""What an operator may do to a company, and that its people see it (design §5): an operator
issues a company's first token only, its people issue the rest for their own people; adding a
person and issuing or revoking a token are each an entry of the company's audit trail, naming
who did it and when, that the company's people read and no other company does."""

from __future__ import annotations

from apihelpers import ADMIN_TOKEN, World


def test_an_operator_bootstraps_a_company_and_its_people_take_over(light_world: World) -> None:
    api = light_world.api
    api.ok("POST", "/companies", ADMIN_TOKEN, {"id": "dune", "people": ["dora", "dan"]})
    dora = api.ok("POST", "/companies/dune/tokens", ADMIN_TOKEN, {"member": "dora"})["token"]
    refused = api.call("POST", "/companies/dune/tokens", ADMIN_TOKEN, {"member": "dan"})
    assert refused.status == 403 and "first token" in refused.body["message"], refused.body
    dan = api.ok("POST", "/companies/dune/tokens", dora, {"member": "dan"})
    assert api.call("GET", "/me", dan["token"]).body == {"company": "dune", "member": "dan", "admin": False}
    not_ours = api.call("POST", "/companies/dune/tokens", dora, {"member": "mallory"})
    assert not_ours.status == 400 and "not a person" in not_ours.body["message"]
    assert api.call("POST", "/companies/dune/tokens", light_world.tokens["bob"], {"member": "dora"}).status == 404
    api.ok("POST", "/companies/dune/people", dora, {"person": "dee"})  # its people staff it too
    api.ok("POST", "/companies/dune/people", ADMIN_TOKEN, {"person": "dex"})
    api.ok("DELETE", f"/companies/dune/tokens/{dan['token_id']}", ADMIN_TOKEN)
    api.ok("DELETE", f"/companies/dune/tokens/{dan['token_id']}", dora)  # again: idempotent, audited once
    assert api.call("GET", "/me", dan["token"]).status == 401

    trail = api.ok("GET", "/companies/dune/audit", dora)["entries"]
    assert [(e["actor_kind"], e["actor"], e["action"], e["subject"]) for e in trail] == [
        ("operator", "admin", "token_revoked", dan["token_id"]),
        ("operator", "admin", "person_added", "dex"),
        ("person", "dora", "person_added", "dee"),
        ("person", "dora", "token_issued", "dan"),
        ("operator", "admin", "token_issued", "dora"),
        ("operator", "admin", "company_created", "dune"),
    ], "newest first, each change once, the refused issue not at all"
    assert all(e["at"] for e in trail) and trail == sorted(trail, key=lambda e: e["at"], reverse=True)
    assert api.ok("GET", "/companies/dune/audit?limit=2", dora)["entries"] == trail[:2]
    assert api.ok("GET", "/companies/dune/audit", ADMIN_TOKEN)["entries"] == trail
    assert api.call("GET", "/companies/dune/audit", light_world.tokens["bob"]).status == 404, "another company's"
    assert api.call("GET", "/companies/dune/audit?limit=0", dora).status in (400, 422)
