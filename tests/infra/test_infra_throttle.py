"""Per-company API throttling in the synthesized template (docs/design.md §5): the REST API takes
API keys from the authorizer, every authorized method requires one, one usage plan on the stage
throttles each key (each company) on its own, and the shared key of operators and companies
without a key is in that plan; the stage's own throttle stays the overall cap."""

from __future__ import annotations

import pytest
from infra_helpers import as_list, flat, of_type, role_of_function

from quayutec import resources as R


def test_the_rest_api_takes_its_keys_from_the_authorizer(resources) -> None:
    (api,) = of_type(resources, "AWS::ApiGateway::RestApi").values()
    assert api["Properties"]["ApiKeySourceType"] == "AUTHORIZER"


def test_every_authorized_method_requires_a_key_and_public_ones_none(resources) -> None:
    methods = of_type(resources, "AWS::ApiGateway::Method").values()
    authorized = [m["Properties"] for m in methods if m["Properties"]["AuthorizationType"] == "CUSTOM"]
    public = [m["Properties"] for m in methods if m["Properties"]["AuthorizationType"] == "NONE"]
    assert authorized and public
    assert all(m.get("ApiKeyRequired") is True for m in authorized)
    assert not any(m.get("ApiKeyRequired") for m in public)


def test_one_usage_plan_on_the_stage_throttles_each_key(resources) -> None:
    plans = of_type(resources, "AWS::ApiGateway::UsagePlan")
    assert list(plans) == [R.USAGE_PLAN_LOGICAL_ID]
    props = plans[R.USAGE_PLAN_LOGICAL_ID]["Properties"]
    assert props["UsagePlanName"] == R.usage_plan_name("dev")
    assert props["Throttle"] == {
        "RateLimit": R.DEFAULT_COMPANY_THROTTLE_RATE,
        "BurstLimit": R.DEFAULT_COMPANY_THROTTLE_BURST,
    }
    (stage_id,) = of_type(resources, "AWS::ApiGateway::Stage")
    assert [s["Stage"] for s in props["ApiStages"]] == [{"Ref": stage_id}]
    # the stage's throttle: every caller together, above each company's
    (stage,) = of_type(resources, "AWS::ApiGateway::Stage").values()
    (setting,) = stage["Properties"]["MethodSettings"]
    assert (setting["ThrottlingRateLimit"], setting["ThrottlingBurstLimit"]) == (
        R.STAGE_THROTTLE_RATE,
        R.STAGE_THROTTLE_BURST,
    )
    assert R.DEFAULT_COMPANY_THROTTLE_RATE < R.STAGE_THROTTLE_RATE


def test_the_shared_key_is_in_the_plan_and_named_to_the_authorizer(resources) -> None:
    key = resources[R.SHARED_API_KEY_LOGICAL_ID]
    assert key["Type"] == "AWS::ApiGateway::ApiKey"
    assert key["Properties"]["Name"] == R.shared_api_key_name("dev") and key["Properties"]["Enabled"] is True
    (plan_key,) = of_type(resources, "AWS::ApiGateway::UsagePlanKey").values()
    assert plan_key["Properties"] == {
        "KeyId": {"Ref": R.SHARED_API_KEY_LOGICAL_ID},
        "KeyType": "API_KEY",
        "UsagePlanId": {"Ref": R.USAGE_PLAN_LOGICAL_ID},
    }
    env = resources["AuthorizerFunction"]["Properties"]["Environment"]["Variables"]
    assert env[R.SHARED_API_KEY_ID_ENV] == {"Ref": R.SHARED_API_KEY_LOGICAL_ID}
    api_env = resources["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert api_env[R.USAGE_PLAN_NAME_ENV] == R.usage_plan_name("dev")  # a name: no dependency cycle


def _policies_of(resources: dict, function_id: str) -> list[dict]:
    role = role_of_function(resources, function_id)
    return [
        st
        for p in of_type(resources, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
        for st in p["Properties"]["PolicyDocument"]["Statement"]
        if str(st["Action"]).startswith("apigateway:")
    ]


def test_the_api_may_make_company_keys_and_the_authorizer_read_the_shared_one(resources) -> None:
    api = {(st["Action"], flat(r)) for st in _policies_of(resources, "ApiFunction") for r in as_list(st["Resource"])}
    assert api == {
        ("apigateway:GET", "arn:<AWS::Partition>:apigateway:<AWS::Region>::/usageplans"),
        ("apigateway:GET", "arn:<AWS::Partition>:apigateway:<AWS::Region>::/apikeys"),
        ("apigateway:POST", "arn:<AWS::Partition>:apigateway:<AWS::Region>::/apikeys"),
        (
            "apigateway:POST",
            f"arn:<AWS::Partition>:apigateway:<AWS::Region>::/usageplans/<{R.USAGE_PLAN_LOGICAL_ID}>/keys",
        ),
    }
    (auth,) = _policies_of(resources, "AuthorizerFunction")
    assert (auth["Action"], flat(auth["Resource"])) == (
        "apigateway:GET",
        f"arn:<AWS::Partition>:apigateway:<AWS::Region>::/apikeys/<{R.SHARED_API_KEY_LOGICAL_ID}>",
    )


# ------------------------------------------------------------------ settings
def _settings(**context):
    from aws_cdk import App

    from quayinfra.config import Settings

    return Settings.from_context(App(context=context).node)


@pytest.mark.unit
def test_company_throttle_defaults_and_overrides() -> None:
    default = _settings()
    assert (default.company_throttle_rate, default.company_throttle_burst) == (10, 20)
    custom = _settings(companyThrottleRate="25", companyThrottleBurst=40)
    assert (custom.company_throttle_rate, custom.company_throttle_burst) == (25, 40)


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("companyThrottleRate", "0", "must be 1..50"),
        ("companyThrottleRate", "51", "must be 1..50"),
        ("companyThrottleBurst", "101", "must be 1..100"),
        ("companyThrottleBurst", "lots", "not an integer"),
    ],
)
@pytest.mark.unit
def test_a_company_throttle_out_of_bounds_fails_synth(key: str, value: str, message: str) -> None:
    from quayinfra.config import SettingsError

    with pytest.raises(SettingsError, match=rf"context {key}.*{message}"):
        _settings(**{key: value})
