"""One source for every AWS resource the runtime uses: names, key schemas, stream settings,
Lambda functions (handler strings) and the environment variables they read.

The CDK app (``infra/quayinfra``) and the local stack (``infra/quaylocal``) both build their
resources from these definitions, so the deployed and the local runtime cannot drift
(tests compare them). Pure data: importing this module touches no AWS API.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: A company's Bedrock role (docs/design.md §5) is a role whose name starts with this, in the
#: company's own account, without a path: ``arn:aws:iam::<account>:role/quayutec-bedrock-<rest>``
#: (the API refuses any other ARN). CallModel's ``sts:AssumeRole`` is granted on
#: :data:`BEDROCK_ROLE_ARN_PATTERN` only (the stack's partition in place of the first ``*``).
BEDROCK_ROLE_PREFIX = "quayutec-bedrock-"
BEDROCK_ROLE_ARN_PATTERN = f"arn:*:iam::*:role/{BEDROCK_ROLE_PREFIX}*"


# --------------------------------------------------------------------------- tables
@dataclass(frozen=True)
class KeyAttr:
    name: str
    type: str = "S"  # DynamoDB attribute type: S | N | B


@dataclass(frozen=True)
class IndexDef:
    """A global secondary index. There are no local ones (design §14): an LSI caps every item
    collection of its table at 10 GB, keeps a partition key on one partition and can never be
    removed from a table."""

    name: str
    partition_key: KeyAttr
    sort_key: KeyAttr
    # Non-key attributes the index projects (ProjectionType INCLUDE); None: ALL of them. A write
    # that changes no projected attribute writes nothing to the index.
    include: tuple[str, ...] | None = None


@dataclass(frozen=True)
class TableDef:
    logical_id: str
    env_var: str  # environment variable holding the table name
    default_name: str  # name used by the local stack
    partition_key: KeyAttr
    sort_key: KeyAttr | None = None
    indexes: tuple[IndexDef, ...] = ()
    stream: str | None = None  # StreamViewType, e.g. NEW_AND_OLD_IMAGES
    ttl_attribute: str | None = None


ROOM_TABLE = TableDef(
    logical_id="RoomTable",
    env_var="ROOM_TABLE_NAME",
    default_name="quayutec-room",
    partition_key=KeyAttr("pk"),
    sort_key=KeyAttr("sk"),
    indexes=(
        # Time order of a room's messages, of each memory partition and of its tasks (design §14):
        # gsi2pk = the item's own partition (a task: "ROOM#{room}#TASKS"), gsi2sk = "{created_at}#{id}".
        IndexDef("by_time", KeyAttr("gsi2pk"), KeyAttr("gsi2sk")),
        # Sparse index of open tasks per (room, assignee).
        IndexDef("open_tasks", KeyAttr("gsi1pk"), KeyAttr("gsi1sk")),
        # Approval requests per (room, owning company), design §14: gsi3pk =
        # "APPROVALS#{room}#{company}", gsi3sk = "{created_at}#{run}#{index}" (approval rows only).
        IndexDef("approvals_by_company", KeyAttr("gsi3pk"), KeyAttr("gsi3sk")),
        # What changed in a room, by kind, for the room page's one poll (design §9, §14): gsi4pk =
        # "CHANGES#{room}#tasks" | "…#files" | "…#approvals#{company}", gsi4sk =
        # "{changed_at}#{id}", moved by every write that changes the item.
        IndexDef("changes", KeyAttr("gsi4pk"), KeyAttr("gsi4sk")),
    ),
    # The outbox that drives wakes (docs/design.md §3): the relay reads an inserted item's new
    # image only (NEW_IMAGE, the smallest view that carries the wakes).
    stream="NEW_IMAGE",
)

#: The attribute every room item that carries ``wakes`` also carries (``True``): a scalar the
#: stream's event filter can match, so only inserts with wakes invoke WakeRelay.
HAS_WAKES_ATTR = "has_wakes"
#: The room stream's event filter (a Lambda ``FilterCriteria`` pattern, docs/design.md §3): the
#: CDK app sets it on the event source mapping and the local pump applies the same pattern. A
#: record it drops never reaches the function (no invocation, nothing to retry).
ROOM_STREAM_FILTER: dict = {"eventName": ["INSERT"], "dynamodb": {"NewImage": {HAS_WAKES_ATTR: {"BOOL": [True]}}}}

CLAIM_TABLE = TableDef(
    logical_id="ClaimTable",
    env_var="CLAIM_TABLE_NAME",
    default_name="quayutec-claims",
    partition_key=KeyAttr("agent_id"),
    sort_key=KeyAttr("wake_id"),
)

#: What the active-runs indexes hold of a run: what the stop path needs (design §12.2).
ACTIVE_RUN_FIELDS = ("run_id", "room_id", "agent_id", "chain_id", "status")

#: What ``live_by_room`` holds of an item: the agent and, of a refused wake, why and its cause.
LIVE_FIELDS = ("agent_id", "reason", "cause_kind", "cause_id")

LEDGER_TABLE = TableDef(
    logical_id="LedgerTable",
    env_var="LEDGER_TABLE_NAME",
    default_name="quayutec-ledger",
    partition_key=KeyAttr("pk"),
    sort_key=KeyAttr("sk"),
    indexes=(
        # A room's runs and refused wakes, per company (design §14): gsi1pk = "ROOM#{room}" or
        # "NOT_STARTED#{room}", gsi1sk = "{company}#{started_at}#{run}": a company's page reads
        # its own items only.
        IndexDef("runs_by_room", KeyAttr("gsi1pk"), KeyAttr("gsi1sk")),
        # Sparse: runs without a final status, by agent and by chain (design §12.2: the stop path)
        IndexDef("active_by_agent", KeyAttr("active_agent"), KeyAttr("started_at"), include=ACTIVE_RUN_FIELDS),
        IndexDef("active_by_chain", KeyAttr("active_chain"), KeyAttr("started_at"), include=ACTIVE_RUN_FIELDS),
        # A company's runs in a room by the time of their last change (design §9, §14): chg_pk =
        # "CHANGES#{room}#runs#{company}", chg_sk = "{changed_at}#{run}" (run entries only).
        IndexDef("run_changes", KeyAttr("chg_pk"), KeyAttr("chg_sk")),
        # Sparse: what every member of a room may know is going on (design §9, §14): live_room =
        # the room, live_sk = "~run#{started_at}#{run}" for a run in flight (removed by its final
        # write) or "{at}#{agent}#{wake}" for a refused wake: the room's busy agents and why a
        # message woke no one, in the changes poll's one range.
        IndexDef("live_by_room", KeyAttr("live_room"), KeyAttr("live_sk"), include=LIVE_FIELDS),
    ),
)

IDEMPOTENCY_TABLE = TableDef(
    logical_id="IdempotencyTable",
    env_var="IDEMPOTENCY_TABLE_NAME",
    default_name="quayutec-idempotency",
    partition_key=KeyAttr("id"),
    ttl_attribute="expiration",
)

TABLES: tuple[TableDef, ...] = (ROOM_TABLE, CLAIM_TABLE, LEDGER_TABLE, IDEMPOTENCY_TABLE)


# --------------------------------------------------------------------------- buckets, queues
@dataclass(frozen=True)
class BucketDef:
    logical_id: str
    env_var: str
    default_name: str


RUN_DATA_BUCKET = BucketDef("RunDataBucket", "RUN_DATA_BUCKET", "quayutec-run-data")
RUN_DATA_PREFIX = "runs/"  # run data objects: runs/{run_id}/{name}.json
# Room files (design §8): a bucket of its own, so the run-data expiry and the upload CORS stay apart.
#   uploads/{room_id}/{file_id}        what a member uploaded (a presigned POST), as uploaded
#   index/{room_id}/{version}-{nonce}  the room's retrieval index, one immutable object per version
FILES_BUCKET = BucketDef("FilesBucket", "FILES_BUCKET", "quayutec-files")
UPLOADS_PREFIX = "uploads/"
INDEX_PREFIX = "index/"
#: The largest file a member may upload (S3 presigned POST content-length-range; checked again
#: at ingest on the object's real size).
MAX_UPLOAD_BYTES = 25 * 1024 * 1024
BUCKETS: tuple[BucketDef, ...] = (RUN_DATA_BUCKET, FILES_BUCKET)


@dataclass(frozen=True)
class QueueDef:
    logical_id: str
    env_var: str | None
    default_name: str
    visibility_timeout_s: int = 60
    dead_letter: str | None = None  # logical id of the DLQ
    max_receive_count: int = 5


WAKE_DLQ = QueueDef("WakeDeadLetterQueue", None, "quayutec-wakes-dlq")
#: The wake queue's URL variable (WAKE_QUEUE.env_var, as a str: the other queues have none).
WAKE_QUEUE_ENV = "WAKE_QUEUE_URL"
# Visibility: AWS asks for at least 6x the consumer's timeout (WakeConsumerFunction: 30 s), so
# that a batch retried after throttling is not handed to a second consumer meanwhile.
WAKE_QUEUE = QueueDef(
    "WakeQueue", WAKE_QUEUE_ENV, "quayutec-wakes", visibility_timeout_s=180, dead_letter="WakeDeadLetterQueue"
)
# Failure records (stream batches, EventBridge deliveries, reconciler invocations that keep
# failing): never redriven to the wake consumer.
FAILED_EVENTS_QUEUE = QueueDef("FailedEventsQueue", None, "quayutec-failed-events")
# S3 events of the files bucket (uploads/ created or removed) for the ingest function: the queue
# gives redelivery and a dead-letter queue (S3 -> Lambda directly gives neither on moto).
# Visibility: 6x the ingest function's timeout (300 s).
INGEST_DLQ = QueueDef("IngestDeadLetterQueue", None, "quayutec-ingest-dlq")
INGEST_QUEUE = QueueDef(
    "IngestQueue",
    None,
    "quayutec-ingest",
    visibility_timeout_s=1800,
    dead_letter="IngestDeadLetterQueue",
    max_receive_count=3,
)
QUEUES: tuple[QueueDef, ...] = (WAKE_DLQ, WAKE_QUEUE, FAILED_EVENTS_QUEUE, INGEST_DLQ, INGEST_QUEUE)

#: How long a presigned upload form or download URL of a room file is valid (seconds).
UPLOAD_URL_EXPIRES_S = 900
#: Slack for the last ingest attempt's own run and the queue's delivery delays (seconds).
UPLOAD_GRACE_MARGIN_S = 300
#: How long after its declaration a file may still read ``uploading`` (seconds, design §8): the
#: form's life, then every delivery of its S3 event the ingest queue makes (each one returns after
#: the queue's visibility timeout when an ingest fails: ``max_receive_count`` of them before the
#: dead-letter queue), and a margin. Derived from the queue, so a retry never lands after the file
#: already reads "the upload never arrived".
UPLOAD_GRACE_S = (
    UPLOAD_URL_EXPIRES_S + INGEST_QUEUE.visibility_timeout_s * INGEST_QUEUE.max_receive_count + UPLOAD_GRACE_MARGIN_S
)

STATE_MACHINE_ENV = "STATE_MACHINE_ARN"
STATE_MACHINE_DEFAULT_NAME = "quayutec-agent-run"
STATE_MACHINE_LOGICAL_ID = "AgentRunStateMachine"  # its logical id in the CDK template
STATE_MACHINE_FILE = "agent_run.asl.json"

# ${Partition} in the ASL: the partition of the deployment (Aws.PARTITION in the CDK app, "aws"
# locally), so no ARN in the definition names a partition literally.
ASL_PARTITION_PLACEHOLDER = "Partition"

SECRET_PREFIX_ENV = "SECRET_PREFIX"
DEFAULT_SECRET_PREFIX = "quayutec"
# Secrets are named {SECRET_PREFIX}/{STAGE}/{company}/{provider}: a dev stage in the same
# account never reads or overwrites prod's keys.
STAGE_ENV = "STAGE"
DEFAULT_STAGE = "dev"


# --------------------------------------------------------------------------- functions
# Settings groups read by the run phases (quayutec.logic.phases): the active-time budget each phase
# returns, the context sizes ClaimAndRead reads, the name of a company's provider key.
_RUN_BUDGET = ("RUN_TIME_LIMIT_SECONDS",)
_CONTEXT_SIZES = ("RECENT_MESSAGES", "MEMORY_LINES", "FILE_PASSAGES")
#: The limits on what one item holds (SETTING_DEFAULTS; read by the API, which enforces them).
LIMIT_ENVS = ("MAX_ROOM_AGENTS", "MAX_ROOM_MEMBERS", "MAX_COMPANY_PEOPLE", "MAX_POLICY_RULES")
_SECRET_NAMES = ("SECRET_PREFIX", "STAGE")
_COST = ("MODEL_PRICES",)  # every run phase carries the cost line (quayutec.cost.line)
#: Fair turns (design §12.3): a turn's lease, read by every function that takes, hands on or
#: ends one; how often a waiting run looks again, read by ClaimAndRead (it hands it to the ASL).
_TURN_LEASE = ("TURN_LEASE_SECONDS",)
#: What ending a run's company turn does (design §12.3): its HOLD deleted and the counter updated
#: in one transaction, or, with runs in line, the oldest one's HOLD put, its WAIT deleted (found
#: by a query) and its task token answered with SendTaskSuccess.
_TURN_END = ("ledger:query", "ledger:put", "ledger:update", "ledger:delete", "states:handoff")
# Optional endpoint overrides (an operator's proxy, or the local provider server).
ENDPOINT_OVERRIDE_ENVS: tuple[str, ...] = (
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "BEDROCK_ENDPOINT_URL",
)
# Local stack only (quay dev): the address that serves the files bucket's presigned upload and
# download URLs (the dev server forwards them to moto). Never set by the CDK app.
FILES_ENDPOINT_ENV = "FILES_ENDPOINT_URL"
# Set ("true") by the CDK app on CallModel when SnapStart is on (the snapStart context): the
# handler imports every provider SDK at init, where the snapshot holds them (docs/design.md §10).
PROVIDER_SDKS_AT_INIT_ENV = "PROVIDER_SDKS_AT_INIT"
# Per-company API throttling (docs/design.md §5): the stage's one usage plan (its name, set on the
# ApiFunction, which puts each new company's API key in it) and the shared key of operators and
# companies created before per-company keys (its id, set on the AuthorizerFunction). Set by the
# CDK app (infra/quayinfra/api.py) and the local stack; unset, companies get no key of their own
# and the authorizer answers no usageIdentifierKey (a stack without a usage plan).
USAGE_PLAN_NAME_ENV = "USAGE_PLAN_NAME"
SHARED_API_KEY_ID_ENV = "SHARED_API_KEY_ID"
API_KEY_ENVS = (USAGE_PLAN_NAME_ENV, SHARED_API_KEY_ID_ENV)
# FILES_ENDPOINT_ENV and PROVIDER_SDKS_AT_INIT_ENV are optional too: off unless set.
OPTIONAL_ENVS = frozenset({*ENDPOINT_OVERRIDE_ENVS, FILES_ENDPOINT_ENV, PROVIDER_SDKS_AT_INIT_ENV, *API_KEY_ENVS})

#: The stage's throttle (API Gateway stage settings): every caller together, the overall cap.
STAGE_THROTTLE_RATE = 50  # requests per second, steady
STAGE_THROTTLE_BURST = 100
#: Each company's own throttle (the usage plan's, applied per API key; CDK context
#: ``companyThrottleRate`` / ``companyThrottleBurst``; docs/design.md §5, docs/deploy.md).
DEFAULT_COMPANY_THROTTLE_RATE = 10  # requests per second, steady
DEFAULT_COMPANY_THROTTLE_BURST = 20
#: The CDK logical ids of the usage plan and the shared key (the IAM check's canonical names).
USAGE_PLAN_LOGICAL_ID = "ApiUsagePlan"
SHARED_API_KEY_LOGICAL_ID = "SharedApiKey"


def usage_plan_name(stage: str) -> str:
    """The stage's usage plan: ``quayutec-{stage}`` (one stack per stage and account)."""
    return f"quayutec-{stage}"


