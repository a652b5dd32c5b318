"""The Lambda factory: every function of ``resources.FUNCTIONS`` from one recipe.

Same runtime/architecture, one code asset (only the ``quayutec`` package), one dependency
layer, active tracing, an explicit log group with retention, an own role holding exactly what
``FunctionDef.touches`` names, and only the environment variables ``FunctionDef.reads`` names
(``resources.environment_of``), which its own settings model validates at cold start.
"""

from __future__ import annotations

from typing import cast

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from quayutec import resources as R

from . import checkov, nag
from .build_code import stage_code
from .build_layer import ZIP_NAME, ensure_layer
from .config import LAMBDA_ARCHITECTURE, LAMBDA_RUNTIME, Settings
from .storage import RUN_DATA_PREFIX, Storage

# touch -> table whose name it concerns; op -> the one DynamoDB action it grants. Conditional
# puts and updates (design §2.1); DeleteItem only where Powertools idempotency deletes its
# in-progress record after a failed request. No BatchWriteItem, no Scan.
_TABLE_TOUCHES = {
    "claims": R.CLAIM_TABLE,
    "ledger": R.LEDGER_TABLE,
    "room": R.ROOM_TABLE,
    "idempotency": R.IDEMPOTENCY_TABLE,
}
_TABLE_OPS = {
    "get": "dynamodb:GetItem",
    "batchget": "dynamodb:BatchGetItem",
    "query": "dynamodb:Query",
    "put": "dynamodb:PutItem",
    "update": "dynamodb:UpdateItem",
    "delete": "dynamodb:DeleteItem",
    "check": "dynamodb:ConditionCheckItem",  # a ConditionCheck entry of a transaction
}
_INDEXES = {(t, i.name) for t, tdef in _TABLE_TOUCHES.items() for i in tdef.indexes}

KNOWN_TOUCHES = frozenset(
    {
        *(f"{t}:{op}" for t in _TABLE_TOUCHES for op in _TABLE_OPS),
        *(f"{t}:query@{i}" for t, i in _INDEXES),
        "room:stream",
        "rundata:get",
        "rundata:put",
        "secrets:read",
        "secrets:write",
        "roles:assume",
        "queue:send",
        "queue:consume",
        "states:start",
        "states:answer",
        "states:handoff",
        "files:get",
        "files:getversion",
        "files:put",
        "files:delete",
        "index:get",
        "index:put",
        "index:delete",
        "ingest:consume",
        "apikeys:create",
        "apikeys:read",
    }
)
#: Granted by the Api construct (infra/quayinfra/api.py), which makes the usage plan and the
#: shared key they name.
API_KEY_TOUCHES = frozenset({"apikeys:create", "apikeys:read"})
# Room files (design §8): uploads and index versions are keyed by room and file/version, unknown
# at deploy time; each touch is one object action on one prefix of the files bucket, and the
# bucket action it needs (on that prefix only), if any. The bucket is versioned (design §8).
_FILE_TOUCHES: dict[str, tuple[str | tuple[str, ...], str]] = {
    "files:get": ("s3:GetObject", R.UPLOADS_PREFIX),
    "files:getversion": ("s3:GetObjectVersion", R.UPLOADS_PREFIX),
    "files:put": ("s3:PutObject", R.UPLOADS_PREFIX),
    "files:delete": ("s3:DeleteObjectVersion", R.UPLOADS_PREFIX),
    "index:get": (("s3:GetObject", "s3:GetObjectVersion"), R.INDEX_PREFIX),
    "index:put": ("s3:PutObject", R.INDEX_PREFIX),
    # a lost ingest's own version; a superseded version's retirement (a delete marker)
    "index:delete": (("s3:DeleteObject", "s3:DeleteObjectVersion"), R.INDEX_PREFIX),
}
#: The bucket-level action a file touch needs with its object action, on its prefix only:
#: s3:ListBucket so that a missing upload answers 404 NoSuchKey, not 403 AccessDenied (S3 API
#: reference, HeadObject/GetObject permissions); s3:ListBucketVersions to find every version
#: of an upload to delete.
_FILE_BUCKET_TOUCHES = {
    "files:get": "s3:ListBucket",
    "files:delete": "s3:ListBucketVersions",
}

#: The alias every function is invoked through when SnapStart is on (the snapStart context).
LIVE_ALIAS = "live"

STATE_MACHINE_TOUCH = "states:start"
TASK_ANSWER_TOUCH = "states:answer"
TURN_HANDOFF_TOUCH = "states:handoff"

