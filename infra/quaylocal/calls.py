"""The AWS call recorder: every call the deployed code makes, with its owner, its IAM actions
and the resource ARNs they concern (design §11: moto checks no IAM, so the suite does).

The deployed package's client factory announces each call to the call observers of its one
seam (:func:`quayutec.seams.observe`); a :class:`Recorder` is one such observer, installed with
:func:`install` (the tests install one; nothing in Lambda does). A call is recorded as a
:class:`Call`: who made it (:data:`OWNER`), the API operation, and the ``(action, resource)``
pairs IAM evaluates for it, from the explicit table :data:`OPERATIONS`. An operation missing from
the table is recorded with ``unmapped=True`` and fails the check; so does a call with no owner.

Owners (the value of :data:`OWNER` in the calling thread or task):

* ``function:<LogicalId>``: the function's handler is running (checked against its role);
* ``state-machine``: moto's Step Functions interpreter invoking a Lambda task (checked against
  the state machine's role);
* ``setup``: test set-up and the local stack's own provisioning (listed, not checked);
* ``local:<what>``: the local stack standing in for a service-side behaviour that has no IAM
  principal on AWS (e.g. EventBridge status events, the Lambda service invoking a function for
  an event source mapping; listed, not checked).

Resource ARNs are canonical: physical names (the local stack's own names, or the names moto's
CloudFormation gave the deployed template's resources) are replaced by the template's logical
ids, account and region are the local stack's, and a stream ARN's label is ``LABEL``. The IAM
checker (:mod:`quaylab.iam_check`) resolves the synthesized template to the same form.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from quayutec import seams

REGION = "us-east-1"
ACCOUNT = "123456789012"
PARTITION = "aws"
STREAM_LABEL = "LABEL"
STATE_MACHINE = "state-machine"
SETUP = "setup"

#: Who makes the AWS calls of this thread/task now (see the module docstring).
OWNER: ContextVar[str | None] = ContextVar("quay_call_owner", default=None)


@contextmanager
def owner(name: str) -> Iterator[None]:
    """Attribute the calls made inside to ``name`` (``function:X``, ``setup``, ``local:...``)."""
    token = OWNER.set(name)
    try:
        yield
    finally:
        OWNER.reset(token)


def function_owner(logical_id: str) -> str:
    return f"function:{logical_id}"


# ----------------------------------------------------------------------------- names
_names_lock = threading.Lock()
#: physical resource name -> canonical (logical id) name, from every local stack started.
_CANONICAL: dict[str, str] = {}


def register_names(physical_to_logical: dict[str, str], state_machine: str | None = None) -> None:
    """The local stack announces its resources' physical names (table, queue, bucket, function,
    state machine names) and the logical ids they stand for, and its state machine's ARN."""
    with _names_lock:
        _CANONICAL.update(physical_to_logical)
        if state_machine:
            TOKEN_STATE_MACHINE.append(state_machine)


def canonical(name: str) -> str:
    return _CANONICAL.get(name, name)


def _arn(service: str, resource: str, *, region: str = REGION, account: str = ACCOUNT) -> str:
    return f"arn:{PARTITION}:{service}:{region}:{account}:{resource}"


def table_arn(name: str) -> str:
    return _arn("dynamodb", f"table/{canonical(name)}")


def stream_arn(arn: str) -> str:
    """``arn:...:table/<physical>/stream/<label>`` → canonical, label ``LABEL``."""
    table = arn.split(":table/", 1)[1].split("/stream/", 1)[0]
    return _arn("dynamodb", f"table/{canonical(table)}/stream/{STREAM_LABEL}")


def queue_arn(url: str) -> str:
    return _arn("sqs", canonical(urlparse(url).path.rstrip("/").rsplit("/", 1)[-1]))


def bucket_arn(bucket: str, key: str | None = None) -> str:
    base = f"arn:{PARTITION}:s3:::{canonical(bucket)}"
    return base if key is None else f"{base}/{key}"


