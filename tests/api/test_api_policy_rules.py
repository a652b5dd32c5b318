"""A company's policy rules always apply or say why not (docs/design.md §5): a rule key names an
agent as names resolve everywhere (its id or its name, in any letter case); two keys naming one
agent are a 400; a rule that can never apply (``cross_company.remember``) is a 400 that says why;
a key that names no agent of the company yet is accepted with a warning."""

from __future__ import annotations

from apihelpers import World

from quayutec.logic import rights
from quayutec.models import RightsPolicy


def test_a_rule_under_a_name_in_another_letter_case_applies() -> None:
    policy = RightsPolicy.model_validate({"agents": {"Planner": {"remember": "deny"}}})
    assert rights.decide(policy, "acme.planner", "remember", False) == ("deny", "rule agents.Planner.remember")
    by_id = RightsPolicy.model_validate({"agents": {"ACME.Planner": {"remember": "ask"}}})
    assert rights.decide(by_id, "acme.planner", "remember", False)[0] == "ask"
    assert rights.decide(policy, "acme.planter", "remember", False) == ("allow", "rule default")


def test_the_api_refuses_rules_that_never_apply_and_warns_of_unknown_agents(light_world: World) -> None:
    api, ann = light_world.api, light_world.tokens["ann"]
    before = api.ok("GET", "/companies/acme/policy", ann)
    never = api.call("PUT", "/companies/acme/policy", ann, {"cross_company": {"remember": "deny"}})
    assert never.status == 400 and "cross_company.remember: never applies" in never.body["message"], never.body
    twice = api.call(
        "PUT", "/companies/acme/policy", ann, {"agents": {"A1": {"remember": "deny"}, "acme.a1": {"remember": "ask"}}}
    )
    assert twice.status == 400 and "name one agent" in twice.body["message"], twice.body
    assert api.ok("GET", "/companies/acme/policy", ann) == before  # nothing written
    ok = api.ok("PUT", "/companies/acme/policy", ann, {"agents": {"A1": {"remember": "deny"}, "later": {}}})
    assert ok["warnings"] == ["agents.later: no agent of acme has this name yet; the rule applies once one does"]
    assert api.ok("GET", "/companies/acme/policy", ann)["agents"] == {"A1": {"remember": "deny"}, "later": {}}