def company_api_key_name(stage: str, company: str) -> str:
    """A company's API key (its throttle identity, never shown to callers): ``quay-{stage}-{company}``."""
    return f"quay-{stage}-{company}"


def shared_api_key_name(stage: str) -> str:
    """The key operators and companies without a key of their own share: ``quay-{stage}--shared``
    (two dashes: no company id gives this name)."""
    return f"quay-{stage}--shared"


#: Lambda gives a function CPU in proportion to its memory: 1,769 MB is one whole vCPU, and no
#: more helps single-threaded Python (docs/design.md §10, "Cold starts").
ONE_VCPU_MB = 1769


@dataclass(frozen=True)
class FunctionDef:
    logical_id: str
    handler: str  # "module.attr", importable from the deployed package
    asl_placeholder: str | None = None  # ${Name} in the ASL, substituted with the function ARN
    timeout_s: int = 30
    memory_mb: int = 512
    # Exactly what its role may do (least privilege; each grant is used by a call of the test
    # suite or has its reason in quaylab.iam_check.UNUSED_GRANT_REASONS):
    #   "<table>:<op>"           op: get | batchget | query | put | update | delete, on claims | ledger | room
    #                            | idempotency (GetItem, Query, PutItem, UpdateItem, DeleteItem)
    #   "<table>:query@<index>"  Query on one of the table's indexes
    #   "rundata:get|put"        run data objects under runs/ ; "secrets:read|write" provider keys
    #   "roles:assume"           sts:AssumeRole on the companies' Bedrock roles, only those whose
    #                            name starts with BEDROCK_ROLE_PREFIX, in any account (docs/design.md §5)
    #   "files:get|put"          uploaded room files under uploads/ (put: signs the upload POST; get:
    #                            the current version, with s3:ListBucket so a missing one is a 404)
    #   "files:getversion"       one version of an upload (s3:GetObjectVersion: ingest's read, the
    #                            presigned download)
    #   "files:delete"           every version of an upload (ListBucketVersions, DeleteObjectVersion)
    #   "index:get|put|delete"   the rooms' retrieval index objects under index/ (get: by version;
    #                            delete: a lost ingest's version, a superseded one's delete marker)
    #   "ingest:consume"         the ingest queue (S3 events of uploads/)
    #   "room:stream"            the room table's stream (an event source mapping)
    #   "queue:send|consume"     the wake queue ; "states:start" | "states:answer" the state machine
    #                            (StartExecution | SendTaskSuccess/SendTaskFailure)
    #   "states:handoff"         SendTaskSuccess only: a company turn handed to a waiting run
    #                            (design §12.3)
    #   "apikeys:create"         a company's API key in the stage's usage plan (API Gateway GetUsagePlans,
    #                            GetApiKeys, CreateApiKey, CreateUsagePlanKey; docs/design.md §5)
    #   "apikeys:read"           the shared API key's value (GetApiKey on that one key)
    touches: tuple[str, ...] = field(default_factory=tuple)
    # The environment variables its code reads (resource names and settings): it gets only these
    # (plus ALWAYS_ENVS), validated at cold start by its own model (quayutec.settings).
    reads: tuple[str, ...] = ()

    def __post_init__(self) -> None:  # a touch named twice (a shared group) is one grant
        object.__setattr__(self, "touches", tuple(dict.fromkeys(self.touches)))