def lambda_arn(name_or_arn: str) -> str:
    name = name_or_arn.rsplit(":function:", 1)[-1].split(":", 1)[0]
    return _arn("lambda", f"function:{canonical(name)}")


def state_machine_arn(arn: str) -> str:
    return _arn("states", f"stateMachine:{canonical(arn.rsplit(':', 1)[-1])}")


def execution_arn(arn: str) -> str:
    _, _, rest = arn.partition(":execution:")
    machine, _, name = rest.partition(":")
    return _arn("states", f"execution:{canonical(machine)}:{name}")


#: Secrets Manager appends "-" and 6 random characters to a secret's name in its ARN.
SECRET_SUFFIX = "-AbCdEf"


def secret_arn(secret_id: str) -> str:
    if secret_id.startswith("arn:"):
        return _arn("secretsmanager", "secret:" + secret_id.split(":secret:", 1)[1])
    return _arn("secretsmanager", f"secret:{secret_id}{SECRET_SUFFIX}")


# ----------------------------------------------------------------------------- the table
Pairs = list[tuple[str, str]]  # (IAM action, resource ARN)


def _ddb(action: str) -> Callable[[dict], Pairs]:
    def pairs(p: dict) -> Pairs:
        out = [(f"dynamodb:{action}", table_arn(p["TableName"]))]
        if p.get("IndexName"):  # a query on an index needs the index ARN
            out = [(f"dynamodb:{action}", f"{table_arn(p['TableName'])}/index/{p['IndexName']}")]
        return out

    return pairs


_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def _transact(p: dict) -> Pairs:
    """``TransactWriteItems``/``TransactGetItems``: each item's own action on its table
    (AWS: "permissions for the individual actions", ConditionCheck included)."""
    out: Pairs = []
    for item in p.get("TransactItems", []):
        for kind, op in item.items():
            out.append((f"dynamodb:{_TRANSACT_ACTIONS[kind]}", table_arn(op["TableName"])))
    return out


def _batch(action: str) -> Callable[[dict], Pairs]:
    return lambda p: [(f"dynamodb:{action}", table_arn(t)) for t in p.get("RequestItems", {})]


def _stream(action: str) -> Callable[[dict], Pairs]:
    return lambda p: [(f"dynamodb:{action}", stream_arn(p["StreamArn"]))]


def _s3_object(action: str) -> Callable[[dict], Pairs]:
    # With a VersionId, the action on that version (s3:GetObjectVersion, s3:DeleteObjectVersion:
    # Service Authorization Reference for Amazon S3).
    return lambda p: [(f"s3:{action}{'Version' if p.get('VersionId') else ''}", bucket_arn(p["Bucket"], p["Key"]))]


def _s3_delete_objects(p: dict) -> Pairs:
    return [
        (f"s3:DeleteObject{'Version' if o.get('VersionId') else ''}", bucket_arn(p["Bucket"], o["Key"]))
        for o in p.get("Delete", {}).get("Objects", [])
    ]


def _s3_bucket(action: str) -> Callable[[dict], Pairs]:
    return lambda p: [(f"s3:{action}", bucket_arn(p["Bucket"]))]


def _sqs(action: str) -> Callable[[dict], Pairs]:
    return lambda p: [(f"sqs:{action}", queue_arn(p["QueueUrl"]))]


def _secret(action: str) -> Callable[[dict], Pairs]:
    return lambda p: [(f"secretsmanager:{action}", secret_arn(p.get("SecretId") or p["Name"]))]


def _states(action: str, key: str, arn: Callable[[str], str]) -> Callable[[dict], Pairs]:
    return lambda p: [(f"states:{action}", arn(p[key]))]


#: The state machine whose executions hand out the task tokens (the local stack registers it).
TOKEN_STATE_MACHINE: list[str] = []


def _task_token(action: str) -> Callable[[dict], Pairs]:
    # A task token answer is authorized on the state machine whose execution issued the token
    # (Step Functions developer guide, "IAM policies for ... callback tasks"; CDK's
    # StateMachine.grantTaskResponse). The token is opaque: here, the local stack's machine.
    return lambda p: [(f"states:{action}", state_machine_arn(TOKEN_STATE_MACHINE[-1]))]