# Provider keys (design §5): only CallModel reads a value; the API sets or rotates keys without
# reading them (create, on ResourceExistsException put a new version; describe for
# "key_stored").
SECRETS_READ = ["secretsmanager:GetSecretValue"]
SECRETS_WRITE = ["secretsmanager:CreateSecret", "secretsmanager:PutSecretValue", "secretsmanager:DescribeSecret"]


def secret_arn_pattern(scope: Construct, settings: Settings) -> str:
    """The ARN of every provider key of this stage: ``<prefix>/<stage>/*``."""
    return Stack.of(scope).format_arn(
        service="secretsmanager",
        resource="secret",
        resource_name=f"{settings.secret_prefix}/{settings.stage}/*",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def bedrock_role_arn_pattern(scope: Construct) -> str:
    """Every company Bedrock role CallModel may assume (docs/design.md §5): a role named
    ``quayutec-bedrock-*`` in any account of the stack's partition (``R.BEDROCK_ROLE_PREFIX``)."""
    return Stack.of(scope).format_arn(
        service="iam", region="", account="*", resource="role", resource_name=f"{R.BEDROCK_ROLE_PREFIX}*"
    )


#: The cdk-nag IAM5 finding id of :func:`bedrock_role_arn_pattern`.
BEDROCK_ROLE_FINDING = f"Resource::arn:<AWS::Partition>:iam::*:role/{R.BEDROCK_ROLE_PREFIX}*"


def secret_finding(settings: Settings) -> str:
    """The cdk-nag IAM5 finding id of :func:`secret_arn_pattern`."""
    return (
        f"Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:"
        f"secret:{settings.secret_prefix}/{settings.stage}/*"
    )


# Why not the newest runtime (python3.14): not a wheel gap (every locked package has cp314
# manylinux aarch64 wheels too, checked when locking). The suite runs on CPython 3.11, the only
# Python installable on the development machine; 3.13 is the runtime nearest to what was tested
# that still gets the lock's wheels, so no more untested interpreter distance than needed.
L1_REASON = (
    "Python 3.13, not the newest 3.14, on purpose: the tests run on CPython 3.11 (the "
    "only Python installable where they run), and 3.13 keeps the runtime nearer to the "
    "tested interpreter; every locked dependency also has cp314 aarch64 wheels, so "
    "moving up is config.LAMBDA_RUNTIME and build_layer.PYTHON_VERSION/ABI together."
)

XRAY_REASON = (
    "Active tracing: xray:PutTraceSegments/PutTelemetryRecords support no "
    "resource-level permissions, AWS requires Resource '*' "
    "(https://docs.aws.amazon.com/service-authorization/latest/reference/"
    "list_awsx-ray.html)."
)


#: checkov's function checks, acknowledged on every function (tests/infra/test_checkov.py).
FUNCTION_CHECKOV_REASONS = {
    "CKV_AWS_115": (
        "No reserved concurrency: a new account's quota is often 10 and AWS refuses a reservation that "
        "leaves under 100 unreserved; run budgets and API throttling bound the load, `quay preflight` checks the quota"
    ),
    "CKV_AWS_116": (
        "A function dead-letter queue serves asynchronous invocations only: these run synchronously "
        "(Step Functions, API Gateway) or from event sources and EventBridge targets with their own SQS "
        "dead-letter queues"
    ),
    "CKV_AWS_117": (
        "No VPC: the functions reach only AWS service APIs and the model providers' public HTTPS endpoints; "
        "a VPC would add NAT gateways and endpoints without a private resource to protect"
    ),
    "CKV_AWS_173": (
        "The environment holds resource names and settings, no secret (provider keys live in Secrets "
        "Manager); Lambda encrypts it at rest with its service key"
    ),
}
LOG_GROUP_CMK_REASON = (
    "CloudWatch Logs encrypts every log group at rest; the logs hold no secret (provider keys live in "
    "Secrets Manager), so a customer key per group would add a key policy and cost only"
)


class Functions(Construct):
    """``self.functions[logical_id]`` for every FunctionDef; roles from ``touches``."""

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: Settings, storage: Storage, queues: dict[str, sqs.Queue]
    ) -> None:
        super().__init__(scope, construct_id)
        self._settings = settings
        self._storage = storage
        self._queues = queues
        # The deployed package alone, compiled when the runtime's Python is here (build_code).
        self.code = lambda_.Code.from_asset(str(stage_code()))
        layer_dir = ensure_layer()
        self.layer = lambda_.LayerVersion(
            self,
            "DependenciesLayer",
            # A ready zip: CDK neither copies ~100 MB of files nor zips them at each synth.
            code=lambda_.Code.from_asset(str(layer_dir / ZIP_NAME)),
            compatible_runtimes=[LAMBDA_RUNTIME],
            compatible_architectures=[LAMBDA_ARCHITECTURE],
            description="quayutec runtime dependencies (requirements/runtime.lock, boto3 "
            "included), cp313 manylinux_2_34_aarch64 wheels",
        )
        self.environment = self._environment()
        self.functions: dict[str, lambda_.Function] = {}
        # What invokers name (state machine, API Gateway, event sources, EventBridge): the
        # function, or with SnapStart its "live" alias (docs/design.md §10).
        self.targets: dict[str, lambda_.IFunction] = {}
        self.roles: dict[str, iam.Role] = {}
        self.log_groups: dict[str, logs.LogGroup] = {}
        for fdef in R.FUNCTIONS:
            unknown = set(fdef.touches) - KNOWN_TOUCHES
            if unknown:
                raise ValueError(f"{fdef.logical_id}: unknown touches {sorted(unknown)}")
            self._function(fdef)

    # ------------------------------------------------------------------ environment
    def _environment(self) -> dict[str, str]:
        """Every variable's value (STATE_MACHINE_ARN only via bind_state_machine); each function
        gets the ones it reads: :meth:`environment_for`."""
        env: dict[str, str] = {}
        for tdef in R.TABLES:
            env[tdef.env_var] = self._storage.table(tdef).table_name
        for bdef in R.BUCKETS:
            env[bdef.env_var] = self._storage.bucket(bdef).bucket_name
        for qdef in R.QUEUES:
            if qdef.env_var:
                env[qdef.env_var] = self._queues[qdef.logical_id].queue_url
        env.update(self._settings.runtime)
        if self._settings.snap_start:  # CallModel's SDKs into the snapshot
            env[R.PROVIDER_SDKS_AT_INIT_ENV] = "true"
        missing = set(R.ENVIRONMENT_VARIABLES) - set(env) - {R.STATE_MACHINE_ENV}
        if missing:
            raise ValueError(f"no value for environment variables {sorted(missing)}")
        return env

    def environment_for(self, fdef: R.FunctionDef) -> dict[str, str]:
        """What ``fdef`` reads (STATE_MACHINE_ARN: bind_state_machine), nothing else."""
        names = R.environment_of(fdef)
        unknown = set(names) - set(self.environment) - {R.STATE_MACHINE_ENV} - R.OPTIONAL_ENVS
        if unknown:
            raise ValueError(f"{fdef.logical_id} reads {sorted(unknown)}: no value for them")
        return {k: self.environment[k] for k in names if k in self.environment}

    # ------------------------------------------------------------------ one function
    def _function(self, fdef: R.FunctionDef) -> lambda_.Function:
        """Log group, role (from touches), function; registered under fdef.logical_id."""
        settings = self._settings
        log_group = logs.LogGroup(
            self,
            f"{fdef.logical_id}Logs",
            retention=settings.log_retention,
            removal_policy=settings.removal_policy,
        )
        role = iam.Role(
            self,
            f"{fdef.logical_id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"quayutec {fdef.logical_id}: {', '.join(fdef.touches)}",
        )
        # Instead of AWSLambdaBasicExecutionRole: write to its own log group only.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],
            )
        )
        fn = lambda_.Function(
            self,
            fdef.logical_id,
            runtime=LAMBDA_RUNTIME,
            architecture=LAMBDA_ARCHITECTURE,
            handler=fdef.handler,
            code=self.code,
            layers=[self.layer],
            timeout=Duration.seconds(fdef.timeout_s),
            memory_size=fdef.memory_mb,
            environment=self.environment_for(fdef),
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            role=role,
            description=f"quayutec {fdef.handler}",
            # SnapStart snapshots a published version at publish time (docs/design.md §10). An old
            # version is deleted once the alias has moved on: each kept one is cached and billed.
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if settings.snap_start else None,
            current_version_options=lambda_.VersionOptions(removal_policy=RemovalPolicy.DESTROY)
            if settings.snap_start
            else None,
        )
        cast(lambda_.CfnFunction, fn.node.default_child).override_logical_id(fdef.logical_id)
        self.targets[fdef.logical_id] = (
            lambda_.Alias(self, f"{fdef.logical_id}Live", alias_name=LIVE_ALIAS, version=fn.current_version)
            if settings.snap_start
            else fn
        )
        self._grant_tables(fdef, role)
        for touch in fdef.touches:
            if touch.split(":")[0] not in _TABLE_TOUCHES or touch == "room:stream":
                self._grant(fdef, touch, role)
        nag.acknowledge(role, "IAM5", XRAY_REASON, "Resource::*")
        nag.acknowledge(fn, "L1", L1_REASON)
        for check, reason in FUNCTION_CHECKOV_REASONS.items():
            checkov.acknowledge(fn, check, reason)
        checkov.acknowledge(log_group, "CKV_AWS_158", LOG_GROUP_CMK_REASON)
        self.functions[fdef.logical_id] = fn
        self.roles[fdef.logical_id] = role
        self.log_groups[fdef.logical_id] = log_group
        return fn

    def _grant_tables(self, fdef: R.FunctionDef, role: iam.Role) -> None:
        """One statement per table (its item actions) and per index (Query), exactly the
        ``<table>:<op>[@index]`` touches."""
        by_resource: dict[tuple[str, str | None], list[str]] = {}
        for touch in fdef.touches:
            what, _, op = touch.partition(":")
            if what not in _TABLE_TOUCHES or touch == "room:stream":
                continue
            op, _, index = op.partition("@")
            by_resource.setdefault((what, index or None), []).append(_TABLE_OPS[op])
        for (what, index_name), actions in by_resource.items():
            arn = self._storage.table(_TABLE_TOUCHES[what]).table_arn
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=sorted(actions), resources=[f"{arn}/index/{index_name}" if index_name else arn]
                )
            )

    def _grant(self, fdef: R.FunctionDef, touch: str, role: iam.Role) -> None:
        what, mode = touch.split(":")
        if touch == "room:stream":
            self._storage.table(R.ROOM_TABLE).grant_stream_read(role)
            nag.acknowledge(
                role,
                "IAM5",
                "dynamodb:ListStreams has no resource-level permission: AWS requires "
                "Resource '*' (the stream reads themselves are scoped to the room table's "
                "stream ARN).",
                "Resource::*",
            )
        elif what == "rundata":
            bucket = self._storage.bucket(R.RUN_DATA_BUCKET)
            objects = bucket.arn_for_objects(f"{RUN_DATA_PREFIX}*")
            actions = ["s3:GetObject"] if mode == "get" else ["s3:PutObject"]
            role.add_to_policy(iam.PolicyStatement(actions=actions, resources=[objects]))
            if mode == "get":  # so a missing object is a 404, not a 403
                role.add_to_policy(
                    iam.PolicyStatement(
                        actions=["s3:ListBucket"],
                        resources=[bucket.bucket_arn],
                        conditions={"StringLike": {"s3:prefix": f"{RUN_DATA_PREFIX}*"}},
                    )
                )
            nag.acknowledge(
                role,
                "IAM5",
                f"Run data objects are keyed by run id under the '{RUN_DATA_PREFIX}' prefix: "
                "the run ids are not known at deploy time, the prefix is the narrowest scope.",
                f"Resource::<{R.RUN_DATA_BUCKET.logical_id}.Arn>/{RUN_DATA_PREFIX}*",
            )
        elif what == "secrets":
            scope = f"{self._settings.secret_prefix}/{self._settings.stage}/"
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=SECRETS_READ if mode == "read" else SECRETS_WRITE,
                    resources=[secret_arn_pattern(self, self._settings)],
                )
            )
            reason = (
                f"Provider keys are one secret per company and provider under '{scope}' "
                "(design §5), created when agents are registered: the names are not known at "
                "deploy time, the prefix and stage are the narrowest scope. "
            )
            reason += (
                "The handler reads only its agent's company's secret."
                if mode == "read"
                else "The API creates or rotates a key (never reads one), only for the caller's own company."
            )
            nag.acknowledge(role, "IAM5", reason, secret_finding(self._settings))
        elif touch == "roles:assume":
            role.add_to_policy(
                iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[bedrock_role_arn_pattern(self)])
            )
            nag.acknowledge(
                role,
                "IAM5",
                f"A bedrock agent may run under its company's own role, in the company's account "
                f"(docs/design.md §5): the accounts are not known at deploy time, so the grant is every "
                f"role named '{R.BEDROCK_ROLE_PREFIX}*'; the API stores only such ARNs, and each role's "
                "trust policy requires the company's external id, which the service generates.",
                BEDROCK_ROLE_FINDING,
            )
        elif touch in _FILE_TOUCHES:
            action, prefix = _FILE_TOUCHES[touch]
            bucket = self._storage.bucket(R.FILES_BUCKET)
            actions = [action] if isinstance(action, str) else list(action)
            role.add_to_policy(iam.PolicyStatement(actions=actions, resources=[bucket.arn_for_objects(f"{prefix}*")]))
            if touch in _FILE_BUCKET_TOUCHES:
                role.add_to_policy(
                    iam.PolicyStatement(
                        actions=[_FILE_BUCKET_TOUCHES[touch]],
                        resources=[bucket.bucket_arn],
                        conditions={"StringLike": {"s3:prefix": f"{prefix}*"}},
                    )
                )
            nag.acknowledge(
                role,
                "IAM5",
                f"Room files are keyed by room and file id (uploads) or room and version (index) "
                f"under '{prefix}': not known at deploy time, the prefix is the narrowest scope.",
                f"Resource::<{R.FILES_BUCKET.logical_id}.Arn>/{prefix}*",
            )
        elif touch == "ingest:consume":
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
                    resources=[self._queues[R.INGEST_QUEUE.logical_id].queue_arn],
                )
            )
        elif touch == "queue:send":
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["sqs:SendMessage"], resources=[self._queues[R.WAKE_QUEUE.logical_id].queue_arn]
                )
            )
        elif touch == "queue:consume":
            # What an SQS event source mapping needs (Lambda developer guide, "Execution role
            # permissions" for Amazon SQS): no GetQueueUrl, no ChangeMessageVisibility.
            role.add_to_policy(
                iam.PolicyStatement(
                    actions=["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
                    resources=[self._queues[R.WAKE_QUEUE.logical_id].queue_arn],
                )
            )
        elif touch in (STATE_MACHINE_TOUCH, TASK_ANSWER_TOUCH, TURN_HANDOFF_TOUCH):
            pass  # bind_state_machine(), once the state machine exists
        elif touch in API_KEY_TOUCHES:
            pass  # the Api construct, once the usage plan and the shared key exist
        else:  # pragma: no cover - KNOWN_TOUCHES guards this
            raise ValueError(f"{fdef.logical_id}: no grant for {touch!r}")

    # ------------------------------------------------------------------ after the engine
    def bind_state_machine(self, state_machine: sfn.IStateMachine) -> None:
        """STATE_MACHINE_ARN + states:StartExecution for the functions that start runs.

        Only those: the phase functions are referenced by the state machine definition, so
        giving them its ARN would make a dependency cycle."""
        for fdef in R.FUNCTIONS:
            if (STATE_MACHINE_TOUCH in fdef.touches) != (R.STATE_MACHINE_ENV in fdef.reads):
                raise ValueError(
                    f"{fdef.logical_id}: starts runs ({STATE_MACHINE_TOUCH}) if and "
                    f"only if it reads {R.STATE_MACHINE_ENV}"
                )
            if STATE_MACHINE_TOUCH in fdef.touches:
                fn = self.functions[fdef.logical_id]
                fn.add_environment(R.STATE_MACHINE_ENV, state_machine.state_machine_arn)
                state_machine.grant_start_execution(self.roles[fdef.logical_id])
            if TURN_HANDOFF_TOUCH in fdef.touches:  # a company turn handed to a waiting run (design §12.3)
                # A policy of its own: on the function's default policy, the state machine's ARN
                # would make the state machine (which names the function) depend on itself.
                iam.Policy(
                    self,
                    f"{fdef.logical_id}TurnHandoff",
                    roles=[self.roles[fdef.logical_id]],
                    statements=[
                        iam.PolicyStatement(
                            actions=["states:SendTaskSuccess"], resources=[state_machine.state_machine_arn]
                        )
                    ],
                )
            if TASK_ANSWER_TOUCH in fdef.touches:  # approve / deny a held action (design §2.6)
                self.roles[fdef.logical_id].add_to_policy(
                    iam.PolicyStatement(
                        actions=["states:SendTaskSuccess", "states:SendTaskFailure"],
                        resources=[state_machine.state_machine_arn],
                    )
                )

    def target(self, fdef: R.FunctionDef | str) -> lambda_.IFunction:
        """What invokes ``fdef`` names and is granted: its ``live`` alias with SnapStart (a
        qualified ARN), else the function (unqualified)."""
        return self.targets[fdef if isinstance(fdef, str) else fdef.logical_id]

    def __getitem__(self, fdef: R.FunctionDef | str) -> lambda_.Function:
        key = fdef if isinstance(fdef, str) else fdef.logical_id
        return self.functions[key]
