"""Per-company API throttling (docs/design.md §5) on the local stack: each company gets its API
key in the stage's usage plan when it is created (once, even when the creation is retried after a
crash between the key and the company item), the authorizer answers it as ``usageIdentifierKey``
(operators and companies without a key: the shared key), and ``quay dev``'s gateway throttles each
key on its own: one company's burst gets its own 429s while another's requests go through."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from apihelpers import ADMIN_TOKEN, Api

from quaylocal.dev import Gateway, direct_invoke, stack_invoke
from quayutec import resources as R
from quayutec.dal.api_keys import ApiKeys
from quayutec.deps import default_deps
from quayutec.logic.access import OPERATOR
from quayutec.logic.services import Services


def _apigw(stack_env) -> Any:
    return stack_env[0].client("apigateway")


def _keys_named(stack_env, name: str) -> list[dict]:
    items = _apigw(stack_env).get_api_keys(nameQuery=name, includeValues=True)["items"]
    return [k for k in items if k["name"] == name]


def _plan_key_ids(stack_env) -> set[str]:
    plan = stack_env[0].usage_plan_id
    return {k["id"] for k in _apigw(stack_env).get_usage_plan_keys(usagePlanId=plan)["items"]}


def _authorize(stack_env, token: str) -> dict:
    """The deployed authorizer through the local stack's Lambda (its own environment)."""
    event = {
        "type": "TOKEN",
        "authorizationToken": f"Bearer {token}",
        "methodArn": "arn:aws:execute-api:us-east-1:123456789012:quaylocal/dev/GET/me",
    }
    answer, error = stack_invoke(stack_env[0])("AuthorizerFunction", event)
    assert error is None, error
    return answer


def _company_token(api: Api, company: str, person: str) -> str:
    return api.ok("POST", f"/companies/{company}/tokens", ADMIN_TOKEN, {"member": person})["token"]


def test_a_new_company_gets_its_own_key_in_the_usage_plan(stack_env, api: Api) -> None:
    api.ok("POST", "/companies", ADMIN_TOKEN, {"id": "keyco", "people": ["kim"]})
    (key,) = _keys_named(stack_env, R.company_api_key_name("dev", "keyco"))
    assert key["id"] in _plan_key_ids(stack_env)
    item = default_deps().room._item({"pk": "COMPANY#keyco", "sk": "META"})
    assert (item["api_key_id"], item["api_key_value"]) == (key["id"], key["value"])
    # never shown to callers
    shown = api.call("GET", "/companies/keyco", ADMIN_TOKEN)
    assert shown.status == 200 and key["value"] not in shown.text and "api_key" not in shown.text
    # a second create is a conflict and makes no second key
    assert api.call("POST", "/companies", ADMIN_TOKEN, {"id": "keyco", "people": ["kim"]}).status == 409
    assert len(_keys_named(stack_env, R.company_api_key_name("dev", "keyco"))) == 1


def test_the_authorizer_answers_the_company_key_and_the_shared_one_otherwise(stack_env, api: Api) -> None:
    api.ok("POST", "/companies", ADMIN_TOKEN, {"id": "authco", "people": ["al"]})
    (own,) = _keys_named(stack_env, R.company_api_key_name("dev", "authco"))
    shared = _apigw(stack_env).get_api_key(apiKey=stack_env[0].shared_api_key_id, includeValue=True)["value"]
    assert _authorize(stack_env, _company_token(api, "authco", "al"))["usageIdentifierKey"] == own["value"]
    assert _authorize(stack_env, ADMIN_TOKEN)["usageIdentifierKey"] == shared
    # a company created before companies had keys (no usage plan in its deps): the shared key
    legacy = Services(dataclasses.replace(default_deps(), api_keys=None)).companies
    legacy.create(OPERATOR, "oldco", ["olga"])
    assert _keys_named(stack_env, R.company_api_key_name("dev", "oldco")) == []
    assert _authorize(stack_env, _company_token(api, "oldco", "olga"))["usageIdentifierKey"] == shared


class Crash(Exception):
    pass


@pytest.mark.parametrize("crash_at", ["create_usage_plan_key", "create_company"])
def test_a_create_retried_after_a_crash_makes_the_key_once(stack_env, monkeypatch, crash_at: str) -> None:
    company = f"crash-{crash_at.replace('_', '-')}"
    deps = default_deps()
    keys = ApiKeys("dev", R.usage_plan_name("dev"), client=_apigw(stack_env))
    crashed: list[str] = []
    if crash_at == "create_company":
        target, attr = type(deps.room), "create_company"
    else:
        target, attr = keys.api, "create_usage_plan_key"
    original = getattr(target, attr)

    def once(*args: Any, **kwargs: Any) -> Any:
        if not crashed:
            crashed.append(attr)
            raise Crash(attr)
        return original(*args, **kwargs)

    monkeypatch.setattr(target, attr, once)
    companies = Services(dataclasses.replace(deps, api_keys=keys)).companies
    with pytest.raises(Crash):
        companies.create(OPERATOR, company, ["pat"])
    assert deps.room.get_company(company) is None
    companies.create(OPERATOR, company, ["pat"])  # the retry
    (key,) = _keys_named(stack_env, R.company_api_key_name("dev", company))
    assert key["id"] in _plan_key_ids(stack_env)
    assert deps.room.company_api_key(company) == key["value"]


