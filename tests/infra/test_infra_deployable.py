"""What moto does not check (design §11), checked on the synthesized dev template: the failure
paths may write the room table, API Gateway logging has its account role, gateway answers
have the API's error shape, every alarm publishes to a topic CloudWatch may publish to and
whose key it may use, a dashboard of the metrics the code emits, run data expires, no partition
is written literally and ``aws`` is the only one targeted, and log groups can be re-created
after `cdk destroy`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from infra_helpers import as_list, flat, of_type, referenced_ids, role_of_function, statements_of_role

from quayutec import resources as R

REPO_ROOT = Path(__file__).resolve().parents[2]
ASL_PATH = REPO_ROOT / "statemachines" / R.STATE_MACHINE_FILE


def _writes(resources, function_id: str) -> set[str]:
    stmts = statements_of_role(resources, role_of_function(resources, function_id))
    return {
        ref
        for s in stmts
        if "dynamodb:UpdateItem" in as_list(s["Action"])
        for r in as_list(s["Resource"])
        for ref in _refs(r)
    }


def _refs(value) -> set[str]:
    if isinstance(value, dict):
        if "Fn::GetAtt" in value:
            return {value["Fn::GetAtt"][0]}
        if "Ref" in value:
            return {value["Ref"]}
        return {x for v in value.values() for x in _refs(v)}
    if isinstance(value, list):
        return {x for v in value for x in _refs(v)}
    return set()


# --------------------------------------------------------------------------- failure paths
@pytest.mark.parametrize("function_id", ["RecordFailureFunction", "ReconcilerFunction"])
def test_failure_paths_may_update_the_room_table(resources, function_id):
    """close_failed_run expires a pending approval (RoomStore.set_approval_status: UpdateItem on
    the room table) before the ledger's final status."""
    assert {"RoomTable", "LedgerTable"} <= _writes(resources, function_id)


# --------------------------------------------------------------------------- API Gateway
def test_api_gateway_account_has_a_cloudwatch_role(resources):
    (account,) = of_type(resources, "AWS::ApiGateway::Account").values()
    role_id = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
    role = resources[role_id]
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
        "Service": "apigateway.amazonaws.com"
    }
    (managed,) = role["Properties"]["ManagedPolicyArns"]
    assert json.dumps(managed).endswith('service-role/AmazonAPIGatewayPushToCloudWatchLogs"]]}')
    # Retained: destroying one stage never takes the account's logging role from another.
    assert role["DeletionPolicy"] == "Retain"
    # The stage (with access logging) is created after the account setting.
    (stage,) = of_type(resources, "AWS::ApiGateway::Stage").values()
    assert stage["Properties"]["AccessLogSetting"]["DestinationArn"]
    deployment = resources[stage["Properties"]["DeploymentId"]["Ref"]]
    assert any(
        k in as_list(stage.get("DependsOn", [])) + as_list(deployment.get("DependsOn", []))
        for k in of_type(resources, "AWS::ApiGateway::Account")
    )


