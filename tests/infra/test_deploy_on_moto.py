"""The synthesized template deploys on moto's CloudFormation (CREATE_COMPLETE), the created
resources carry the names, handlers and environment the shared definitions say, and the deployed
template itself runs the main job: one wake played through the deployed resources, with the
real handlers in-process (``LocalStack.from_deployed``: the demo's pollers and Lambda seam).
"""

from __future__ import annotations

import json
import logging
import os
import re

import pytest

from quayutec import resources as R

pytestmark = [
    # moto's CloudFormation skips alarms, queue/bucket policies, EventInvokeConfig (LOCAL-AWS.md).
    pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning"),
    # Metrics are off locally (POWERTOOLS_METRICS_DISABLED).
    pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning"),
]

REGION = "us-east-1"
PROVIDER_ENVS = {"ANTHROPIC_BASE_URL": "anthropic", "OPENAI_BASE_URL": "openai", "BEDROCK_ENDPOINT_URL": "bedrock"}
KEY = "sk-harbour-test"
REPLY = "Stalls go on the north quay."
MEMORY = "Festival stalls: north quay."


@pytest.fixture(scope="module")
def server():
    from quaylocal.provider_server import ProviderServer

    script = {
        "h1": [{"reply": {"text": REPLY, "actions": [{"kind": "remember", "text": MEMORY, "visibility": "room"}]}}]
    }
    with ProviderServer(scripts=script, keys={"h1": KEY}) as srv:
        yield srv


@pytest.fixture(scope="module")
def deployed(assembly, server):
    boto3 = pytest.importorskip("boto3")
    from quaylocal.stack import LocalStack

    mp = pytest.MonkeyPatch()
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "MOTO_ACCOUNT_ID"):
        mp.delenv(name, raising=False)
    logging.getLogger("moto").setLevel(logging.ERROR)  # "No Moto CloudFormation support for"
    settings = {env: server.base_url(p) for env, p in PROVIDER_ENVS.items()}
    try:
        with LocalStack.from_deployed(assembly, settings=settings, time_scale=0.01) as stack:
            clients = {
                n: boto3.client(n, region_name=REGION)
                for n in ("cloudformation", "stepfunctions", "lambda", "dynamodb", "sqs")
            }
            stack_desc = clients["cloudformation"].describe_stacks(StackName=stack.deployment.stack_name)["Stacks"][0]
            yield {
                "stack": stack_desc,
                "ids": stack.deployment.physical_ids,
                "local": stack,
                "settings": settings,
                **clients,
            }
    finally:
        mp.undo()


def test_create_complete(deployed):
    assert deployed["stack"]["StackStatus"] == "CREATE_COMPLETE"


def test_tables_created_with_their_keys(deployed):
    for tdef in R.TABLES:
        desc = deployed["dynamodb"].describe_table(TableName=deployed["ids"][tdef.logical_id])
        keys = {k["KeyType"]: k["AttributeName"] for k in desc["Table"]["KeySchema"]}
        assert keys["HASH"] == tdef.partition_key.name
        if tdef.sort_key:
            assert keys["RANGE"] == tdef.sort_key.name
        indexes = {i["IndexName"] for i in desc["Table"].get("GlobalSecondaryIndexes", [])} | {
            i["IndexName"] for i in desc["Table"].get("LocalSecondaryIndexes", [])
        }
        assert indexes == {i.name for i in tdef.indexes}
    room = deployed["dynamodb"].describe_table(TableName=deployed["ids"]["RoomTable"])["Table"]
    assert room["StreamSpecification"]["StreamViewType"] == "NEW_IMAGE"