FUNCTIONS: tuple[FunctionDef, ...] = (
    # Adjacent phases whose order is kept inside one invocation share a function (issue 13):
    # claim then read the room; decide then post; apply then finish. CallModel stays alone: the
    # only function that reads provider keys.
    FunctionDef(
        "ClaimAndReadFunction",
        "quayutec.handlers.claim_and_read.handler",
        "ClaimAndReadFunctionArn",
        touches=(
            "claims:put",  # the claim's holder comes back with a failed condition (ALL_OLD): no get
            "ledger:get",
            "ledger:put",
            "ledger:update",  # the chain's counter, in the claim's transaction
            "ledger:batchget",  # the chain's counter, in the run's key reads
            "room:batchget",
            "room:put",  # a full chain's one notice
            "room:update",  # a refused wake noted on its message (not_woken), in the refusal's transaction
            "room:check",  # the agent not paused, in the claim's transaction
            "room:query@by_time",
            "room:query@open_tasks",
            "rundata:put",
            "index:get",
        ),  # its company turn (design §12.3): the counter and its HOLD, one transaction (put, update)
        reads=(
            CLAIM_TABLE.env_var,
            LEDGER_TABLE.env_var,
            ROOM_TABLE.env_var,
            RUN_DATA_BUCKET.env_var,
            FILES_BUCKET.env_var,
            *_RUN_BUDGET,
            *_CONTEXT_SIZES,
            "APPROVAL_TIMEOUT_SECONDS",
            *_TURN_LEASE,
            "TURN_RECHECK_SECONDS",
            *_COST,
        ),
    ),
    # A run without a free turn of its company waits (design §12.3): it joins the line with its
    # task token (lambda:invoke.waitForTaskToken) and hands free or expired turns to the oldest.
    FunctionDef(
        "WaitForTurnFunction",
        "quayutec.handlers.wait_for_turn.handler",
        "WaitForTurnFunctionArn",
        touches=("ledger:get", *_TURN_END),
        reads=(LEDGER_TABLE.env_var, *_TURN_LEASE),
    ),
    FunctionDef(
        "CallModelFunction",
        "quayutec.handlers.call_model.handler",
        "CallModelFunctionArn",
        timeout_s=300,
        touches=(
            "room:get",
            "room:batchget",  # the company's budget, with its spend counters (design §12.4)
            "room:put",  # a budget's company-only notices
            "room:check",  # the stop guard (agent not paused), in the request record's transaction
            "ledger:query",
            "ledger:put",
            "ledger:batchget",  # the company's spend counters
            "ledger:update",  # the spend counters; a run stopped before its request: its final status
            "ledger:check",  # the stop guard (chain not stopped)
            "rundata:get",
            "rundata:put",
            "secrets:read",
            "roles:assume",  # a bedrock agent's company role (docs/design.md §5)
            *_TURN_END,  # a run stopped before its request ends its turn
        ),
        reads=(
            ROOM_TABLE.env_var,
            LEDGER_TABLE.env_var,
            RUN_DATA_BUCKET.env_var,
            *_RUN_BUDGET,
            *_TURN_LEASE,
            "MODEL_TIMEOUT_SECONDS",
            *_SECRET_NAMES,
            *ENDPOINT_OVERRIDE_ENVS,
            PROVIDER_SDKS_AT_INIT_ENV,
            *_COST,
        ),
    ),
    FunctionDef(
        "DecideAndPostFunction",
        "quayutec.handlers.decide_and_post.handler",
        "DecideAndPostFunctionArn",
        touches=(
            "room:get",
            "room:batchget",  # the agents a reply names (its mentions, its actions' targets)
            "room:put",
            "room:check",  # the stop guard, in the reply's transaction
            "ledger:get",
            "ledger:query",
            "ledger:put",
            "ledger:update",
            "ledger:check",
            "rundata:get",
            *_TURN_END,
        ),
        reads=(
            ROOM_TABLE.env_var,
            LEDGER_TABLE.env_var,
            RUN_DATA_BUCKET.env_var,
            *_RUN_BUDGET,
            "HOP_LIMIT",
            *_TURN_LEASE,
            *_COST,
        ),
    ),
    FunctionDef(
        "RequestApprovalFunction",
        "quayutec.handlers.request_approval.handler",
        "RequestApprovalFunctionArn",
        touches=(
            "room:get",
            "room:put",
            "room:update",
            "room:check",  # the stop guard, in the approval request's transaction
            "ledger:get",
            "ledger:check",
            *_TURN_END,  # a run parked on approvals gives its turn back
        ),
        reads=(ROOM_TABLE.env_var, LEDGER_TABLE.env_var, *_TURN_LEASE, *_COST),
    ),
    FunctionDef(
        "ApplyAndFinishFunction",
        "quayutec.handlers.apply_and_finish.handler",
        "ApplyAndFinishFunctionArn",
        touches=(
            "room:get",
            "room:put",
            "room:update",
            "room:check",  # the stop guard, in each action write's transaction
            "ledger:get",
            "ledger:check",
            *_TURN_END,
        ),
        reads=(ROOM_TABLE.env_var, LEDGER_TABLE.env_var, *_RUN_BUDGET, "HOP_LIMIT", *_TURN_LEASE, *_COST),
    ),
    FunctionDef(
        "RecordFailureFunction",
        "quayutec.handlers.record_failure.handler",
        "RecordFailureFunctionArn",
        touches=(
            "room:get",
            "room:put",  # the notices of a run that ended without its reply (design §2)
            "room:update",
            "ledger:get",
            *_TURN_END,  # its turn, or its place in line (a delete and the counter)
        ),
        reads=(ROOM_TABLE.env_var, LEDGER_TABLE.env_var, *_TURN_LEASE, *_COST),
    ),
    FunctionDef(
        "WakeRelayFunction",
        "quayutec.handlers.wake_relay.handler",
        touches=("room:stream", "queue:send"),
        reads=(WAKE_QUEUE_ENV, ROOM_TABLE.env_var),
    ),  # records of the room table's stream only
    FunctionDef(
        "WakeConsumerFunction",
        "quayutec.handlers.wake_consumer.handler",
        touches=("queue:consume", "states:start", "ledger:update"),
        reads=(LEDGER_TABLE.env_var, STATE_MACHINE_ENV),
    ),
    FunctionDef(
        "ReconcilerFunction",
        "quayutec.handlers.reconciler.handler",
        # ledger:put: a request left pending when the execution ended is recorded "lost" (its
        # outcome is a put of the request's item, as CallModel writes it)
        # room:put: the notices of a run that ended without its reply (design §2)
        # the turn of a run whose execution died, or its place in line (design §12.3)
        touches=("room:get", "room:put", "room:update", "ledger:get", *_TURN_END),
        reads=(ROOM_TABLE.env_var, LEDGER_TABLE.env_var, *_TURN_LEASE),
    ),
    # The room API behind API Gateway (issue 4). API Gateway's integration timeout is 29 s.
    # It sets or rotates provider keys ("secrets:write": create / put / describe, never
    # GetSecretValue: only CallModel reads keys); infra/quayinfra/api.py also grants it the
    # answers to approval task tokens.
    FunctionDef(
        "ApiFunction",
        "quayutec.handlers.api.handler",
        timeout_s=29,
        memory_mb=ONE_VCPU_MB,  # a cold start is CPU-bound imports: a whole vCPU (docs/design.md §10)
        touches=(
            "room:get",
            "room:query",
            "room:query@by_time",
            "room:put",
            "room:update",
            "ledger:get",
            "ledger:query",
            "ledger:query@runs_by_room",
            "room:query@approvals_by_company",  # a company's approval requests in a room
            "room:query@changes",  # a room's changes since a cursor (design §9)
            "ledger:query@run_changes",  # ... and its company's runs among them
            "ledger:batchget",  # a company's spend counters, with its budget (design §12.4)
            "room:batchget",
            "ledger:query@active_by_agent",  # a pause and a chain's stop reach the runs they stop
            "ledger:query@active_by_chain",
            "ledger:query@live_by_room",  # a room's busy agents and refused wakes (design §9)
            "ledger:update",  # a chain's stop flag (its counter item)
            "idempotency:get",
            "idempotency:put",
            "idempotency:update",
            "idempotency:delete",
            "secrets:write",
            "states:answer",
            "files:get",  # the download of a file ingested before versioning (no version id)
            "files:put",
            "files:getversion",  # the presigned download names the ingested version (design §8)
            "files:delete",
            "room:delete",
            "rundata:get",  # a replay reads a reply too large for the ledger (design §5)
            "apikeys:create",  # a new company's API key, its own throttle (docs/design.md §5)
        ),
        reads=(
            ROOM_TABLE.env_var,
            LEDGER_TABLE.env_var,
            IDEMPOTENCY_TABLE.env_var,
            FILES_BUCKET.env_var,
            RUN_DATA_BUCKET.env_var,
            *_SECRET_NAMES,
            FILES_ENDPOINT_ENV,
            *LIMIT_ENVS,
            USAGE_PLAN_NAME_ENV,
        ),
    ),
    # Room files (design §8): S3 events of uploads/ through the ingest queue. Extracts the text,
    # chunks it and writes the room's next index version (a conditional version pointer).
    FunctionDef(
        "IngestFunction",
        "quayutec.handlers.ingest.handler",
        timeout_s=300,
        memory_mb=1024,
        touches=(
            "ingest:consume",
            "files:get",  # the current version's head
            "files:getversion",  # the version read
            "files:delete",  # an upload whose file was deleted (a form issued before the delete)
            "index:get",
            "index:put",
            "index:delete",  # the index version an ingest wrote and did not commit
            "room:get",
            "room:update",  # the file record and the index pointer, in one transaction
        ),
        reads=(ROOM_TABLE.env_var, FILES_BUCKET.env_var, "MAX_FILE_CHUNKS"),
    ),
    FunctionDef(
        "AuthorizerFunction",
        "quayutec.handlers.authorizer.handler",
        timeout_s=10,
        memory_mb=ONE_VCPU_MB,  # in series before a cold API: the same vCPU (docs/design.md §10)
        # room:get: the token, then its company's API key; apikeys:read: the shared key's value
        touches=("room:get", "apikeys:read"),
        reads=(ROOM_TABLE.env_var, SHARED_API_KEY_ID_ENV),
    ),
)

