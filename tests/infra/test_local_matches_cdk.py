"""The local stack (``quaylocal.stack.LocalStack``, built from ``quayutec.resources`` on moto)
matches the CDK stack (the synthesized template, built from the same definitions): tables (key
schemas, attributes, indexes, stream, TTL, billing), queues (redrive), functions (handler strings,
runtime, timeout, memory, environment variable names and values), the state machine definition
after substitution.

Resources are paired the way the handlers find them: through the environment variable that names
them (template: ``{"Ref": <logical id>}``; local: the name LocalStack created).
"""

from __future__ import annotations

import json
import os
import re

import pytest

from quayutec import resources as R

# Local-only variables of the local functions: moto credentials/endpoint settings, Powertools
# tracing/metrics off, and the provider endpoint overrides (the local provider server).
LOCAL_ONLY_PREFIXES = ("AWS_", "MOTO_")
LOCAL_ONLY = {
    "POWERTOOLS_TRACE_DISABLED",
    "POWERTOOLS_METRICS_DISABLED",
    "POWERTOOLS_LOG_LEVEL",
    *R.ENDPOINT_OVERRIDE_ENVS,
}


@pytest.fixture(scope="module")
def local():
    pytest.importorskip("moto")
    from quaylocal.stack import LocalStack

    with LocalStack() as stack:
        lam = stack.client("lambda")
        confs = {
            f.logical_id: lam.get_function_configuration(FunctionName=arn)
            for f in R.FUNCTIONS
            for arn in [stack.function_arns[f.logical_id]]
        }
        yield {
            "stack": stack,
            "functions": confs,
            # every variable any local function has (each has its own subset)
            "env": {k: v for c in confs.values() for k, v in c["Environment"]["Variables"].items()},
            "process_env": dict(os.environ),
        }


@pytest.fixture(scope="module")
def template_env(resources) -> dict:
    """Every variable any template function has (each function gets the ones it reads)."""
    merged: dict = {}
    for f in R.FUNCTIONS:
        merged.update(resources[f.logical_id]["Properties"]["Environment"]["Variables"])
    return merged


def of_type(resources: dict, rtype: str) -> dict:
    return {k: v["Properties"] for k, v in resources.items() if v["Type"] == rtype}


def env_var_naming(template_env: dict, logical_id: str) -> str:
    names = [k for k, v in template_env.items() if v == {"Ref": logical_id}]
    assert len(names) == 1, f"{logical_id}: named by {names}"
    return names[0]


# ------------------------------------------------------------------ tables
def table_shape_from_template(props: dict) -> dict:
    indexes = {}
    for kind, key in (("local", "LocalSecondaryIndexes"), ("global", "GlobalSecondaryIndexes")):
        for i in props.get(key, []):
            indexes[i["IndexName"]] = (kind, _keys(i["KeySchema"]), i["Projection"]["ProjectionType"])
    ttl = props.get("TimeToLiveSpecification")
    return {
        "keys": _keys(props["KeySchema"]),
        "attributes": {a["AttributeName"]: a["AttributeType"] for a in props["AttributeDefinitions"]},
        "indexes": indexes,
        "stream": (props.get("StreamSpecification") or {}).get("StreamViewType"),
        "ttl": ttl["AttributeName"] if ttl and ttl.get("Enabled") else None,
        "billing": props.get("BillingMode", "PROVISIONED"),
    }


def table_shape_from_moto(ddb, name: str) -> dict:
    t = ddb.describe_table(TableName=name)["Table"]
    indexes = {}
    for kind, key in (("local", "LocalSecondaryIndexes"), ("global", "GlobalSecondaryIndexes")):
        for i in t.get(key, []):
            indexes[i["IndexName"]] = (kind, _keys(i["KeySchema"]), i["Projection"]["ProjectionType"])
    stream = t.get("StreamSpecification") or {}
    ttl = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    return {
        "keys": _keys(t["KeySchema"]),
        "attributes": {a["AttributeName"]: a["AttributeType"] for a in t["AttributeDefinitions"]},
        "indexes": indexes,
        "stream": stream.get("StreamViewType") if stream.get("StreamEnabled") else None,
        "ttl": ttl.get("AttributeName") if ttl.get("TimeToLiveStatus") == "ENABLED" else None,
        "billing": (t.get("BillingModeSummary") or {}).get("BillingMode", "PROVISIONED"),
    }


def _keys(schema: list[dict]) -> tuple:
    return tuple(sorted((k["KeyType"], k["AttributeName"]) for k in schema))


def test_same_tables_same_shapes(local, resources, template_env):
    tables = of_type(resources, "AWS::DynamoDB::Table")
    assert set(tables) == {t.logical_id for t in R.TABLES}
    ddb = local["stack"].client("dynamodb")
    for logical_id, props in tables.items():
        var = env_var_naming(template_env, logical_id)
        local_name = local["env"][var]
        assert table_shape_from_moto(ddb, local_name) == table_shape_from_template(props), logical_id
    assert (
        local["stack"].stream_arn
        == ddb.describe_table(TableName=local["env"][R.ROOM_TABLE.env_var])["Table"]["LatestStreamArn"]
    )


def test_same_buckets(local, resources, template_env):
    buckets = of_type(resources, "AWS::S3::Bucket")
    assert set(buckets) == {b.logical_id for b in R.BUCKETS}
    s3 = local["stack"].client("s3")
    for logical_id in buckets:
        s3.head_bucket(Bucket=local["env"][env_var_naming(template_env, logical_id)])


