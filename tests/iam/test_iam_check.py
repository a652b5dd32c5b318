"""The per-call IAM check can fail (design §11): with a needed statement removed from a role, the
calls of a real run are denied, naming function, action and resource; statements the evaluator
cannot judge grant nothing; unowned and unmapped calls are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from quaylab import iam_check
from quaylocal import calls as C
from quaylocal.scenario import Player, Scenario

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_ROOM = ROOT / "infra" / "quaylocal" / "scenarios" / "reference-room.yaml"

#: Roles whose every needed statement is removed in turn (run phases, the wake path, the engine).
ROLES_UNDER_TEST = (
    "ClaimAndReadFunction",
    "CallModelFunction",
    "DecideAndPostFunction",
    "ApplyAndFinishFunction",
    "WakeConsumerFunction",
    "WakeRelayFunction",
)


@pytest.fixture(scope="module")
def played_calls() -> list[C.Call]:
    """Every call of the reference room (messages, model calls, a held action approved, task and
    memory writes, wakes), recorded with owners."""
    seen: list[C.Call] = []
    before = len(C.RECORDER.calls) if C.RECORDER else 0
    result = Player(Scenario.load(REFERENCE_ROOM), time_scale=0.01, quiet_timeout_s=60).play()
    assert result.failures == [], result.failures
    assert C.RECORDER is not None, "the suite's conftest installs the recorder"
    seen = list(C.RECORDER.calls[before:])
    return seen


def test_the_reference_room_is_allowed_by_every_role(played_calls, iam_roles) -> None:
    denials, problems = iam_roles.check(played_calls)
    assert denials == [] and problems == []
    owners = {c.owner for c in played_calls}
    for fn in ROLES_UNDER_TEST:
        assert C.function_owner(fn) in owners, f"{fn} made no call in the reference room"
    assert C.STATE_MACHINE in owners  # moto's interpreter invoked the phase Lambdas


@pytest.mark.parametrize("function", [*ROLES_UNDER_TEST, "state-machine"])
def test_removing_any_needed_statement_is_caught(played_calls, iam_roles, function) -> None:
    owner = C.STATE_MACHINE if function == "state-machine" else C.function_owner(function)
    role = iam_roles.role_of[owner]
    mine = [c for c in played_calls if c.owner == owner]
    needed = sorted({i for (r, i, _a, _res) in iam_roles.used(mine) if r == role})
    assert needed, f"{function}: no statement of {role} was used"
    for index in needed:
        denials, _ = iam_roles.without(role, index).check(mine)
        assert denials, f"{function}: removing statement {index} of {role} went unnoticed"
        text = str(denials[0])
        assert owner in text and denials[0].action in text and denials[0].resource in text


def _roles_with(statement: dict) -> iam_check.Roles:
    template = {
        "Resources": {
            "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
            "FnRole": {"Type": "AWS::IAM::Role", "Properties": {}},
            "Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Role": {"Fn::GetAtt": ["FnRole", "Arn"]}}},
            "Policy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "Roles": [{"Ref": "FnRole"}],
                    "PolicyDocument": {"Statement": [{"Effect": "Allow", **statement}]},
                },
            },
        }
    }
    return iam_check.Roles(template)


def _get_item() -> C.Call:
    return C.Call(
        owner="function:Fn",
        service="dynamodb",
        operation="GetItem",
        pairs=(("dynamodb:GetItem", C.table_arn("Table")),),
    )


@pytest.mark.unit
def test_a_plain_grant_allows_and_another_table_is_denied() -> None:
    roles = _roles_with({"Action": "dynamodb:GetItem", "Resource": {"Fn::GetAtt": ["Table", "Arn"]}})
    assert roles.check([_get_item()]) == ([], [])
    other = C.Call(
        owner="function:Fn",
        service="dynamodb",
        operation="GetItem",
        pairs=(("dynamodb:GetItem", C.table_arn("Other")),),
    )
    denials, _ = roles.check([other])
    assert [d.resource for d in denials] == [C.table_arn("Other")]


@pytest.mark.parametrize(
    "statement",
    [
        {"Action": "dynamodb:GetItem", "Resource": "*", "Condition": {"StringEquals": {"aws:SourceVpc": "vpc-1"}}},
        {"Action": "dynamodb:GetItem", "NotResource": "arn:aws:dynamodb:*:*:table/Nope"},
        {"NotAction": "s3:*", "Resource": "*"},
    ],
    ids=["condition", "not-resource", "not-action"],
)
@pytest.mark.unit
def test_statements_the_evaluator_cannot_judge_grant_nothing(statement) -> None:
    denials, _ = _roles_with(statement).check([_get_item()])
    assert len(denials) == 1


@pytest.mark.unit
def test_unowned_and_unmapped_calls_cannot_pass() -> None:
    roles = _roles_with({"Action": "*", "Resource": "*"})
    unowned = C.Call(owner=None, service="dynamodb", operation="GetItem", pairs=_get_item().pairs)
    assert ("dynamodb", "RestoreTableFromBackup") not in C.OPERATIONS
    with C.owner("function:Fn"):
        unmapped = C.Recorder().record("dynamodb", "RestoreTableFromBackup", {"TargetTableName": "x"})
    assert unmapped.unmapped
    _, problems = roles.check([unowned, unmapped])
    assert problems == [unowned, unmapped]


@pytest.mark.unit
def test_a_transaction_needs_each_item_s_action() -> None:
    pairs = C.OPERATIONS[("dynamodb", "TransactWriteItems")](
        {
            "TransactItems": [
                {"Put": {"TableName": "t1"}},
                {"ConditionCheck": {"TableName": "t2"}},
                {"Update": {"TableName": "t1"}},
            ]
        }
    )
    assert pairs == [
        ("dynamodb:PutItem", C.table_arn("t1")),
        ("dynamodb:ConditionCheckItem", C.table_arn("t2")),
        ("dynamodb:UpdateItem", C.table_arn("t1")),
    ]
    assert C.OPERATIONS[("s3", "HeadObject")]({"Bucket": "b", "Key": "k"}) == [("s3:GetObject", "arn:aws:s3:::b/k")]


@pytest.mark.unit
def test_a_presigned_url_counts_as_the_action_it_grants(monkeypatch) -> None:
    """Signing is the call IAM judges later (when the URL is used, with the signer's role): the
    factory's hook sees generate_presigned_url like any call."""
    import boto3

    from quayutec import seams

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    seen = C.Recorder()
    assert C.RECORDER is not None
    seams.uninstall(C.RECORDER.instruments)  # a made-up owner: not the suite's to check
    try:
        with seams.installed(seen.instruments):
            client = seams.observe(boto3.client("s3", region_name="us-east-1"))
            with C.owner("function:Fn"):
                client.generate_presigned_url("get_object", Params={"Bucket": "b", "Key": "runs/x.json"})
    finally:
        seams.install(C.RECORDER.instruments)
    assert [(c.owner, c.pairs) for c in seen.calls] == [
        ("function:Fn", (("s3:GetObject", "arn:aws:s3:::b/runs/x.json"),))
    ]


def test_callmodel_may_assume_only_roles_named_quayutec_bedrock(iam_roles) -> None:
    """docs/design.md §5: CallModel's sts:AssumeRole is on arn:<partition>:iam::*:role/quayutec-bedrock-*
    alone, and no other function may assume any role."""

    def assume(owner: str, arn: str) -> C.Call:
        pairs = C.OPERATIONS[("sts", "AssumeRole")]({"RoleArn": arn, "RoleSessionName": "s"})
        return C.Call(owner=owner, service="sts", operation="AssumeRole", pairs=tuple(pairs))

    call_model = C.function_owner("CallModelFunction")
    allowed = [assume(call_model, "arn:aws:iam::210987654321:role/quayutec-bedrock-acme")]
    assert iam_roles.check(allowed) == ([], [])
    refused = [
        assume(call_model, "arn:aws:iam::210987654321:role/admin"),
        assume(call_model, "arn:aws:iam::123456789012:role/OrganizationAccountAccessRole"),
        assume(C.function_owner("ApiFunction"), "arn:aws:iam::210987654321:role/quayutec-bedrock-acme"),
    ]
    denials, _ = iam_roles.check(refused)
    assert len(denials) == 3, denials