def _apigw(path: str) -> str:
    """An API Gateway resource ARN: ``arn:aws:apigateway:<region>::<path>`` (no account)."""
    return f"arn:{PARTITION}:apigateway:{REGION}::{path}"


#: (service id as botocore hyphenizes it, operation) -> the IAM (action, resource) pairs.
#: Sources: the Service Authorization Reference of each service; HeadObject needs s3:GetObject,
#: ListObjectsV2 needs s3:ListBucket, the *Batch SQS calls need their single-message action.
OPERATIONS: dict[tuple[str, str], Callable[[dict], Pairs]] = {
    ("dynamodb", "GetItem"): _ddb("GetItem"),
    ("dynamodb", "PutItem"): _ddb("PutItem"),
    ("dynamodb", "UpdateItem"): _ddb("UpdateItem"),
    ("dynamodb", "DeleteItem"): _ddb("DeleteItem"),
    ("dynamodb", "Query"): _ddb("Query"),
    ("dynamodb", "Scan"): _ddb("Scan"),
    ("dynamodb", "DescribeTable"): _ddb("DescribeTable"),
    ("dynamodb", "BatchGetItem"): _batch("BatchGetItem"),
    ("dynamodb", "BatchWriteItem"): _batch("BatchWriteItem"),
    ("dynamodb", "TransactWriteItems"): _transact,
    ("dynamodb", "TransactGetItems"): _transact,
    ("dynamodb-streams", "DescribeStream"): _stream("DescribeStream"),
    ("dynamodb-streams", "GetShardIterator"): _stream("GetShardIterator"),
    ("dynamodb-streams", "GetRecords"): lambda p: [("dynamodb:GetRecords", _iterator_stream(p))],
    ("dynamodb-streams", "ListStreams"): lambda p: [("dynamodb:ListStreams", "*")],
    ("s3", "GetObject"): _s3_object("GetObject"),
    ("s3", "HeadObject"): _s3_object("GetObject"),
    ("s3", "PutObject"): _s3_object("PutObject"),
    ("s3", "DeleteObject"): _s3_object("DeleteObject"),
    ("s3", "ListObjectsV2"): _s3_bucket("ListBucket"),
    ("s3", "ListObjectVersions"): _s3_bucket("ListBucketVersions"),
    ("s3", "DeleteObjects"): _s3_delete_objects,
    # A presigned POST is signed locally (no botocore call event): the API announces it
    # (quayutec.seams.announce) as the PutObject it grants, under the signing function.
    ("s3", "PutBucketNotificationConfiguration"): _s3_bucket("PutBucketNotification"),
    ("sqs", "SendMessage"): _sqs("SendMessage"),
    ("sqs", "SendMessageBatch"): _sqs("SendMessage"),
    ("sqs", "ReceiveMessage"): _sqs("ReceiveMessage"),
    ("sqs", "DeleteMessage"): _sqs("DeleteMessage"),
    ("sqs", "DeleteMessageBatch"): _sqs("DeleteMessage"),
    ("sqs", "ChangeMessageVisibility"): _sqs("ChangeMessageVisibility"),
    ("sqs", "ChangeMessageVisibilityBatch"): _sqs("ChangeMessageVisibility"),
    ("sqs", "GetQueueAttributes"): _sqs("GetQueueAttributes"),
    ("sfn", "StartExecution"): _states("StartExecution", "stateMachineArn", state_machine_arn),
    ("sfn", "ListExecutions"): _states("ListExecutions", "stateMachineArn", state_machine_arn),
    ("sfn", "DescribeStateMachine"): _states("DescribeStateMachine", "stateMachineArn", state_machine_arn),
    ("sfn", "DescribeExecution"): _states("DescribeExecution", "executionArn", execution_arn),
    ("sfn", "GetExecutionHistory"): _states("GetExecutionHistory", "executionArn", execution_arn),
    ("sfn", "StopExecution"): _states("StopExecution", "executionArn", execution_arn),
    ("sfn", "SendTaskSuccess"): _task_token("SendTaskSuccess"),
    ("sfn", "SendTaskFailure"): _task_token("SendTaskFailure"),
    ("sfn", "SendTaskHeartbeat"): _task_token("SendTaskHeartbeat"),
    ("secrets-manager", "GetSecretValue"): _secret("GetSecretValue"),
    ("secrets-manager", "DescribeSecret"): _secret("DescribeSecret"),
    ("secrets-manager", "CreateSecret"): _secret("CreateSecret"),
    ("secrets-manager", "PutSecretValue"): _secret("PutSecretValue"),
    ("secrets-manager", "UpdateSecret"): _secret("UpdateSecret"),
    ("lambda", "Invoke"): lambda p: [("lambda:InvokeFunction", lambda_arn(p["FunctionName"]))],
    # API keys and usage plans (API Gateway's management API: apigateway:<HTTP verb> on the
    # resource path, Service Authorization Reference "Amazon API Gateway Management").
    ("api-gateway", "GetUsagePlans"): lambda p: [("apigateway:GET", _apigw("/usageplans"))],
    ("api-gateway", "GetApiKeys"): lambda p: [("apigateway:GET", _apigw("/apikeys"))],
    ("api-gateway", "GetApiKey"): lambda p: [("apigateway:GET", _apigw(f"/apikeys/{canonical(p['apiKey'])}"))],
    ("api-gateway", "CreateApiKey"): lambda p: [("apigateway:POST", _apigw("/apikeys"))],
    ("api-gateway", "CreateUsagePlanKey"): lambda p: [
        ("apigateway:POST", _apigw(f"/usageplans/{canonical(p['usagePlanId'])}/keys"))
    ],
    # A company's Bedrock role (docs/design.md §5): the role is the resource.
    ("sts", "AssumeRole"): lambda p: [("sts:AssumeRole", p["RoleArn"])],
    # Needs no permission (STS GetCallerIdentity: "No permissions are required").
    ("sts", "GetCallerIdentity"): lambda p: [],
}


