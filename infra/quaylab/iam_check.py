"""Check recorded AWS calls against the roles of the synthesized CloudFormation template
(design §11: moto enforces no IAM, so the suite does).

* :class:`Roles` reads every function's role, the state machine's role, and their statements
  (inline policies and ``AWS::IAM::Policy`` resources) from the template, resolving ``Ref``,
  ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub``, ``Fn::Select``/``Fn::Split`` to the canonical ARNs
  of :mod:`quaylocal.calls` (logical ids as names, the local account and region).
* :meth:`Roles.allows` matches an action and a resource with moto's policy evaluator
  (``moto.iam.access_control.IAMPolicyStatement``: wildcards in actions and resources). It
  fails closed where that evaluator has gaps: a statement with ``NotResource``, ``NotAction``,
  ``NotPrincipal`` or a ``Condition`` grants nothing here (moto treats ``NotResource`` as allowed
  and knows only ``StringEquals``), unless :data:`CONDITIONS_EVALUATED` says the condition is
  satisfied for that action by construction.
* :meth:`Roles.unused_grants` lists every (role, action, resource) of an Allow statement that no
  recorded call used.

Pure reading: no AWS call, no CDK import (the template is JSON).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from moto.iam.access_control import IAMPolicyStatement, PermissionResult

from quaylocal import calls as C

#: Conditions the evaluator accepts for an action: ``(action, condition JSON) -> why``.
#: Every other conditional statement fails closed.
CONDITIONS_EVALUATED: dict[tuple[str, str], str] = {
    (
        "s3:ListBucketVersions",
        '{"StringLike": {"s3:prefix": "uploads/*"}}',
    ): "The only ListObjectVersions call (quayutec.dal.files.FileStore.delete_upload) passes "
    "Prefix=uploads/{room}/{file}: the s3:prefix condition holds by construction.",
}


class TemplateError(ValueError):
    """An expression of the template this reader cannot resolve."""


@dataclass(frozen=True)
class Statement:
    role: str  # logical id of the role
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    raw: dict[str, Any] = field(hash=False, compare=False)
    policy: str = ""  # logical id of the policy resource ("" for an inline policy)

    @property
    def evaluable(self) -> bool:
        return not ({"NotResource", "NotAction", "NotPrincipal", "Condition"} & set(self.raw))


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


class Resolver:
    """Template expressions → canonical strings (see :mod:`quaylocal.calls`)."""

    def __init__(self, resources: dict[str, dict]) -> None:
        self.resources = resources

    def __call__(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        if not isinstance(value, dict) or len(value) != 1:
            raise TemplateError(f"cannot resolve {value!r}")
        ((fn, arg),) = value.items()
        if fn == "Ref":
            return self.ref(arg)
        if fn == "Fn::GetAtt":
            logical, attr = arg if isinstance(arg, list) else arg.split(".", 1)
            return self.get_att(logical, attr)
        if fn == "Fn::Join":
            sep, parts = arg
            return sep.join(self(p) for p in parts)
        if fn == "Fn::Select":
            index, items = arg
            items = self(items).split("\x00") if isinstance(items, dict) else [self(i) for i in items]
            return items[int(index)]
        if fn == "Fn::Split":
            sep, text = arg
            return "\x00".join(self(text).split(sep))
        if fn == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else arg
            for name, expr in variables.items():
                text = text.replace("${" + name + "}", self(expr))
            while "${" in text:
                start = text.index("${")
                end = text.index("}", start)
                name = text[start + 2 : end]
                repl = self.ref(name) if "." not in name else self.get_att(*name.split(".", 1))
                text = text[:start] + repl + text[end + 1 :]
            return text
        raise TemplateError(f"unsupported intrinsic {fn}")

    def ref(self, name: str) -> str:
        pseudo = {
            "AWS::Partition": C.PARTITION,
            "AWS::Region": C.REGION,
            "AWS::AccountId": C.ACCOUNT,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "Quayutec",
        }
        if name in pseudo:
            return pseudo[name]
        rtype = self._type(name)
        if rtype == "AWS::SQS::Queue":
            return f"https://sqs.{C.REGION}.amazonaws.com/{C.ACCOUNT}/{name}"
        if rtype == "AWS::StepFunctions::StateMachine":
            return C.state_machine_arn(name)
        if rtype in (
            "AWS::S3::Bucket",
            "AWS::DynamoDB::Table",
            "AWS::Lambda::Function",
            "AWS::Logs::LogGroup",
            "AWS::IAM::Role",
            "AWS::SNS::Topic",
            "AWS::ApiGateway::UsagePlan",  # its id (the local stack registers the name)
            "AWS::ApiGateway::ApiKey",
        ):
            if rtype == "AWS::SNS::Topic":
                return f"arn:{C.PARTITION}:sns:{C.REGION}:{C.ACCOUNT}:{name}"
            return name
        raise TemplateError(f"Ref {name} ({rtype})")

    def get_att(self, name: str, attr: str) -> str:
        rtype = self._type(name)
        arn = {
            ("AWS::DynamoDB::Table", "Arn"): lambda: C.table_arn(name),
            ("AWS::DynamoDB::Table", "StreamArn"): lambda: f"{C.table_arn(name)}/stream/{C.STREAM_LABEL}",
            ("AWS::SQS::Queue", "Arn"): lambda: f"arn:{C.PARTITION}:sqs:{C.REGION}:{C.ACCOUNT}:{name}",
            ("AWS::SQS::Queue", "QueueName"): lambda: name,
            ("AWS::S3::Bucket", "Arn"): lambda: C.bucket_arn(name),
            ("AWS::Lambda::Function", "Arn"): lambda: C.lambda_arn(name),
            ("AWS::Logs::LogGroup", "Arn"): lambda: f"arn:{C.PARTITION}:logs:{C.REGION}:{C.ACCOUNT}:log-group:{name}:*",
            ("AWS::IAM::Role", "Arn"): lambda: f"arn:{C.PARTITION}:iam::{C.ACCOUNT}:role/{name}",
            ("AWS::StepFunctions::StateMachine", "Arn"): lambda: C.state_machine_arn(name),
            ("AWS::StepFunctions::StateMachine", "Name"): lambda: name,
            ("AWS::KMS::Key", "Arn"): lambda: f"arn:{C.PARTITION}:kms:{C.REGION}:{C.ACCOUNT}:key/{name}",
        }.get((rtype, attr))
        if arn is None:
            raise TemplateError(f"Fn::GetAtt {name}.{attr} ({rtype})")
        return arn()

    def _type(self, name: str) -> str:
        if name not in self.resources:
            raise TemplateError(f"no resource {name}")
        return self.resources[name]["Type"]


@dataclass(frozen=True)
class Denial:
    call: C.Call
    action: str
    resource: str
    role: str | None

    def __str__(self) -> str:
        who = self.call.owner or "UNOWNED"
        return (
            f"{who} (role {self.role or '?'}) may not {self.action} on {self.resource} "
            f"[{self.call.service}.{self.call.operation}]"
        )


class Roles:
    """The roles of one synthesized template and who assumes them."""

    def __init__(self, template: dict[str, Any]) -> None:
        self.resources: dict[str, dict] = template["Resources"]
        resolve = Resolver(self.resources)
        self.role_of: dict[str, str] = {}  # owner -> role logical id
        for logical, res in self.resources.items():
            if res["Type"] == "AWS::Lambda::Function":
                self.role_of[C.function_owner(logical)] = self._role_id(res["Properties"]["Role"])
            elif res["Type"] == "AWS::StepFunctions::StateMachine":
                self.role_of[C.STATE_MACHINE] = self._role_id(res["Properties"]["RoleArn"])
        self.statements: dict[str, list[Statement]] = {}
        for role in set(self.role_of.values()):
            self.statements[role] = self._statements(role, resolve)

    @staticmethod
    def _role_id(expr: Any) -> str:
        if isinstance(expr, dict) and "Fn::GetAtt" in expr:
            return expr["Fn::GetAtt"][0]
        raise TemplateError(f"role not a Fn::GetAtt of a role: {expr!r}")

    def _statements(self, role: str, resolve: Resolver) -> list[Statement]:
        docs: list[tuple[str, dict]] = []
        props = self.resources[role]["Properties"]
        if props.get("ManagedPolicyArns"):
            raise TemplateError(f"{role} has managed policies (their statements are not in the template)")
        for policy in props.get("Policies", []):
            docs.append(("", policy["PolicyDocument"]))
        for logical, res in self.resources.items():
            if res["Type"] == "AWS::IAM::Policy" and {"Ref": role} in res["Properties"].get("Roles", []):
                docs.append((logical, res["Properties"]["PolicyDocument"]))
        out: list[Statement] = []
        for policy, doc in docs:
            for raw in _as_list(doc["Statement"]):
                if raw.get("Effect") != "Allow":
                    raise TemplateError(f"{role}: only Allow statements are read ({raw})")
                resources = tuple(resolve(r) for r in _as_list(raw.get("Resource", raw.get("NotResource", []))))
                out.append(
                    Statement(
                        role=role,
                        actions=tuple(_as_list(raw.get("Action", []))),
                        resources=resources,
                        raw=raw,
                        policy=policy,
                    )
                )
        return out

    # ------------------------------------------------------------------ evaluation
    def without(self, role: str, index: int) -> Roles:
        """A copy with statement ``index`` of ``role`` removed (to prove the check can fail)."""
        copy = object.__new__(Roles)
        copy.resources, copy.role_of = self.resources, self.role_of
        copy.statements = {**self.statements, role: [s for i, s in enumerate(self.statements[role]) if i != index]}
        return copy

    def granting(self, role: str, action: str, resource: str) -> list[int]:
        """Indexes of the role's statements that allow ``action`` on ``resource``."""
        found = []
        for i, st in enumerate(self.statements.get(role, [])):
            if not st.evaluable and not self._condition_ok(st, action):
                continue
            doc = {"Effect": "Allow", "Action": list(st.actions), "Resource": list(st.resources)}
            if IAMPolicyStatement(doc).is_action_permitted(action, resource) == PermissionResult.PERMITTED:
                found.append(i)
        return found

    @staticmethod
    def _condition_ok(st: Statement, action: str) -> bool:
        import json

        if {"NotResource", "NotAction", "NotPrincipal"} & set(st.raw):
            return False
        key = (action, json.dumps(st.raw.get("Condition"), sort_keys=True))
        return key in CONDITIONS_EVALUATED

    def check(self, recorded: Iterable[C.Call]) -> tuple[list[Denial], list[C.Call]]:
        """``(denials, problems)``: calls a role would deny, and calls that cannot be checked
        (unowned, unmapped, or an owner with no role in the template)."""
        denials: list[Denial] = []
        problems: list[C.Call] = []
        for call in recorded:
            if call.owner == C.SETUP or (call.owner or "").startswith("local:"):
                continue  # listed, not checked (see quaylocal.calls)
            if call.owner is None or call.unmapped or call.owner not in self.role_of:
                problems.append(call)
                continue
            role = self.role_of[call.owner]
            for action, resource in call.pairs:
                if not self.granting(role, action, resource):
                    denials.append(Denial(call, action, resource, role))
        return denials, problems

    def used(self, recorded: Iterable[C.Call]) -> set[tuple[str, int, str, str]]:
        """``(role, statement index, action pattern, resource pattern)`` that recorded calls used."""
        out: set[tuple[str, int, str, str]] = set()
        for call in recorded:
            role = self.role_of.get(call.owner or "")
            if role is None:
                continue
            for action, resource in call.pairs:
                for i in self.granting(role, action, resource):
                    st = self.statements[role][i]
                    for a in st.actions:
                        if fnmatch.fnmatchcase(action, a):
                            for r in st.resources:
                                if (
                                    IAMPolicyStatement(
                                        {"Effect": "Allow", "Action": a, "Resource": r}
                                    ).is_action_permitted(action, resource)
                                    == PermissionResult.PERMITTED
                                ):
                                    out.add((role, i, a, r))
        return out

    def grants(self) -> set[tuple[str, int, str, str]]:
        """Every ``(role, statement index, action, resource)`` of the checked roles."""
        return {
            (role, i, a, r)
            for role, sts in self.statements.items()
            for i, st in enumerate(sts)
            for a in st.actions
            for r in st.resources
        }

    def owners_of(self, role: str) -> list[str]:
        return sorted(o for o, r in self.role_of.items() if r == role)