def test_apig6_reason_names_no_missing_role(assembly):
    report = json.loads((assembly / "validation-report.json").read_text())
    (nag,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    (apig6,) = [v for v in nag["suppressedViolations"] if v["acknowledgedId"].endswith("APIG6")]
    assert "must not own" not in apig6["reason"] and "access log" in apig6["reason"]


@pytest.mark.parametrize(
    "response_type,status,code",
    [
        ("DEFAULT_4XX", "400", "bad_request"),
        ("DEFAULT_5XX", "500", "internal_error"),
        ("UNAUTHORIZED", "401", "unauthenticated"),
        ("ACCESS_DENIED", "403", "forbidden"),
        ("REQUEST_TOO_LARGE", "413", "payload_too_large"),
        ("THROTTLED", "429", "throttled"),
        ("MISSING_AUTHENTICATION_TOKEN", "404", "not_found"),
        ("INTEGRATION_TIMEOUT", "504", "gateway_timeout"),
        ("INTEGRATION_FAILURE", "502", "bad_gateway"),
        ("UNSUPPORTED_MEDIA_TYPE", "415", "unsupported_media_type"),
    ],
)
def test_gateway_responses_have_the_api_error_shape(resources, response_type, status, code):
    found = [
        g["Properties"]
        for g in of_type(resources, "AWS::ApiGateway::GatewayResponse").values()
        if g["Properties"]["ResponseType"] == response_type
    ]
    assert len(found) == 1, response_type
    props = found[0]
    assert props["StatusCode"] == status
    template = props["ResponseTemplates"]["application/json"]
    # API Gateway puts a quoted JSON string in place of $context.error.messageString.
    body = json.loads(template.replace("$context.error.messageString", '"Unauthorized"'))
    assert body == {"error": code, "message": "Unauthorized", "fields": []}
    assert props["ResponseParameters"]["gatewayresponse.header.Content-Type"] == "'application/json'"


def test_every_gateway_response_is_a_row_of_the_api_error_table(resources):
    """The gateway's codes and statuses are those of the API's one error table
    (quayutec.api.errors.ERRORS, which docs/api.md shows)."""
    from quayutec.api.errors import ERRORS

    for g in of_type(resources, "AWS::ApiGateway::GatewayResponse").values():
        template = g["Properties"]["ResponseTemplates"]["application/json"]
        body = json.loads(template.replace("$context.error.messageString", '"m"'))
        assert body["error"] in ERRORS and body["fields"] == [], body
        assert int(g["Properties"]["StatusCode"]) == ERRORS[body["error"]].status, body


# --------------------------------------------------------------------------- alarms, dashboard
def test_every_alarm_publishes_to_the_alarm_topic(resources):
    (topic_id,) = of_type(resources, "AWS::SNS::Topic")
    alarms = of_type(resources, "AWS::CloudWatch::Alarm")
    assert alarms
    for aid, alarm in alarms.items():
        assert alarm["Properties"].get("AlarmActions") == [{"Ref": topic_id}], aid


def test_alarm_topic_key_lets_cloudwatch_publish(resources):
    (topic,) = of_type(resources, "AWS::SNS::Topic").values()
    key_id = topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key = resources[key_id]["Properties"]
    assert key["EnableKeyRotation"] is True
    allowed = [
        s for s in key["KeyPolicy"]["Statement"] if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert allowed and {"kms:Decrypt", "kms:GenerateDataKey*"} <= {a for s in allowed for a in as_list(s["Action"])}


def test_cloudwatch_may_publish_to_the_alarm_topic_and_use_its_key(resources):
    """enforce_ssl gives the topic a policy of its own (SNS's default one goes): it must let
    CloudWatch publish, for this account's alarms only (aws:SourceAccount, ArnLike aws:SourceArn:
    the SNS developer guide's CloudWatch alarm example), or no alarm reaches anyone; and a key
    encrypting the topic must let CloudWatch use it (the SNS guide, "encrypted topics")."""
    (topic_id,) = of_type(resources, "AWS::SNS::Topic")
    (policy,) = [
        p["Properties"]
        for p in of_type(resources, "AWS::SNS::TopicPolicy").values()
        if {"Ref": topic_id} in p["Properties"]["Topics"]
    ]
    statements = as_list(policy["PolicyDocument"]["Statement"])
    allows = [s for s in statements if s["Effect"] == "Allow"]
    assert len(allows) == 1
    (allow,) = allows
    assert allow["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert as_list(allow["Action"]) == ["sns:Publish"]
    assert as_list(allow["Resource"]) == [{"Ref": topic_id}]
    assert set(allow["Condition"]) == {"StringEquals", "ArnLike"}
    assert allow["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    (source_arn,) = allow["Condition"]["ArnLike"].values()
    assert set(allow["Condition"]["ArnLike"]) == {"aws:SourceArn"}
    assert flat(source_arn) == "arn:<AWS::Partition>:cloudwatch:<AWS::Region>:<AWS::AccountId>:alarm:*"
    # the SSL-only Deny stays
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
    )
    key = resources[topic_id]["Properties"].get("KmsMasterKeyId")
    if key is None:  # SNS-managed or no encryption: no key policy to check
        return
    (key_id,) = referenced_ids(key)
    assert resources[key_id]["Type"] == "AWS::KMS::Key"
    key_statements = as_list(resources[key_id]["Properties"]["KeyPolicy"]["Statement"])
    cloudwatch = [
        s
        for s in key_statements
        if s["Effect"] == "Allow" and s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert len(cloudwatch) == 1
    assert set(as_list(cloudwatch[0]["Action"])) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    assert cloudwatch[0]["Resource"] == "*"  # in a key policy, "*" is this key


def test_alarm_email_subscription_from_context(tmp_path):
    from aws_cdk import App

    from quayinfra.stack import build_app

    app, stack = build_app(App(outdir=str(tmp_path), context={"alarmEmail": "ops@example.com"}), nag=False)
    template = app.synth().get_stack_by_name(stack.stack_name).template
    subs = of_type(template["Resources"], "AWS::SNS::Subscription")
    assert [s["Properties"]["Protocol"] for s in subs.values()] == ["email"]
    assert [s["Properties"]["Endpoint"] for s in subs.values()] == ["ops@example.com"]


def test_no_subscription_without_alarm_email(resources):
    assert not of_type(resources, "AWS::SNS::Subscription")


def _dashboard_text(resources) -> str:
    (dashboard,) = of_type(resources, "AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    return "".join(p if isinstance(p, str) else "<ref>" for p in parts)


def _emitted_metric_names() -> set[str]:
    """Names passed to Powertools' metrics.add_metric in the runtime (f-strings as patterns)."""
    names: set[str] = set()
    for path in (REPO_ROOT / "functions" / "quayutec").rglob("*.py"):
        for m in re.finditer(r'add_metric\(name=(f?)"([^"]+)"', path.read_text()):
            names.add(m.group(2))
    return names


def test_dashboard_shows_what_the_runtime_emits(resources):
    from quayinfra.observability import APPROVAL_CLOSED, APPROVAL_REQUESTED, MODEL_REQUEST_OUTCOMES, RUN_STATUS_METRICS
    from quayutec.models import FINAL_STATUSES

    text = _dashboard_text(resources)
    for title in (
        "Runs by final status",
        "Model requests by outcome",
        "Pending approvals",
        "Wake DLQ",
        "Phase errors",
        "Phase durations",
    ):
        assert title in text, title
    emitted = _emitted_metric_names()
    assert set(RUN_STATUS_METRICS) == set(FINAL_STATUSES)
    patterns = [re.compile("^" + re.sub(r"\\\{[^}]*\\\}", ".+", re.escape(n)) + "$") for n in emitted]
    shown = [
        *RUN_STATUS_METRICS.values(),
        *(f"ModelRequest_{o}" for o in MODEL_REQUEST_OUTCOMES),
        APPROVAL_REQUESTED,
        APPROVAL_CLOSED,
    ]
    for name in shown:
        assert f'"Quayutec","{name}","service","quayutec"' in text, name
        assert any(p.match(name) for p in patterns), f"{name}: no add_metric emits it"
    assert R.WAKE_DLQ.logical_id in text or "WakeDeadLetterQueue" in text
    for fdef in R.FUNCTIONS:
        if fdef.asl_placeholder:
            assert '"AWS/Lambda","Errors","FunctionName","<ref>"' in text
            assert '"AWS/Lambda","Duration"' in text


# --------------------------------------------------------------------------- run data, partitions, logs
def test_run_data_expires(resources):
    rules = resources[R.RUN_DATA_BUCKET.logical_id]["Properties"]["LifecycleConfiguration"]["Rules"]
    expiring = [r for r in rules if "ExpirationInDays" in r]
    assert expiring == [
        {"Id": "expire-run-data", "Prefix": R.RUN_DATA_PREFIX, "ExpirationInDays": 30, "Status": "Enabled"}
    ]


def test_run_data_expiry_from_context(tmp_path):
    from aws_cdk import App

    from quayinfra.stack import build_app

    app, stack = build_app(App(outdir=str(tmp_path), context={"runDataExpiryDays": 7}), nag=False)
    rules = (
        app.synth()
        .get_stack_by_name(stack.stack_name)
        .template["Resources"][R.RUN_DATA_BUCKET.logical_id]["Properties"]["LifecycleConfiguration"]["Rules"]
    )
    assert [r["ExpirationInDays"] for r in rules if "ExpirationInDays" in r] == [7]


def test_no_partition_literal_in_the_asl_or_the_template(template):
    assert "arn:aws:" not in ASL_PATH.read_text()
    assert "arn:aws:" not in json.dumps(template)
    for path in (REPO_ROOT / "infra" / "quayinfra").rglob("*.py"):
        assert "arn:aws:" not in path.read_text(), path.name


@pytest.mark.unit
def test_the_only_target_partition_is_aws():
    """Only the ``aws`` partition is supported (docs/deploy.md): presigned URLs and the room
    page's CSP name ``s3.<region>.amazonaws.com`` hosts, which aws-cn (``amazonaws.com.cn``) does
    not serve. cdk.json must not tell the CDK otherwise (``cdk init`` lists aws-cn by default)."""
    context = json.loads((REPO_ROOT / "cdk.json").read_text())["context"]
    assert context["@aws-cdk/core:target-partitions"] == ["aws"]


def test_log_groups_can_be_recreated_after_destroy(resources):
    """Dev: every log group goes with the stack. A fixed name would collide with a retained
    (prod) group after `cdk destroy`: a name must carry a piece of the stack id."""
    for lid, group in of_type(resources, "AWS::Logs::LogGroup").items():
        assert group["DeletionPolicy"] == "Delete", lid
        name = group["Properties"].get("LogGroupName")
        if name is not None:
            assert "AWS::StackId" in json.dumps(name), lid


def test_prod_retains_data_and_logs(tmp_path):
    from aws_cdk import App

    from quayinfra.stack import build_app

    app, stack = build_app(App(outdir=str(tmp_path), context={"stage": "prod"}), nag=False)
    prod = app.synth().get_stack_by_name(stack.stack_name).template["Resources"]
    groups = of_type(prod, "AWS::Logs::LogGroup")
    assert groups and all(g["DeletionPolicy"] == "Retain" for g in groups.values())
    for tdef in R.TABLES:
        assert prod[tdef.logical_id]["DeletionPolicy"] == "Retain"
    env = prod["CallModelFunction"]["Properties"]["Environment"]["Variables"]
    assert env[R.STAGE_ENV] == "prod"  # secret names carry the stage