def _iterator_stream(params: dict) -> str:
    """GetRecords names only the shard iterator; moto's (like AWS's) begins with the stream ARN
    (``<stream arn>|1|<id>``)."""
    return stream_arn(params["ShardIterator"].split("|", 1)[0])


# ----------------------------------------------------------------------------- recording
@dataclass(frozen=True)
class Call:
    owner: str | None
    service: str
    operation: str
    pairs: tuple[tuple[str, str], ...]
    unmapped: bool = False
    thread: str = ""  # the calling thread's name (to find an unowned caller)

    def describe(self) -> str:
        what = ", ".join(f"{a} on {r}" for a, r in self.pairs) or "(no IAM action)"
        where = "" if self.owner else f" (thread {self.thread})"
        return f"{self.owner or 'UNOWNED'}{where}: {self.service}.{self.operation}: {what}"


class Recorder:
    """Collects :class:`Call` s; ``listener`` (if any) sees each one as it is recorded."""

    def __init__(self, listener: Callable[[Call], None] | None = None) -> None:
        self.calls: list[Call] = []
        self.listener = listener
        self._lock = threading.Lock()
        #: Its hook (:mod:`quayutec.seams`): installed by :func:`install`, or for a block with
        #: ``seams.installed(recorder.instruments)``.
        self.instruments = seams.Instruments("call recorder", call=self.observe)

    def observe(self, service: str, operation: str, params: dict[str, Any]) -> None:
        """The seam's call observer (:attr:`instruments`)."""
        self.record(service, operation, params)

    def record(self, service: str, operation: str, params: dict[str, Any], default_owner: str | None = None) -> Call:
        mapper = OPERATIONS.get((service, operation))
        try:
            pairs = tuple(mapper(params)) if mapper else ()
        except (KeyError, TypeError, IndexError):  # a call missing its resource parameter
            pairs, mapper = (), None
        call = Call(
            owner=OWNER.get() or default_owner,
            service=service,
            operation=operation,
            pairs=pairs,
            unmapped=mapper is None,
            thread=threading.current_thread().name,
        )
        with self._lock:
            self.calls.append(call)
        if self.listener is not None:
            self.listener(call)
        return call

    def take(self) -> list[Call]:
        with self._lock:
            out, self.calls = self.calls, []
        return out