def grant_key(roles: Roles, grant: tuple[str, int, str, str]) -> tuple[str, str, str]:
    """A grant as ``(owner, action, resource)`` — stable across statement order, for reasons."""
    role, _i, action, resource = grant
    owners = roles.owners_of(role)
    return (owners[0] if owners else role, action, resource)


#: Grants no recorded call uses, kept on purpose: ``(owner glob, action glob, resource glob) ->
#: reason``. The session report fails on an unused grant that matches none of these.
UNUSED_GRANT_REASONS: dict[tuple[str, str, str], str] = {
    (
        "function:*",
        "states:SendTaskSuccess",
        "*:stateMachine:AgentRunStateMachine",
    ): "Fair turns (design §12.3): every final path hands its turn to the oldest waiting run's task "
    "token; a suite run only takes the hand-off through some of the functions that may do it.",
    (
        "function:*",
        "dynamodb:PutItem",
        "*:table/LedgerTable",
    ): "Fair turns (design §12.3): a released turn is put back for the next run on paths a suite run "
    "takes only in some of the functions that may release one.",
    (
        "function:*",
        "logs:*",
        "*",
    ): "The Lambda runtime writes the function's own log group with its role; no SDK call of "
    "ours does, so no recorded call can show it.",
    ("*", "xray:*", "*"): "Active tracing: the Lambda and Step Functions services send trace segments with the "
    "role; no SDK call of ours does.",
    (
        "function:*",
        "s3:ListBucket",
        "arn:aws:s3:::RunDataBucket",
    ): "A GetObject of a run-data object that is not stored must answer 404 NoSuchKey (which "
    "the code reads as 'not stored'); without s3:ListBucket S3 answers 403 AccessDenied "
    "(S3 API reference, GetObject permissions). moto answers 404 either way.",
    (
        "function:*",
        "s3:ListBucket",
        "arn:aws:s3:::FilesBucket",
    ): "A HeadObject of an upload that is not there must answer 404 (which ingest reads as "
    "'removed before it was read'); without s3:ListBucket S3 answers 403 AccessDenied, which "
    "ingest treats as a fault (S3 API reference, HeadObject permissions). moto answers 404 "
    "either way.",
    (
        "function:*",
        "s3:GetObject",
        "arn:aws:s3:::FilesBucket/index/*",
    ): "An index pointer written before the files bucket was versioned names the key only (no "
    "version): it is read by key; every pointer the suite writes names its version.",
    (
        "function:ApiFunction",
        "s3:GetObject",
        "arn:aws:s3:::FilesBucket/uploads/*",
    ): "The download of a file ingested before the files bucket was versioned (no version id "
    "recorded) names the key only; every file the suite ingests has its version.",
    (
        "function:ApiFunction",
        "dynamodb:GetItem",
        "*:table/IdempotencyTable",
    ): "Powertools idempotency reads the record with GetItem when a failed conditional put "
    "returns no old item (DynamoDBPersistenceLayer._get_record); DynamoDB and moto always "
    "return it, so the suite never takes that path.",
    (
        "function:ReconcilerFunction",
        "dynamodb:PutItem",
        "*:table/LedgerTable",
    ): "An execution that ends outside any Catch while a model request is pending (sent, its "
    "outcome not recorded) has that request recorded 'lost' by the reconciler, a put of the "
    "request's item; the suite meets it only when a stack stops an execution mid-request.",
    (
        "function:WakeRelayFunction",
        "dynamodb:ListStreams",
        "*",
    ): "The DynamoDB event source mapping needs ListStreams with the function's role (Lambda "
    "developer guide, DynamoDB execution role permissions); the local poller stands in "
    "for the mapping and does not list streams.",
    (
        "function:*",
        "sqs:*",
        "*:FailedEventsQueue",
    ): "The on-failure destination (stream mapping, asynchronous invocations): the Lambda "
    "service sends the failure record with the function's role; CDK's SQS destination "
    "grants the queue's send set. The local stack records failures itself.",
    (
        "state-machine",
        "logs:*",
        "*",
    ): "Step Functions logging to CloudWatch Logs: the log-delivery actions AWS requires on "
    "Resource '*' (Step Functions developer guide, IAM policies for logging); the service "
    "uses them, no call of ours.",
}


@dataclass
class UnusedReport:
    text: str
    unexplained: list[tuple[str, str, str]]


def reason_for(key: tuple[str, str, str]) -> str | None:
    for (owner, action, resource), why in UNUSED_GRANT_REASONS.items():
        if (
            fnmatch.fnmatchcase(key[0], owner)
            and fnmatch.fnmatchcase(key[1], action)
            and fnmatch.fnmatchcase(key[2], resource)
        ):
            return why
    return None


def unused_report(roles: Roles, used: set[tuple[str, int, str, str]]) -> UnusedReport:
    """Every grant of the checked roles that no recorded call used, with its reason if kept."""
    lines: list[str] = []
    unexplained: list[tuple[str, str, str]] = []
    for grant in sorted(roles.grants() - used):
        key = grant_key(roles, grant)
        why = reason_for(key)
        lines.append(f"{key[0]}: {key[1]} on {key[2]} -- {why or 'NO REASON: remove it or give one'}")
        if why is None:
            unexplained.append(key)
    if not lines:
        lines.append("(none: every grant was used by a recorded call)")
    return UnusedReport(text="\n".join(lines), unexplained=unexplained)