def test_wake_queue_redrive(deployed):
    sqs = deployed["sqs"]
    attrs = sqs.get_queue_attributes(QueueUrl=deployed["ids"][R.WAKE_QUEUE.logical_id], AttributeNames=["All"])[
        "Attributes"
    ]
    redrive = json.loads(attrs["RedrivePolicy"])
    assert int(redrive["maxReceiveCount"]) == R.WAKE_QUEUE.max_receive_count
    dlq_arn = sqs.get_queue_attributes(QueueUrl=deployed["ids"][R.WAKE_DLQ.logical_id], AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    assert redrive["deadLetterTargetArn"] == dlq_arn


@pytest.mark.parametrize("fdef", R.FUNCTIONS, ids=lambda f: f.logical_id)
def test_function_handler_and_environment(deployed, fdef):
    ids = deployed["ids"]
    conf = deployed["lambda"].get_function(FunctionName=ids[fdef.logical_id])["Configuration"]
    assert conf["Handler"] == fdef.handler
    assert conf["Runtime"] == "python3.13"
    env = conf["Environment"]["Variables"]
    reads = R.environment_of(fdef)
    # its own variables only (the endpoint overrides: from_deployed(settings=...) below)
    assert set(env) - R.OPTIONAL_ENVS == set(reads) - R.OPTIONAL_ENVS
    for tdef in R.TABLES:
        if tdef.env_var in reads:
            assert env[tdef.env_var] == ids[tdef.logical_id]
    if R.RUN_DATA_BUCKET.env_var in reads:
        assert env[R.RUN_DATA_BUCKET.env_var] == ids[R.RUN_DATA_BUCKET.logical_id]
    if R.WAKE_QUEUE.env_var in reads:
        assert env[R.WAKE_QUEUE.env_var] == ids[R.WAKE_QUEUE.logical_id]
        assert env[R.WAKE_QUEUE.env_var].startswith("https://")
    for name, default in R.SETTING_DEFAULTS.items():
        if name in reads:
            assert env[name] == default
    for name, url in deployed["settings"].items():  # put there by from_deployed(settings=...)
        if name in reads:  # only on the functions that read it
            assert env[name] == url
        else:
            assert name not in env
    if "states:start" in fdef.touches:
        assert env[R.STATE_MACHINE_ENV] == ids["AgentRunStateMachine"]
        assert env[R.STATE_MACHINE_ENV].startswith("arn:aws:states:")
    else:
        assert R.STATE_MACHINE_ENV not in env


def test_state_machine_definition_points_at_the_deployed_functions(deployed):
    ids = deployed["ids"]
    desc = deployed["stepfunctions"].describe_state_machine(stateMachineArn=ids["AgentRunStateMachine"])
    assert not re.findall(r"\$\{[A-Za-z0-9_]+\}", desc["definition"])
    definition = json.loads(desc["definition"])
    claim_arn = deployed["lambda"].get_function(FunctionName=ids["ClaimAndReadFunction"])["Configuration"][
        "FunctionArn"
    ]
    assert definition["States"]["ClaimAndRead"]["Parameters"]["FunctionName"] == claim_arn
    assert definition["TimeoutSeconds"] == 691200


def test_event_source_mappings_were_deployed_then_handed_to_the_pollers(deployed):
    ids = deployed["ids"]
    removed = deployed["local"].deployment.event_source_mappings
    by_function = {m["FunctionArn"].rsplit(":", 1)[-1]: m for m in removed}
    assert set(by_function) == {ids["WakeConsumerFunction"], ids["WakeRelayFunction"], ids["IngestFunction"]}
    assert by_function[ids["WakeRelayFunction"]]["EventSourceArn"] == deployed["local"].stream_arn
    assert deployed["lambda"].list_event_source_mappings()["EventSourceMappings"] == []


def test_files_bucket_notifies_the_ingest_queue(deployed):
    """moto's CloudFormation deploys the bucket; the local stack sets its S3 -> ingest queue
    notification (uploads/ only) as the template declares it."""
    ids = deployed["ids"]
    s3 = deployed["local"].client("s3")
    conf = s3.get_bucket_notification_configuration(Bucket=ids["FilesBucket"])["QueueConfigurations"]
    assert [c["QueueArn"].rsplit(":", 1)[-1] for c in conf] == [ids["IngestQueue"].rsplit("/", 1)[-1]]
    assert [(r["Name"].lower(), r["Value"]) for r in conf[0]["Filter"]["Key"]["FilterRules"]] == [
        ("prefix", "uploads/")
    ]


def test_handlers_run_with_the_deployed_environment(deployed):
    """One process runs every handler: its environment is the deployed functions' own, so the
    handlers address the deployed tables, bucket, queue and state machine."""
    ids = deployed["ids"]
    for fdef in R.FUNCTIONS:
        conf = deployed["lambda"].get_function_configuration(FunctionName=ids[fdef.logical_id])
        for name, value in conf["Environment"]["Variables"].items():
            assert os.environ[name] == value, (fdef.logical_id, name)
    assert os.environ[R.STATE_MACHINE_ENV] == ids["AgentRunStateMachine"]
    assert deployed["local"].queue_urls[R.WAKE_QUEUE.logical_id] == ids[R.WAKE_QUEUE.logical_id]


def test_one_wake_plays_through_the_deployed_resources(deployed, server):
    """A person's message -> room-table stream -> WakeRelay -> wake queue -> WakeConsumer ->
    the deployed state machine (ClaimAndRead ... ApplyAndFinish) -> reply, memory line, ledger `completed`."""
    from quayutec import deps as quay_deps
    from quayutec.logic.access import OPERATOR, Caller
    from quayutec.logic.room_service import RoomService
    from quayutec.logic.services import Services
    from quayutec.models import Author

    stack = deployed["local"]
    d = quay_deps.default_deps()
    assert d.settings.room_table == deployed["ids"][R.ROOM_TABLE.logical_id]
    svc, hana = Services(d), Caller(company="harbour", member="hana")  # set up as the API does
    svc.companies.create(OPERATOR, "harbour", ["hana"])
    stack.client("secretsmanager").create_secret(
        Name=quay_deps.secret_name(d.settings, "harbour", "anthropic"), SecretString=KEY
    )
    svc.agents.register(hana, name="h1", provider="anthropic", model="claude-test", instructions="Be brief.")
    quay = svc.rooms.create(hana, name="quay").room.id
    svc.rooms.place_agent(hana, quay, "h1")
    stack.wait_quiet(30)

    RoomService(d.room).post_message(
        quay, Author(kind="person", id="hana", company="harbour"), "Where do the stalls go?", ["h1"]
    )
    stack.wait_quiet(60)

    assert stack.stats.errors == []
    assert stack.stats.stream_records >= 1  # the poller, not moto's mapping, read the stream
    assert stack.stats.wakes_received == 1
    assert server.count("h1") == 1
    replies = [m for m in d.room.all_messages(quay) if m.kind == "reply"]
    assert [(m.author.id, m.text.strip()) for m in replies] == [("harbour.h1", REPLY)]
    runs = d.ledger.runs_in_room(quay)
    assert [r.status for r in runs] == ["completed"]
    assert [m.text for m in d.room.all_memory(quay, ["harbour"])] == [MEMORY]
    executions = deployed["stepfunctions"].list_executions(stateMachineArn=deployed["ids"]["AgentRunStateMachine"])[
        "executions"
    ]
    assert [e["status"] for e in executions] == ["SUCCEEDED"]
    # The run data went to the deployed bucket, under the run prefix.
    objects = stack.client("s3").list_objects_v2(Bucket=deployed["ids"][R.RUN_DATA_BUCKET.logical_id])["Contents"]
    assert objects and all(o["Key"].startswith(f"{R.RUN_DATA_PREFIX}{runs[0].run_id}/") for o in objects)