#: The recorder of this process, when one is installed (tests; never in Lambda).
RECORDER: Recorder | None = None


def install(recorder: Recorder) -> None:
    """Make ``recorder`` the process's recorder and install it into the seam (it hears every call
    of every factory client); a recorder installed before is removed."""
    global RECORDER
    if RECORDER is not None:
        seams.uninstall(RECORDER.instruments)
    RECORDER = recorder
    seams.install(recorder.instruments)


def record_lambda_invoke(function_arn: str) -> None:
    """The in-process Lambda seam: an invocation arriving with no owner comes from moto's Step
    Functions interpreter (a Lambda task), so the state machine's role makes it."""
    if RECORDER is not None and OWNER.get() is None:  # else the caller's client recorded it
        RECORDER.record("lambda", "Invoke", {"FunctionName": function_arn}, default_owner=STATE_MACHINE)


# ----------------------------------------------------------------------------- owners of handlers
def own_handlers() -> None:
    """Wrap every deployed handler (``resources.FUNCTIONS``) in its module so the calls it makes
    are owned by its function: direct calls, the in-process Lambda seam and ``quay dev`` alike.
    Call before anything imports a handler by name. Idempotent."""
    from quayutec import resources as r

    for fdef in r.FUNCTIONS:
        module_name, _, attr = fdef.handler.rpartition(".")
        module = importlib.import_module(module_name)
        handler = getattr(module, attr)
        if not hasattr(handler, "__call_owner__"):
            setattr(module, attr, _owned(handler, function_owner(fdef.logical_id)))


def _owned(handler: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(handler)
    def run(*args: Any, **kwargs: Any) -> Any:
        with owner(name):
            return handler(*args, **kwargs)

    run.__call_owner__ = name  # type: ignore[attr-defined]
    return run


# ----------------------------------------------------------------------------- other processes
#: Set by the test suite for the processes it starts (``quay dev``, ``quay demo``): each records
#: its calls as JSON lines into this file, and the suite checks them like its own.
CALL_LOG_ENV = "QUAY_CALL_LOG"


def install_from_environment() -> None:
    """In a ``quay`` process started by the test suite: record into ``$QUAY_CALL_LOG``."""
    path = os.environ.get(CALL_LOG_ENV)
    if not path or RECORDER is not None:
        return
    lock = threading.Lock()

    def append(call: Call) -> None:
        line = json.dumps(
            {
                "owner": call.owner,
                "service": call.service,
                "operation": call.operation,
                "pairs": call.pairs,
                "unmapped": call.unmapped,
                "thread": call.thread,
            }
        )
        with lock, open(path, "a") as out:
            out.write(line + "\n")

    install(Recorder(listener=append))
    own_handlers()
    OWNER.set(SETUP)


def read_call_log(path: str, offset: int = 0) -> tuple[list[Call], int]:
    """The calls logged from ``offset`` (bytes) on, and the new offset."""
    try:
        with open(path) as src:
            src.seek(offset)
            text = src.read()
    except FileNotFoundError:
        return [], offset
    complete = text[: text.rfind("\n") + 1]
    found = [
        Call(
            owner=d["owner"],
            service=d["service"],
            operation=d["operation"],
            pairs=tuple(tuple(p) for p in d["pairs"]),
            unmapped=d["unmapped"],
            thread=d["thread"],
        )
        for d in map(json.loads, complete.splitlines())
        if d
    ]
    return found, offset + len(complete.encode())