# ------------------------------------------------------------------ queues
def test_same_queues_same_redrive(local, resources, template_env):
    queues = of_type(resources, "AWS::SQS::Queue")
    stack = local["stack"]
    assert set(queues) == {q.logical_id for q in R.QUEUES} == set(stack.queue_urls)
    sqs = stack.client("sqs")
    attrs = {
        q: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        for q, url in stack.queue_urls.items()
    }
    logical_of_arn = {a["QueueArn"]: q for q, a in attrs.items()}
    for logical_id, props in queues.items():
        want = props.get("RedrivePolicy")
        got = json.loads(attrs[logical_id]["RedrivePolicy"]) if "RedrivePolicy" in attrs[logical_id] else None
        if want is None:
            assert got is None, logical_id
            continue
        assert logical_of_arn[got["deadLetterTargetArn"]] == want["deadLetterTargetArn"]["Fn::GetAtt"][0]
        assert int(got["maxReceiveCount"]) == want["maxReceiveCount"]
        # The one deliberate difference: a short visibility timeout locally, so a failed wake is
        # retried within a play (LocalStack(visibility_timeout_s=...)); both from their source.
        qdef = next(q for q in R.QUEUES if q.logical_id == logical_id)
        assert props["VisibilityTimeout"] == qdef.visibility_timeout_s
        assert int(attrs[logical_id]["VisibilityTimeout"]) == stack.visibility_timeout_s
    for logical_id in queues:
        if any(v == {"Ref": logical_id} for v in template_env.values()):
            assert local["env"][env_var_naming(template_env, logical_id)] == stack.queue_urls[logical_id]


# ------------------------------------------------------------------ functions
def test_same_functions(local, resources):
    assert set(of_type(resources, "AWS::Lambda::Function")) == set(R.FUNCTIONS_BY_ID) == set(local["functions"])


@pytest.mark.parametrize("fdef", R.FUNCTIONS, ids=lambda f: f.logical_id)
def test_function_matches(local, resources, fdef):
    want = resources[fdef.logical_id]["Properties"]
    got = local["functions"][fdef.logical_id]
    assert got["Handler"] == want["Handler"] == fdef.handler
    assert got["Runtime"] == want["Runtime"]
    assert got["Timeout"] == want["Timeout"]
    assert got["MemorySize"] == want["MemorySize"]

    want_env = want["Environment"]["Variables"]
    got_env = got["Environment"]["Variables"]
    local_only = {k for k in got_env if k in LOCAL_ONLY or k.startswith(LOCAL_ONLY_PREFIXES)}
    # (locally, optional variables may be set too, e.g. FILES_ENDPOINT_URL)
    assert set(want_env) == set(got_env) - local_only - (R.OPTIONAL_ENVS - set(R.API_KEY_ENVS))
    assert set(want_env) == set(R.environment_of(fdef)) - (R.OPTIONAL_ENVS - set(R.API_KEY_ENVS))
    # Values: the same settings; resources by the same logical id.
    stack = local["stack"]
    local_physical = {
        **{t.logical_id: t.default_name for t in R.TABLES},
        **{b.logical_id: b.default_name for b in R.BUCKETS},
        **stack.queue_urls,
        R.SHARED_API_KEY_LOGICAL_ID: stack.shared_api_key_id,
    }
    for name, value in want_env.items():
        if name == R.STATE_MACHINE_ENV:
            continue
        if isinstance(value, dict):
            assert got_env[name] == local_physical[value["Ref"]], name
        else:
            assert got_env[name] == value, name
    # STATE_MACHINE_ARN: on the run starters only, deployed and local.
    assert (R.STATE_MACHINE_ENV in want_env) == ("states:start" in fdef.touches)
    if R.STATE_MACHINE_ENV in want_env:
        assert want_env[R.STATE_MACHINE_ENV] == {"Ref": "AgentRunStateMachine"}
        assert got_env[R.STATE_MACHINE_ENV] == stack.state_machine_arn
    assert local["process_env"][R.STATE_MACHINE_ENV] == stack.state_machine_arn


# ------------------------------------------------------------------ state machine
def test_same_state_machine_after_substitution(local, resources):
    machines = of_type(resources, "AWS::StepFunctions::StateMachine")
    assert list(machines) == ["AgentRunStateMachine"]
    props = machines["AgentRunStateMachine"]
    template_def = props["DefinitionString"]
    for placeholder, value in props["DefinitionSubstitutions"].items():
        if value == {"Ref": "AWS::Partition"}:  # the local stack's partition
            template_def = template_def.replace("${" + placeholder + "}", "aws")
            continue
        logical_id, attr = value["Fn::GetAtt"]
        assert attr == "Arn"
        template_def = template_def.replace("${" + placeholder + "}", f"<{logical_id}>")

    stack = local["stack"]
    desc = stack.client("stepfunctions").describe_state_machine(stateMachineArn=stack.state_machine_arn)
    local_def = desc["definition"]
    for logical_id, arn in stack.function_arns.items():
        local_def = local_def.replace(arn, f"<{logical_id}>")

    assert not re.findall(r"\$\{[A-Za-z0-9_]+\}", local_def)
    assert json.loads(local_def) == json.loads(template_def)
    assert desc["type"] == props.get("StateMachineType", "STANDARD")
    assert stack.definition_substitutions().keys() == props["DefinitionSubstitutions"].keys()
