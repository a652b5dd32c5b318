"""The synthesized template deploys on moto's CloudFormation: CREATE_COMPLETE, and the created
resources carry the names, handlers and environment the shared definitions say.

Only the deployment is checked here; playing a run on the deployed stack is the local stack's.
"""

from __future__ import annotations

import json
import logging
import re

import pytest

from quayutec import resources as R

# moto's CloudFormation skips alarms, queue/bucket policies, EventInvokeConfig (LOCAL-AWS.md).
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")

ACCOUNT = "123456789012"
REGION = "us-east-1"


@pytest.fixture(scope="module")
def deployed(stack_files, assembly):
    boto3 = pytest.importorskip("boto3")
    from moto import mock_aws

    from quayinfra import localdeploy

    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": REGION,
           "MOTO_ACCOUNT_ID": ACCOUNT}
    mp = pytest.MonkeyPatch()
    for k, v in env.items():
        mp.setenv(k, v)
    mp.delenv("AWS_PROFILE", raising=False)
    mp.delenv("AWS_ENDPOINT_URL", raising=False)
    logging.getLogger("moto").setLevel(logging.ERROR)  # "No Moto CloudFormation support for"
    with mock_aws():
        clients = {n: boto3.client(n, region_name=REGION) for n in (
            "cloudformation", "s3", "ssm", "stepfunctions", "lambda", "dynamodb", "sqs", "sts")}
        assert clients["sts"].get_caller_identity()["Account"] == ACCOUNT
        stack = localdeploy.deploy(
            assembly, cfn=clients["cloudformation"], s3=clients["s3"], ssm=clients["ssm"],
            sfn=clients["stepfunctions"], lambda_client=clients["lambda"],
            account=ACCOUNT, region=REGION)
        ids = localdeploy.physical_ids(clients["cloudformation"], stack["StackName"])
        yield {"stack": stack, "ids": ids, **clients}
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
            i["IndexName"] for i in desc["Table"].get("LocalSecondaryIndexes", [])}
        assert indexes == {i.name for i in tdef.indexes}
    room = deployed["dynamodb"].describe_table(TableName=deployed["ids"]["RoomTable"])["Table"]
    assert room["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"


def test_wake_queue_redrive(deployed):
    sqs = deployed["sqs"]
    attrs = sqs.get_queue_attributes(QueueUrl=deployed["ids"][R.WAKE_QUEUE.logical_id],
                                     AttributeNames=["All"])["Attributes"]
    redrive = json.loads(attrs["RedrivePolicy"])
    assert int(redrive["maxReceiveCount"]) == R.WAKE_QUEUE.max_receive_count
    dlq_arn = sqs.get_queue_attributes(QueueUrl=deployed["ids"][R.WAKE_DLQ.logical_id],
                                       AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert redrive["deadLetterTargetArn"] == dlq_arn


@pytest.mark.parametrize("fdef", R.FUNCTIONS, ids=lambda f: f.logical_id)
def test_function_handler_and_environment(deployed, fdef):
    ids = deployed["ids"]
    conf = deployed["lambda"].get_function(FunctionName=ids[fdef.logical_id])["Configuration"]
    assert conf["Handler"] == fdef.handler
    assert conf["Runtime"] == "python3.13"
    env = conf["Environment"]["Variables"]
    for tdef in R.TABLES:
        assert env[tdef.env_var] == ids[tdef.logical_id]
    assert env[R.RUN_DATA_BUCKET.env_var] == ids[R.RUN_DATA_BUCKET.logical_id]
    assert env[R.WAKE_QUEUE.env_var] == ids[R.WAKE_QUEUE.logical_id]
    assert env[R.WAKE_QUEUE.env_var].startswith("https://")
    for name, default in R.SETTING_DEFAULTS.items():
        assert env[name] == default
    if "states:start" in fdef.touches:
        assert env[R.STATE_MACHINE_ENV] == ids["AgentRunStateMachine"]
        assert env[R.STATE_MACHINE_ENV].startswith("arn:aws:states:")
    else:
        assert R.STATE_MACHINE_ENV not in env


def test_state_machine_definition_points_at_the_deployed_functions(deployed):
    ids = deployed["ids"]
    desc = deployed["stepfunctions"].describe_state_machine(
        stateMachineArn=ids["AgentRunStateMachine"])
    assert not re.findall(r"\$\{[A-Za-z0-9_]+\}", desc["definition"])
    definition = json.loads(desc["definition"])
    claim_arn = deployed["lambda"].get_function(
        FunctionName=ids["ClaimFunction"])["Configuration"]["FunctionArn"]
    assert definition["States"]["Claim"]["Parameters"]["FunctionName"] == claim_arn
    assert definition["TimeoutSeconds"] == 691200


def test_event_source_mappings_exist(deployed):
    ids = deployed["ids"]
    mappings = deployed["lambda"].list_event_source_mappings()["EventSourceMappings"]
    by_function = {m["FunctionArn"].rsplit(":", 1)[-1]: m for m in mappings}
    assert ids["WakeConsumerFunction"] in by_function
    assert ids["StreamDispatchFunction"] in by_function