FUNCTIONS_BY_ID = {f.logical_id: f for f in FUNCTIONS}
FUNCTIONS_BY_HANDLER = {f.handler: f for f in FUNCTIONS}


# --------------------------------------------------------------------------- environment
# Names here, values from the deployment (CDK: quayinfra.config) or the local stack. Each function
# gets the variables of FunctionDef.reads (that have a value) and ALWAYS_ENVS: environment_of().
SETTING_DEFAULTS: dict[str, str] = {
    "HOP_LIMIT": "8",
    "APPROVAL_TIMEOUT_SECONDS": "86400",
    "RUN_TIME_LIMIT_SECONDS": "300",
    "TURN_LEASE_SECONDS": "420",  # a company turn's lease (design §12.3): past the run time limit
    "TURN_RECHECK_SECONDS": "60",  # how often a run waiting for a turn looks again
    "MODEL_TIMEOUT_SECONDS": "120",
    "RECENT_MESSAGES": "50",
    "MEMORY_LINES": "100",
    "FILE_PASSAGES": "5",
    "MAX_FILE_CHUNKS": "100000",  # chunks in one room's index (ingest refuses a file past it)
    # What one item may hold (docs/design.md §1, "Limits"): past one, the API answers 409 limit_reached.
    "MAX_ROOM_AGENTS": "1000",  # agents placed in one room (the room item's agents map)
    "MAX_ROOM_MEMBERS": "50",  # member companies of one room
    "MAX_COMPANY_PEOPLE": "1000",  # people of one company (the company item)
    "MAX_POLICY_RULES": "500",  # agents with rules of their own in a company's policy
    # The cost line's model prices (USD per million tokens), over the built-in ones:
    # {"model-id": {"input": usd, "output": usd}} (quayutec.cost.prices.MODEL_PRICES).
    "MODEL_PRICES": "{}",
    SECRET_PREFIX_ENV: DEFAULT_SECRET_PREFIX,
    STAGE_ENV: DEFAULT_STAGE,
    "POWERTOOLS_SERVICE_NAME": "quayutec",
    "POWERTOOLS_METRICS_NAMESPACE": "Quayutec",
}


RESOURCE_ENVS: tuple[str, ...] = (
    *(t.env_var for t in TABLES),
    *(b.env_var for b in BUCKETS),
    *(q.env_var for q in QUEUES if q.env_var),
    STATE_MACHINE_ENV,
)

ENVIRONMENT_VARIABLES: tuple[str, ...] = (*RESOURCE_ENVS, *SETTING_DEFAULTS)

# Every function gets these whatever it reads (Powertools reads them itself).
ALWAYS_ENVS: tuple[str, ...] = ("POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE")


def environment_of(fdef: FunctionDef) -> tuple[str, ...]:
    """The environment variable names ``fdef`` is deployed with: what it reads, and ALWAYS_ENVS
    (optional ones only when given a value)."""
    return (*fdef.reads, *(e for e in ALWAYS_ENVS if e not in fdef.reads))
