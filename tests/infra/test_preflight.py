"""`quay preflight` (infra/quaycli/preflight.py; docs/deploy.md "Before the first deploy"): SSM
and API Gateway on moto; Lambda ``GetAccountSettings`` and Bedrock's model availability, which
moto does not implement, through botocore's Stubber."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from typer.testing import CliRunner

from quay.main import app
from quaycli import preflight

REGION = "us-east-1"


def _settings(total: int, unreserved: int | None = None) -> dict[str, Any]:
    return {
        "AccountLimit": {
            "TotalCodeSize": 80530636800,
            "CodeSizeUnzipped": 262144000,
            "CodeSizeZipped": 52428800,
            "ConcurrentExecutions": total,
            "UnreservedConcurrentExecutions": total if unreserved is None else unreserved,
        },
        "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": 0},
    }


class _StubbedSession(boto3.Session):
    """A boto3 session (on moto) whose Lambda and Bedrock clients answer from Stubbers."""

    def __init__(self, total: int, bedrock: dict[str, Any] | None = None) -> None:
        super().__init__(region_name=REGION)
        self.total, self.bedrock, self.stubbers = total, bedrock, []

    def client(self, name: str, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        client = super().client(name, *args, **kwargs)
        if name == "lambda":
            stub = Stubber(client)
            stub.add_response("get_account_settings", _settings(self.total), {})
        elif name == "bedrock":
            stub = Stubber(client)
            for model, answer in (self.bedrock or {}).items():
                stub.add_response("get_foundation_model_availability", answer, {"modelId": model})
        else:
            return client
        stub.activate()
        self.stubbers.append(stub)
        return client


@pytest.fixture
def aws(monkeypatch):
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        yield


@pytest.fixture
def template(stack_files) -> dict:
    return json.loads(stack_files[1].read_text())


def _bootstrap(template: dict, version: int) -> None:
    name, _ = preflight.required_bootstrap(template)  # type: ignore[misc]
    boto3.client("ssm", region_name=REGION).put_parameter(Name=name, Value=str(version), Type="String")


def _by_check(findings):
    return {f.check: f for f in findings}


def test_the_synthesized_template_states_its_needs(template):
    name, least = preflight.required_bootstrap(template)  # type: ignore[misc]
    assert name.startswith("/cdk-bootstrap/") and name.endswith("/version")
    assert least >= 6
    assert preflight.concurrency_need(template) >= preflight.UNRESERVED_FLOOR


def test_a_new_accounts_quota_of_10_is_a_blocker_with_the_fix(aws, template):
    _bootstrap(template, 99)
    got = _by_check(preflight.run_preflight(_StubbedSession(total=10), template))
    quota = got["lambda-concurrency"]
    assert quota.level == "blocker"
    assert "10" in quota.message and "Service Quotas" in quota.fix and "L-B99A9384" in quota.fix
    assert got["cdk-bootstrap"].level == "ok"
    assert got["bedrock-access"].level == "skipped"
    assert preflight.has_blocker(list(got.values()))


def test_an_established_account_passes(aws, template):
    _bootstrap(template, 99)
    findings = preflight.run_preflight(_StubbedSession(total=1000), template)
    assert not preflight.has_blocker(findings), findings
    assert _by_check(findings)["lambda-concurrency"].level == "ok"
    assert _by_check(findings)["apigateway-account"].level == "ok"


def test_an_old_or_missing_bootstrap_is_a_blocker(aws, template):
    ssm = boto3.client("ssm", region_name=REGION)
    assert preflight.check_bootstrap(ssm, template).level == "blocker"  # not bootstrapped
    _bootstrap(template, 5)
    old = preflight.check_bootstrap(ssm, template)
    assert old.level == "blocker" and "cdk bootstrap" in old.fix


def test_an_existing_api_gateway_role_is_a_warning(aws, template):
    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName="someone-elses", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    apigw = boto3.client("apigateway", region_name=REGION)
    apigw.update_account(patchOperations=[{"op": "replace", "path": "/cloudwatchRoleArn", "value": role}])
    got = preflight.check_apigateway_account(apigw, template)
    assert got.level == "warning" and role in got.message


def test_bedrock_model_access(aws, template):
    granted = {"modelId": "m1", "agreementAvailability": {"status": "AVAILABLE"}, "authorizationStatus": "AUTHORIZED"}
    granted |= {"entitlementAvailability": "AVAILABLE", "regionAvailability": "AVAILABLE"}
    refused = granted | {"modelId": "m2", "authorizationStatus": "NOT_AUTHORIZED"}
    session = _StubbedSession(total=1000, bedrock={"m1": granted, "m2": refused})
    got = [f for f in preflight.run_preflight(session, template, ["m1", "m2"]) if f.check == "bedrock-access"]
    assert [f.level for f in got] == ["ok", "blocker"]
    assert "model access" in got[1].fix


def test_quay_preflight_exits_1_on_the_quota_blocker(aws, assembly, template, monkeypatch):
    _bootstrap(template, 99)
    monkeypatch.setattr(boto3, "Session", lambda region_name=None: _StubbedSession(total=10))
    result = CliRunner().invoke(app, ["preflight", "--assembly", str(assembly), "--json"])
    assert result.exit_code == 1, result.output
    body = json.loads(result.output)
    assert body["ok"] is False
    quota = next(f for f in body["findings"] if f["check"] == "lambda-concurrency")
    assert quota["level"] == "blocker" and "Service Quotas" in quota["fix"]
