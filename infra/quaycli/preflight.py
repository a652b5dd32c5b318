"""`quay preflight`: what a `cdk deploy` of the synthesized stack would hit on this account
(docs/deploy.md "Before the first deploy").

Each check reads the account with boto3 and the synthesized template (``cdk.out``) and answers a
:class:`Finding`: ``blocker`` (the deploy or the first runs will fail), ``warning`` (it deploys
but changes or risks something account-wide), ``ok`` or ``skipped``. :func:`run_preflight` runs
them all; the CLI exits 1 when any finding is a blocker.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

Level = Literal["ok", "warning", "blocker", "skipped"]

#: The unreserved concurrency AWS keeps for functions without a reservation; an established
#: account's default quota is 1,000, a new account's often 10 (Lambda quotas documentation).
UNRESERVED_FLOOR = 100


@dataclass(frozen=True)
class Finding:
    """One check's answer: ``check`` (its name), ``level``, ``message``, and ``fix`` (what to do;
    empty when nothing is to be done)."""

    check: str
    level: Level
    message: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template.get("Resources", {}).items() if r.get("Type") == kind}


def concurrency_need(template: dict[str, Any]) -> int:
    """The account concurrency the stack needs: every reservation in the template plus
    :data:`UNRESERVED_FLOOR` (AWS refuses a reservation that leaves less unreserved, and a run's
    phases, the API, the authorizer, the stream and the reconciler share the unreserved pool),
    and at least one per function."""
    functions = _resources(template, "AWS::Lambda::Function")
    reserved = sum(int(f.get("Properties", {}).get("ReservedConcurrentExecutions", 0)) for f in functions.values())
    return reserved + max(UNRESERVED_FLOOR, len(functions))


def check_concurrency(lambda_client: Any, template: dict[str, Any]) -> Finding:
    """Lambda ``GetAccountSettings``' ``AccountLimit.ConcurrentExecutions`` against
    :func:`concurrency_need`."""
    need = concurrency_need(template)
    try:
        limit = lambda_client.get_account_settings()["AccountLimit"]
    except (ClientError, BotoCoreError) as exc:
        return Finding("lambda-concurrency", "warning", f"could not read Lambda account settings: {exc}")
    total, unreserved = limit["ConcurrentExecutions"], limit["UnreservedConcurrentExecutions"]
    if total < need:
        return Finding(
            "lambda-concurrency",
            "blocker",
            f"the account's Lambda concurrency quota is {total} (unreserved {unreserved}); the stack needs "
            f"{need}: runs would be throttled",
            "ask for more in Service Quotas: aws service-quotas request-service-quota-increase "
            f"--service-code lambda --quota-code L-B99A9384 --desired-value {max(need, 1000)}",
        )
    return Finding("lambda-concurrency", "ok", f"concurrency quota {total} (unreserved {unreserved}) >= {need}")


def required_bootstrap(template: dict[str, Any]) -> tuple[str, int] | None:
    """(the SSM parameter name, the least version) the template's ``CheckBootstrapVersion`` rule
    requires, or None when the template has no such rule."""
    param = template.get("Parameters", {}).get("BootstrapVersion", {}).get("Default")
    rule = template.get("Rules", {}).get("CheckBootstrapVersion")
    if not param or not rule:
        return None
    text = rule["Assertions"][0].get("AssertDescription", "")
    match = re.search(r"version (\d+) required", text)
    if match:
        return param, int(match.group(1))
    refused = rule["Assertions"][0]["Assert"]["Fn::Not"][0]["Fn::Contains"][0]
    return param, max(int(v) for v in refused) + 1


def check_bootstrap(ssm_client: Any, template: dict[str, Any]) -> Finding:
    """The SSM parameter ``/cdk-bootstrap/<qualifier>/version`` against the version the
    template requires."""
    required = required_bootstrap(template)
    if required is None:
        return Finding("cdk-bootstrap", "skipped", "the template checks no bootstrap version")
    name, least = required
    fix = "cdk bootstrap aws://<account>/<region> (with this repository's CDK CLI: npx cdk bootstrap)"
    try:
        version = int(ssm_client.get_parameter(Name=name)["Parameter"]["Value"])
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ParameterNotFound":
            return Finding("cdk-bootstrap", "blocker", f"the environment is not bootstrapped ({name} missing)", fix)
        return Finding("cdk-bootstrap", "warning", f"could not read {name}: {exc}")
    if version < least:
        return Finding(
            "cdk-bootstrap", "blocker", f"bootstrap version {version}, the template requires {least}", "re-run " + fix
        )
    return Finding("cdk-bootstrap", "ok", f"bootstrap version {version} >= {least}")


def check_apigateway_account(apigw_client: Any, template: dict[str, Any]) -> Finding:
    """API Gateway's account-wide CloudWatch role: the stack's ``AWS::ApiGateway::Account``
    replaces an existing one (every REST API of the region logs through the new role)."""
    if not _resources(template, "AWS::ApiGateway::Account"):
        return Finding("apigateway-account", "skipped", "the stack sets no API Gateway account role")
    try:
        current = apigw_client.get_account().get("cloudwatchRoleArn")
    except (ClientError, BotoCoreError) as exc:
        return Finding("apigateway-account", "warning", f"could not read the API Gateway account: {exc}")
    if current:
        return Finding(
            "apigateway-account",
            "warning",
            f"the region's API Gateway CloudWatch role is already {current}; the stack replaces it "
            "(an account-wide singleton: other APIs' logging then depends on this stack's role)",
            "check that no other stack manages it, or deploy to a region/account of its own",
        )
    return Finding("apigateway-account", "ok", "no API Gateway CloudWatch role yet: the stack sets one")


def check_bedrock(bedrock_client: Any, model_ids: list[str]) -> list[Finding]:
    """Bedrock ``GetFoundationModelAvailability`` for each configured model id (none: skipped)."""
    if not model_ids:
        return [Finding("bedrock-access", "skipped", "no Bedrock model configured (--bedrock-model)")]
    findings = []
    for model in model_ids:
        try:
            got = bedrock_client.get_foundation_model_availability(modelId=model)
        except (ClientError, BotoCoreError) as exc:
            findings.append(Finding("bedrock-access", "blocker", f"{model}: {exc}", "check the model id and region"))
            continue
        if got.get("regionAvailability") != "AVAILABLE":
            findings.append(
                Finding("bedrock-access", "blocker", f"{model} is not offered in this region", "use another region")
            )
        elif got.get("authorizationStatus") != "AUTHORIZED" or got.get("entitlementAvailability") != "AVAILABLE":
            findings.append(
                Finding(
                    "bedrock-access",
                    "blocker",
                    f"{model}: no model access (authorization {got.get('authorizationStatus')}, "
                    f"entitlement {got.get('entitlementAvailability')})",
                    "request model access in the Bedrock console (Model access)",
                )
            )
        else:
            findings.append(Finding("bedrock-access", "ok", f"{model} is available"))
    return findings


def run_preflight(session: Any, template: dict[str, Any], bedrock_models: list[str] | None = None) -> list[Finding]:
    """Every check, with clients from ``session`` (a ``boto3.Session``)."""
    findings = [
        check_concurrency(session.client("lambda"), template),
        check_bootstrap(session.client("ssm"), template),
        check_apigateway_account(session.client("apigateway"), template),
    ]
    models = bedrock_models or []
    findings += check_bedrock(session.client("bedrock") if models else None, models)
    return findings


def has_blocker(findings: list[Finding]) -> bool:
    return any(f.level == "blocker" for f in findings)