def test_one_companys_burst_gets_429s_while_another_goes_through(stack_env) -> None:
    gw = Api(Gateway(direct_invoke(), company_rate_limit=(0.001, 3)))  # 3 at once, then 1 per 1000 s
    for company, person in (("burstco", "bea"), ("calmco", "cal")):
        Api(Gateway(direct_invoke())).ok("POST", "/companies", ADMIN_TOKEN, {"id": company, "people": [person]})
    plain = Api(Gateway(direct_invoke()))
    bea, cal = _company_token(plain, "burstco", "bea"), _company_token(plain, "calmco", "cal")
    statuses = [gw.call("GET", "/me", bea).status for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    throttled = gw.call("GET", "/me", bea)
    assert throttled.status == 429 and throttled.header("Retry-After") == "1"
    assert throttled.body == {"error": "throttled", "message": "Too Many Requests", "fields": []}
    # calmco, in the same second: its own bucket
    assert [gw.call("GET", "/me", cal).status for _ in range(3)] == [200, 200, 200]
    # the stage limiter's 429 is the same answer
    stage = Gateway(direct_invoke(), rate_limit=(0.001, 1))
    stage.handle("GET", "/me", {"Authorization": f"Bearer {cal}"})
    again = stage.handle("GET", "/me", {"Authorization": f"Bearer {cal}"})
    assert (again.status, again.headers.get("Retry-After"), json.loads(again.body)) == (
        429,
        "1",
        throttled.body,
    )


def test_an_authorizer_answer_without_a_key_is_403_when_keys_are_required(stack_env) -> None:
    def no_key(logical_id: str, event: dict) -> tuple[Any, Any]:
        if logical_id == "AuthorizerFunction":
            allow = {"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "*"}
            return {"principalId": "x", "policyDocument": {"Statement": [allow]}, "context": {}}, None
        raise AssertionError("the API function is never reached")

    result = Gateway(no_key, company_rate_limit=(10, 20)).handle("GET", "/me", {"Authorization": "Bearer qyt_x"})
    assert result.status == 403 and json.loads(result.body)["error"] == "forbidden"


def test_the_backfill_gives_each_keyless_company_its_key_once(stack_env, api: Api) -> None:
    from quaycli.backfill import backfill

    stack = stack_env[0]
    legacy = Services(dataclasses.replace(default_deps(), api_keys=None)).companies
    for company in ("old-a", "old-b"):
        legacy.create(OPERATOR, company, ["otto"])
    api.ok("POST", "/companies", ADMIN_TOKEN, {"id": "new-c", "people": ["nia"]})
    token = _company_token(api, "old-a", "otto")
    shared = _apigw(stack_env).get_api_key(apiKey=stack.shared_api_key_id, includeValue=True)["value"]
    assert _authorize(stack_env, token)["usageIdentifierKey"] == shared

    db, table = default_deps().room.db, default_deps().room.table
    done = backfill(db, _apigw(stack_env), table=table, stage="dev")
    assert {"old-a", "old-b"} <= set(done.given) and "new-c" in done.had
    for company in ("old-a", "old-b"):
        (key,) = _keys_named(stack_env, R.company_api_key_name("dev", company))
        assert key["id"] in _plan_key_ids(stack_env)
        assert default_deps().room.company_api_key(company) == key["value"]
    assert _authorize(stack_env, token)["usageIdentifierKey"] == default_deps().room.company_api_key("old-a")
    # again: nothing to give, no second key
    assert backfill(db, _apigw(stack_env), table=table, stage="dev").given == []
    assert len(_keys_named(stack_env, R.company_api_key_name("dev", "old-a"))) == 1


def test_quay_admin_backfill_api_keys_on_a_stack(stack_env) -> None:
    from typer.testing import CliRunner

    from quay.main import app as cli

    stack = stack_env[0]
    Services(dataclasses.replace(default_deps(), api_keys=None)).companies.create(OPERATOR, "old-cli", ["ola"])
    # the deployed stack's one output the command reads (a stand-in stack on moto's CloudFormation)
    template = {
        "Resources": {"Nothing": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"RoomTableName": {"Value": default_deps().room.table}},
    }
    stack.client("cloudformation").create_stack(StackName="Quayutec-dev", TemplateBody=json.dumps(template))
    result = CliRunner().invoke(cli, ["admin", "backfill-api-keys", "--stack", "Quayutec-dev"])
    assert result.exit_code == 0, result.output
    assert "old-cli" in json.loads(result.output)["given"]
    assert default_deps().room.company_api_key("old-cli")
    bad = CliRunner().invoke(cli, ["admin", "backfill-api-keys", "--stack", "prod"])
    assert bad.exit_code == 2 and "Quayutec-<stage>" in bad.output
