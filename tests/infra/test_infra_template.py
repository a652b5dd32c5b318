"""The synthesized template, built from quayutec.resources: tables, queues, mappings, state
machine, reconciler rule, alarms, functions, and least-privilege roles."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from infra_helpers import as_list, asset_source, flat, of_type, referenced_ids, role_of_function, statements_of_role

from quayinfra.alarms import ALARMS, ALARMS_BY_NAME, DEAD_LETTER_QUEUES, INFORMATION_METRICS, AlarmDef
from quayutec import resources as R

REPO_ROOT = Path(__file__).resolve().parents[2]
ASL_PATH = REPO_ROOT / "statemachines" / R.STATE_MACHINE_FILE
SM_ID = "AgentRunStateMachine"


# --------------------------------------------------------------------------- storage
@pytest.mark.parametrize("tdef", R.TABLES, ids=lambda t: t.logical_id)
def test_table_matches_definition(resources, tdef: R.TableDef):
    props = resources[tdef.logical_id]["Properties"]
    keys = {k["KeyType"]: k["AttributeName"] for k in props["KeySchema"]}
    assert keys["HASH"] == tdef.partition_key.name
    assert keys.get("RANGE") == (tdef.sort_key.name if tdef.sort_key else None)
    types = {a["AttributeName"]: a["AttributeType"] for a in props["AttributeDefinitions"]}
    for key in [tdef.partition_key, tdef.sort_key, *(k for i in tdef.indexes for k in (i.partition_key, i.sort_key))]:
        if key:
            assert types[key.name] == key.type
    expected = {i.name: i for i in tdef.indexes}
    got = {i["IndexName"]: i for i in props.get("GlobalSecondaryIndexes", [])}
    assert set(got) == set(expected)
    for name, idef in expected.items():
        schema = {k["KeyType"]: k["AttributeName"] for k in got[name]["KeySchema"]}
        assert schema == {"HASH": idef.partition_key.name, "RANGE": idef.sort_key.name}
    if tdef.stream:
        assert props["StreamSpecification"] == {"StreamViewType": tdef.stream}
    else:
        assert "StreamSpecification" not in props
    if tdef.ttl_attribute:
        assert props["TimeToLiveSpecification"] == {"AttributeName": tdef.ttl_attribute, "Enabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["SSESpecification"]["SSEEnabled"] is True
    # stage "dev": destroyed with the stack
    assert resources[tdef.logical_id]["DeletionPolicy"] == "Delete"


def test_no_table_has_a_local_secondary_index(resources):
    """design §14: an LSI caps each item collection (a room's partition) at 10 GB, keeps it on one
    partition and can never be removed; every index is global."""
    tables = {lid: r for lid, r in resources.items() if r["Type"] == "AWS::DynamoDB::Table"}
    assert set(tables) >= {t.logical_id for t in R.TABLES}
    with_lsi = {
        lid: r["Properties"]["LocalSecondaryIndexes"]
        for lid, r in tables.items()
        if "LocalSecondaryIndexes" in r["Properties"]
    }
    assert with_lsi == {}


def test_room_table_is_the_outbox(resources):
    """The smallest view the relay needs (an insert's new image) and a filter that lets
    only inserts carrying wakes invoke it, the same pattern the local pump applies."""
    import json

    from quaylocal.stream_filter import StreamFilter

    assert R.ROOM_TABLE.stream == "NEW_IMAGE"
    assert resources["RoomTable"]["Properties"]["StreamSpecification"]["StreamViewType"] == "NEW_IMAGE"
    template = {"Resources": resources}
    deployed = StreamFilter.of_template(template, "WakeRelayFunction")
    assert [json.loads(p) for p in deployed.patterns] == [R.ROOM_STREAM_FILTER]
    assert [json.loads(p) for p in StreamFilter.of_resources().patterns] == [R.ROOM_STREAM_FILTER]

    def record(event: str, image: dict) -> dict:
        return {"eventName": event, "dynamodb": {"NewImage": image, "StreamViewType": "NEW_IMAGE"}}

    with_wakes = {"pk": {"S": "ROOM#r"}, "wakes": {"L": []}, R.HAS_WAKES_ATTR: {"BOOL": True}}
    assert deployed.matches(record("INSERT", with_wakes))
    assert not deployed.matches(record("MODIFY", with_wakes))
    assert not deployed.matches(record("INSERT", {"pk": {"S": "ROOM#r"}}))
    assert not deployed.matches(record("INSERT", {**with_wakes, R.HAS_WAKES_ATTR: {"BOOL": False}}))


def test_run_data_bucket_is_private_encrypted_and_tls_only(resources):
    bucket = resources[R.RUN_DATA_BUCKET.logical_id]["Properties"]
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    sse = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert sse["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    policies = [
        p
        for p in of_type(resources, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": R.RUN_DATA_BUCKET.logical_id}
    ]
    assert len(policies) == 1
    denies = [s for s in policies[0]["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert any(s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in denies)


# --------------------------------------------------------------------------- wakes
def test_wake_queue_redrives_to_dlq(resources):
    queue = resources[R.WAKE_QUEUE.logical_id]["Properties"]
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [R.WAKE_DLQ.logical_id, "Arn"]},
        "maxReceiveCount": R.WAKE_QUEUE.max_receive_count,
    }
    assert queue["VisibilityTimeout"] == R.WAKE_QUEUE.visibility_timeout_s
    consumer = R.FUNCTIONS_BY_ID["WakeConsumerFunction"]
    consumer_timeout = resources[consumer.logical_id]["Properties"]["Timeout"]
    assert queue["VisibilityTimeout"] >= 6 * consumer_timeout  # what AWS asks for SQS sources
    for qdef in R.QUEUES:
        assert resources[qdef.logical_id]["Properties"]["SqsManagedSseEnabled"] is True


def _mapping(resources, function_id: str) -> dict:
    found = [
        m["Properties"]
        for m in of_type(resources, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    assert len(found) == 1, function_id
    return found[0]


def test_wake_consumer_reads_the_queue_with_partial_batch_failures(resources):
    m = _mapping(resources, "WakeConsumerFunction")
    assert m["EventSourceArn"] == {"Fn::GetAtt": [R.WAKE_QUEUE.logical_id, "Arn"]}
    assert m["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_the_wake_relay_reads_the_room_stream_with_bisect_retry_and_on_failure(resources):
    m = _mapping(resources, "WakeRelayFunction")
    assert m["EventSourceArn"] == {"Fn::GetAtt": [R.ROOM_TABLE.logical_id, "StreamArn"]}
    assert m["BisectBatchOnFunctionError"] is True
    assert 0 <= m["MaximumRetryAttempts"] <= 10
    assert m["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    dest = m["DestinationConfig"]["OnFailure"]["Destination"]
    assert resources[dest["Fn::GetAtt"][0]]["Type"] == "AWS::SQS::Queue"
    assert m["StartingPosition"] == "TRIM_HORIZON"  # LATEST skips records written meanwhile


# --------------------------------------------------------------------------- run engine
def test_state_machine_standard_logged_traced(resources):
    props = resources[SM_ID]["Properties"]
    assert props["StateMachineType"] == "STANDARD"
    assert props["TracingConfiguration"] == {"Enabled": True}
    logging = props["LoggingConfiguration"]
    assert logging["Level"] == "ALL"
    group = logging["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    assert resources[group]["Type"] == "AWS::Logs::LogGroup"
    assert resources[group]["Properties"]["RetentionInDays"] == 30


def test_definition_is_the_asl_file_and_placeholders_match_substitutions(resources):
    props = resources[SM_ID]["Properties"]
    asl_text = ASL_PATH.read_text()
    assert json.loads(props["DefinitionString"]) == json.loads(asl_text)
    in_asl = set(re.findall(r"\$\{([A-Za-z0-9_]+)\}", asl_text))
    subs = dict(props["DefinitionSubstitutions"])  # a copy: the template fixture is shared
    assert in_asl, "the ASL has no placeholders?"
    assert set(subs) == in_asl
    expected = {f.asl_placeholder: f.logical_id for f in R.FUNCTIONS if f.asl_placeholder}
    assert set(expected) | {R.ASL_PARTITION_PLACEHOLDER} == in_asl
    assert subs.pop(R.ASL_PARTITION_PLACEHOLDER) == {"Ref": "AWS::Partition"}
    for key, value in subs.items():
        assert value == {"Fn::GetAtt": [expected[key], "Arn"]}


def test_state_machine_role_invokes_exactly_the_phase_functions(resources):
    role = resources[SM_ID]["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    invoke = [s for s in statements_of_role(resources, role) if "lambda:InvokeFunction" in as_list(s["Action"])]
    targets = {flat(r) for s in invoke for r in as_list(s["Resource"])}
    assert targets == {f"<{f.logical_id}.Arn>" for f in R.FUNCTIONS if f.asl_placeholder}


# --------------------------------------------------------------------------- reconciler
def test_reconciler_rule_matches_this_state_machine_failures(resources):
    rules = of_type(resources, "AWS::Events::Rule")
    assert len(rules) == 1
    rule = next(iter(rules.values()))["Properties"]
    assert rule["EventPattern"] == {
        "source": ["aws.states"],
        "detail-type": ["Step Functions Execution Status Change"],
        "detail": {"status": ["FAILED", "TIMED_OUT", "ABORTED"], "stateMachineArn": [{"Ref": SM_ID}]},
    }
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["ReconcilerFunction", "Arn"]}
    assert "DeadLetterConfig" in target
    perms = [p["Properties"] for p in of_type(resources, "AWS::Lambda::Permission").values()]
    assert any(
        p["FunctionName"] == {"Fn::GetAtt": ["ReconcilerFunction", "Arn"]} and p["Principal"] == "events.amazonaws.com"
        for p in perms
    )


# --------------------------------------------------------------------------- alarms
def _alarms(resources) -> list[dict]:
    return [a["Properties"] for a in of_type(resources, "AWS::CloudWatch::Alarm").values()]


def _dimension_of(spec: AlarmDef) -> list[dict]:
    if spec.source == "app":
        return [{"Name": "service", "Value": "quayutec"}]
    if spec.source == "queue":
        return [{"Name": "QueueName", "Value": {"Fn::GetAtt": [spec.target, "QueueName"]}}]
    return [{"Name": "FunctionName", "Value": {"Ref": spec.target}}]


@pytest.mark.parametrize("spec", ALARMS, ids=lambda a: a.name)
def test_each_alarm_watches_its_metric_with_its_threshold(resources, spec: AlarmDef):
    """docs/design.md §13: the alarm of ``spec`` exists once, on its metric, statistic, period,
    threshold and datapoints, and does not breach on missing data."""
    found = [
        a
        for a in _alarms(resources)
        if a.get("MetricName") == spec.metric and a.get("Dimensions") == _dimension_of(spec)
    ]
    assert len(found) == 1, (spec.name, found)
    (alarm,) = found
    assert alarm["Namespace"] == {"app": "Quayutec", "queue": "AWS/SQS", "function": "AWS/Lambda"}[spec.source]
    assert alarm["Statistic"] == spec.statistic
    assert alarm["Period"] == spec.period_s
    assert alarm["Threshold"] == spec.threshold
    assert alarm["EvaluationPeriods"] == spec.evaluation_periods
    assert alarm["DatapointsToAlarm"] == spec.datapoints
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"


def test_no_alarm_on_numbers_that_move_in_normal_operation(resources):
    """A customer's rejected key raises in CallModel (Lambda Errors), every failed_before_reply
    run ends in a Fail state (ExecutionsFailed), a budget reached or a duplicate is counted: none
    of them is an alarm (docs/design.md §13). Exactly the alarms of ALARMS exist."""
    alarms = _alarms(resources)
    assert len(alarms) == len(ALARMS)
    names = {a.get("MetricName") for a in alarms}
    assert not names & {"ExecutionsFailed", "ExecutionsTimedOut", *INFORMATION_METRICS}
    errors = [a["Dimensions"][0]["Value"]["Ref"] for a in alarms if a.get("MetricName") == "Errors"]
    assert errors == ["ReconcilerFunction"]


def test_every_dead_letter_queue_has_depth_and_age_alarms():
    queues = {q.logical_id for q in R.QUEUES if any(o.dead_letter == q.logical_id for o in R.QUEUES)}
    assert queues | {R.FAILED_EVENTS_QUEUE.logical_id} == set(DEAD_LETTER_QUEUES)
    for q in DEAD_LETTER_QUEUES:
        assert {f"{q}Depth", f"{q}OldestAge"} <= set(ALARMS_BY_NAME)


# --------------------------------------------------------------------------- functions
def test_exactly_the_defined_functions_and_no_custom_resources(resources):
    functions = of_type(resources, "AWS::Lambda::Function")
    assert set(functions) == {f.logical_id for f in R.FUNCTIONS}
    assert not [
        k
        for k, v in resources.items()
        if v["Type"].startswith("Custom::") or v["Type"] == "AWS::CloudFormation::CustomResource"
    ]


@pytest.mark.parametrize("fdef", R.FUNCTIONS, ids=lambda f: f.logical_id)
def test_function_from_the_factory(resources, fdef: R.FunctionDef):
    props = resources[fdef.logical_id]["Properties"]
    assert props["Handler"] == fdef.handler
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["arm64"]
    assert props["Timeout"] == fdef.timeout_s
    assert props["MemorySize"] == fdef.memory_mb
    assert props["TracingConfig"] == {"Mode": "Active"}
    (layer,) = props["Layers"]
    assert resources[layer["Ref"]]["Type"] == "AWS::Lambda::LayerVersion"
    group = props["LoggingConfig"]["LogGroup"]["Ref"]
    assert resources[group]["Properties"]["RetentionInDays"] == 30
    env = props["Environment"]["Variables"]
    # Only what the function reads (no endpoint override is set by default; the usage plan's
    # and the shared key's names are, by the Api construct).
    assert set(env) == set(R.environment_of(fdef)) - (R.OPTIONAL_ENVS - set(R.API_KEY_ENVS))
    for tdef in R.TABLES:
        if tdef.env_var in env:
            assert env[tdef.env_var] == {"Ref": tdef.logical_id}
    if R.RUN_DATA_BUCKET.env_var in env:
        assert env[R.RUN_DATA_BUCKET.env_var] == {"Ref": R.RUN_DATA_BUCKET.logical_id}
    if R.WAKE_QUEUE.env_var in env:
        assert env[R.WAKE_QUEUE.env_var] == {"Ref": R.WAKE_QUEUE.logical_id}
    for name, default in R.SETTING_DEFAULTS.items():
        if name in env:
            assert env[name] == default
    if R.STATE_MACHINE_ENV in env:
        assert env[R.STATE_MACHINE_ENV] == {"Ref": SM_ID}


@pytest.mark.unit
def test_only_run_starters_get_the_state_machine_arn():
    starters = [f.logical_id for f in R.FUNCTIONS if "states:start" in f.touches]
    assert starters == ["WakeConsumerFunction"]


def _code_dir(stack_files, resources, function_id: str) -> Path:
    return asset_source(stack_files, resources[function_id]["Properties"]["Code"]["S3Key"])


def test_code_asset_holds_only_the_quayutec_package(stack_files, resources):
    dirs = {_code_dir(stack_files, resources, f.logical_id) for f in R.FUNCTIONS}
    assert len(dirs) == 1, "one code asset for every function"
    (code,) = dirs
    from quayinfra.build_code import metadata_dir, project_version

    # the package, and its metadata (the one version: importlib.metadata reads it in Lambda)
    assert sorted(p.name for p in code.iterdir()) == ["quayutec", metadata_dir(project_version())]
    files = [p.relative_to(code).as_posix() for p in code.rglob("*") if p.is_file()]
    assert "quayutec/resources.py" in files
    bad = [f for f in files if "/tests/" in f or Path(f).name.startswith("test_")]
    assert not bad
    # Bytecode only for the runtime's Python, and only where this machine has it (build_code).
    from quayinfra.build_layer import runtime_python

    pyc = [f for f in files if "__pycache__" in f or f.endswith(".pyc")]
    if runtime_python() is None:
        assert not pyc
    else:
        assert pyc and all(f.endswith(".cpython-313.pyc") for f in pyc)


@pytest.mark.parametrize("fdef", R.FUNCTIONS, ids=lambda f: f.logical_id)
def test_handler_resolves_in_its_asset(stack_files, resources, fdef: R.FunctionDef):
    module, attr = fdef.handler.rsplit(".", 1)
    code = _code_dir(stack_files, resources, fdef.logical_id)
    module_file = code.joinpath(*module.split(".")).with_suffix(".py")
    assert module_file.is_file(), f"{fdef.handler}: no {module_file.relative_to(code)}"
    for parent in module_file.relative_to(code).parents:
        if parent != Path("."):
            assert (code / parent / "__init__.py").is_file(), f"{parent} is not a package"
    tree = ast.parse(module_file.read_text())
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert attr in defined, f"{fdef.handler}: {attr} not defined at module level"


# --------------------------------------------------------------------------- IAM
def _table_of(resource) -> str | None:
    ids = referenced_ids(resource)
    return next(iter(ids)) if ids else None


def test_claim_role_writes_only_the_claim_and_ledger_tables(resources):
    """ClaimAndRead claims, then reads the room (the woken agent's company, the context) and
    stores the context under the run in S3: its table writes are the claim and the ledger (the
    run's entry, the chain's counter), and in the room only a put (a full chain's one notice) and
    an update (a refused wake noted on its message's ``not_woken``, docs/design.md §9)."""
    stmts = statements_of_role(resources, role_of_function(resources, "ClaimAndReadFunction"))
    services = {a.split(":")[0] for s in stmts for a in as_list(s["Action"])}
    assert services == {"logs", "xray", "dynamodb", "s3"}
    writes = [s for s in stmts if any(a in ("dynamodb:PutItem", "dynamodb:UpdateItem") for a in as_list(s["Action"]))]
    assert {_table_of(r) for s in writes for r in as_list(s["Resource"])} == {"ClaimTable", "LedgerTable", "RoomTable"}
    room_writes = {
        a
        for s in writes
        if any(_table_of(r) == "RoomTable" for r in as_list(s["Resource"]))
        for a in as_list(s["Action"])
        if a in ("dynamodb:PutItem", "dynamodb:UpdateItem")
    }
    assert room_writes == {"dynamodb:PutItem", "dynamodb:UpdateItem"}
    dynamo = [s for s in stmts if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))]
    assert {_table_of(r) for s in dynamo for r in as_list(s["Resource"])} == {"ClaimTable", "LedgerTable", "RoomTable"}
    for s in dynamo:
        assert not {"dynamodb:DeleteItem", "dynamodb:Scan", "dynamodb:*"} & set(as_list(s["Action"]))


def test_call_model_reads_only_secrets_under_the_prefix_and_stage(resources):
    stmts = statements_of_role(resources, role_of_function(resources, "CallModelFunction"))
    secrets = [s for s in stmts if any(a.startswith("secretsmanager:") for a in as_list(s["Action"]))]
    assert [as_list(s["Action"]) for s in secrets] == [["secretsmanager:GetSecretValue"]]
    (resource,) = as_list(secrets[0]["Resource"])
    assert flat(resource) == (
        f"arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:{R.DEFAULT_SECRET_PREFIX}/dev/*"
    )


def test_only_secret_touchers_touch_secrets_and_only_call_model_reads_values(resources):
    for fdef in R.FUNCTIONS:
        stmts = statements_of_role(resources, role_of_function(resources, fdef.logical_id))
        actions = {a for s in stmts for a in as_list(s["Action"]) if a.startswith("secretsmanager:")}
        assert bool(actions) == any(t.startswith("secrets:") for t in fdef.touches), fdef.logical_id
        reads = "secretsmanager:GetSecretValue" in actions
        assert reads == (fdef.logical_id == "CallModelFunction"), fdef.logical_id


def test_api_sets_keys_without_reading_them(resources):
    stmts = statements_of_role(resources, role_of_function(resources, "ApiFunction"))
    secrets = [s for s in stmts if any(a.startswith("secretsmanager:") for a in as_list(s["Action"]))]
    assert {a for s in secrets for a in as_list(s["Action"])} == {
        "secretsmanager:CreateSecret",
        "secretsmanager:PutSecretValue",
        "secretsmanager:DescribeSecret",
    }
    assert {flat(r) for s in secrets for r in as_list(s["Resource"])} == {
        f"arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:{R.DEFAULT_SECRET_PREFIX}/dev/*"
    }


def test_table_access_is_exactly_the_touches(resources):
    """Each function's DynamoDB actions per table and index are exactly its ``<table>:<op>``
    touches (least privilege: the per-call IAM check finds any that a call needs and lacks)."""
    tables = {"claims": "ClaimTable", "ledger": "LedgerTable", "room": "RoomTable", "idempotency": "IdempotencyTable"}
    ops = {
        "get": "GetItem",
        "batchget": "BatchGetItem",
        "query": "Query",
        "put": "PutItem",
        "update": "UpdateItem",
        "delete": "DeleteItem",
        "check": "ConditionCheckItem",
    }
    for fdef in R.FUNCTIONS:
        stmts = statements_of_role(resources, role_of_function(resources, fdef.logical_id))
        granted = {
            (flat(r).split(".Arn>")[0].lstrip("<") + flat(r).split(".Arn>")[1], a)
            for s in stmts
            for a in as_list(s["Action"])
            if a.startswith("dynamodb:") and a not in STREAM_ACTIONS
            for r in as_list(s["Resource"])
        }
        expected = set()
        for t in fdef.touches:
            what, _, op = t.partition(":")
            if what in tables and t != "room:stream":
                op, _, index = op.partition("@")
                expected.add((tables[what] + (f"/index/{index}" if index else ""), f"dynamodb:{ops[op]}"))
        assert granted == expected, fdef.logical_id
        for s in stmts:
            assert not {"dynamodb:Scan", "dynamodb:BatchWriteItem", "dynamodb:*"} & set(as_list(s["Action"]))


STREAM_ACTIONS = {"dynamodb:ListStreams", "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}


def test_run_data_access_is_under_the_run_prefix(resources):
    for fdef in R.FUNCTIONS:
        stmts = statements_of_role(resources, role_of_function(resources, fdef.logical_id))
        s3 = [s for s in stmts if any(a.startswith("s3:") for a in as_list(s["Action"]))]
        # the files bucket: each files:/index: touch is one action on its prefix (test below)
        s3 = [
            s
            for s in s3
            if not all(flat(r).startswith(f"<{R.FILES_BUCKET.logical_id}.Arn>") for r in as_list(s["Resource"]))
        ]
        if not any(t.startswith("rundata:") for t in fdef.touches):
            assert not s3, fdef.logical_id
            continue
        for s in s3:
            for r in as_list(s["Resource"]):
                if "s3:ListBucket" in as_list(s["Action"]):
                    assert s["Condition"] == {"StringLike": {"s3:prefix": "runs/*"}}
                else:
                    assert flat(r) == f"<{R.RUN_DATA_BUCKET.logical_id}.Arn>/runs/*"


def test_files_access_is_one_action_per_touch_under_its_prefix(resources):
    """Each files:/index: touch is one object action on its prefix; files:get adds s3:ListBucket
    (a missing upload is a 404) and files:delete s3:ListBucketVersions (every version of an
    upload), each on the uploads/ prefix only (design §8)."""
    want: dict[str, tuple[str | tuple[str, ...], str]] = {
        "files:get": ("s3:GetObject", "uploads/*"),
        "files:getversion": ("s3:GetObjectVersion", "uploads/*"),
        "files:put": ("s3:PutObject", "uploads/*"),
        "files:delete": ("s3:DeleteObjectVersion", "uploads/*"),
        "index:get": (("s3:GetObject", "s3:GetObjectVersion"), "index/*"),
        "index:put": ("s3:PutObject", "index/*"),
        "index:delete": (("s3:DeleteObject", "s3:DeleteObjectVersion"), "index/*"),
    }
    on_bucket = {"files:get": "s3:ListBucket", "files:delete": "s3:ListBucketVersions"}
    bucket = f"<{R.FILES_BUCKET.logical_id}.Arn>"
    for fdef in R.FUNCTIONS:
        stmts = statements_of_role(resources, role_of_function(resources, fdef.logical_id))
        granted = {
            (a, flat(r), json.dumps(s.get("Condition"), sort_keys=True))
            for s in stmts
            for a in as_list(s["Action"])
            for r in as_list(s["Resource"])
            if flat(r).startswith(bucket)
        }
        expected = {
            (a, f"{bucket}/{want[t][1]}", "null")
            for t in fdef.touches
            if t in want
            for a in ((want[t][0],) if isinstance(want[t][0], str) else want[t][0])
        }
        uploads_only = json.dumps({"StringLike": {"s3:prefix": "uploads/*"}})
        expected |= {(on_bucket[t], bucket, uploads_only) for t in fdef.touches if t in on_bucket}
        assert granted == expected, fdef.logical_id


# Resource "*" is allowed only for actions AWS does not scope to a resource.
STAR_ACTIONS = {
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    "dynamodb:ListStreams",
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
}


def test_no_wildcards_beyond_what_aws_requires(resources):
    for pid, policy in of_type(resources, "AWS::IAM::Policy").items():
        for s in as_list(policy["Properties"]["PolicyDocument"]["Statement"]):
            assert s["Effect"] == "Allow"
            actions = as_list(s["Action"])
            assert not [a for a in actions if "*" in a], pid
            if "*" in as_list(s["Resource"]):
                assert set(actions) <= STAR_ACTIONS, (pid, actions)


def test_every_star_resource_is_acknowledged(assembly):
    report = json.loads((assembly / "validation-report.json").read_text())
    (nag,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    acknowledged = {
        (v["acknowledgedId"], c["constructPath"]) for v in nag["suppressedViolations"] for c in v["violatingConstructs"]
    }
    star = {path for ack, path in acknowledged if ack.endswith("IAM5[Resource::*]")}
    assert any("ClaimAndReadFunctionRole" in p for p in star)
    assert any("AgentRun/Role" in p for p in star)
