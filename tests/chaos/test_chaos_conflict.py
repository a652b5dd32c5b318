"""The claim under DynamoDB's ``TransactionConflict`` (design §2.1, §3), on the local stack with
fault injection on.

A hot chain counter makes DynamoDB cancel the claim's transaction with a ``TransactionConflict``
reason; moto never does. The fault lab's ``conflict`` kind is that cancellation as botocore hands
it to our code; ``dal.aws.transact_refusals`` takes it for a TransientError and the ASL retries
ClaimAndRead ``MaxAttempts`` times (retries, not attempts): met that often the claim still lands,
once, and counts once; once more and nothing is claimed or counted; a claim that landed before its
retries met it ends ``failed_before_reply`` through RecordFailure, counted once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from quaylab import chaos, faults
from quaylab.chaos import Case, ChaosLab
from quayutec.dal.aws import transact_refusals
from quayutec.errors import TransientError
from quayutec.logic.ids import reply_message_id

REPO = Path(__file__).resolve().parents[2]
CONFLICT_REASON = {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}


def _claim_retries() -> int:
    """ClaimAndRead's Retry for TransientError, read from the ASL itself."""
    asl = json.loads((REPO / "statemachines" / "agent_run.asl.json").read_text())
    (retrier,) = [r for r in asl["States"]["ClaimAndRead"]["Retry"] if "TransientError" in r["ErrorEquals"]]
    return int(retrier["MaxAttempts"])


# ----------------------------------------------------------------------------- the injected conflict
@pytest.mark.unit
def test_an_injected_conflict_is_the_cancellation_dynamodb_sends_and_it_is_transient() -> None:
    """DynamoDB's answer (TransactWriteItems, API reference: cancellation reasons in the order of
    the entries, ``None`` for an entry that was not the reason), parsed by botocore into the
    client's modeled exception; ``transact_refusals`` raises TransientError for it, not a
    refusal: no condition failed, so nothing tells who holds what."""
    # building a client with credentials given calls nothing
    client = boto3.client("dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    operation = client.meta.service_model.operation_model("TransactWriteItems")
    error = faults.transaction_conflict(operation, client.exceptions, 3, -1)
    assert isinstance(error, client.exceptions.TransactionCanceledException)
    assert error.operation_name == "TransactWriteItems"
    assert error.response["Error"] == {
        "Code": "TransactionCanceledException",
        "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons "
        "[None, None, TransactionConflict]",
    }
    assert error.response["CancellationReasons"] == [{"Code": "None"}, {"Code": "None"}, CONFLICT_REASON]
    assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    first = faults.transaction_conflict(operation, client.exceptions, 2, 0).response["CancellationReasons"]
    assert first == [CONFLICT_REASON, {"Code": "None"}]

    class Db:
        def transact_write_items(self, **_: Any) -> None:
            raise error

    with pytest.raises(TransientError, match="TransactionConflict"):
        transact_refusals(Db(), [{}, {}, {}])


@pytest.mark.unit
def test_a_conflict_cancels_a_transaction_before_it_lands_and_nothing_else() -> None:
    """DynamoDB writes nothing of a cancelled transaction: there is no ``after`` for a conflict,
    and a single write has no cancellation reasons."""
    faults.Fault(chaos.CLAIM_TX, "conflict")
    for point in (chaos.CLAIM_WRITE, "claim:before:put claims:CLAIM", "claim:end"):
        with pytest.raises(ValueError, match="conflict"):
            faults.Fault(point, "conflict")


def test_a_conflict_at_a_transaction_point_writes_nothing_and_looks_like_moto_s_own_cancellations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the client hook, at a named point, in a phase's scope: the call raises, the table
    is untouched, and the answer has the keys of the cancellation moto does send (a condition
    that failed), so the code reads both the same way."""
    monkeypatch.setenv(faults.ENV_VAR, "1")
    with mock_aws():
        db = faults.instrument(boto3.client("dynamodb", region_name="us-east-1"))
        db.create_table(
            TableName="quayutec-ledger",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        items = [
            {
                "Put": {
                    "TableName": "quayutec-ledger",
                    "Item": {"pk": {"S": "RUN#r"}, "sk": {"S": "RUN"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Update": {
                    "TableName": "quayutec-ledger",
                    "Key": {"pk": {"S": "CHAIN#room#c"}, "sk": {"S": "CHAIN"}},
                    "UpdateExpression": "ADD runs :one",
                    "ConditionExpression": "attribute_not_exists(runs) OR runs < :max",
                    "ExpressionAttributeValues": {":one": {"N": "1"}, ":max": {"N": "1"}},
                }
            },
        ]
        faults.arm(faults.Fault("claim:before:tx ledger:RUN+ledger:CHAIN", "conflict", arg=-1))
        try:
            with faults.scope("claim"), pytest.raises(db.exceptions.TransactionCanceledException) as injected:
                db.transact_write_items(TransactItems=items)
        finally:
            faults.disarm()
        assert injected.value.response["CancellationReasons"] == [{"Code": "None"}, CONFLICT_REASON]
        assert db.scan(TableName="quayutec-ledger")["Items"] == []
        db.put_item(
            TableName="quayutec-ledger", Item={"pk": {"S": "CHAIN#room#c"}, "sk": {"S": "CHAIN"}, "runs": {"N": "1"}}
        )
        with pytest.raises(db.exceptions.TransactionCanceledException) as moto_own:
            db.transact_write_items(TransactItems=items)
        assert [r["Code"] for r in moto_own.value.response["CancellationReasons"]] == ["None", "ConditionalCheckFailed"]
        assert set(moto_own.value.response) == set(injected.value.response)
        assert set(moto_own.value.response["Error"]) == set(injected.value.response["Error"])


# ----------------------------------------------------------------------------- the retry bound
def _counted(lab: ChaosLab, case: Case) -> int:
    """What the counter of the case's first chain counted."""
    return lab.counted(case.room, lab.message_id(f"{case.room}-first"))


def _replies(lab: ChaosLab, case: Case) -> list[Any]:
    return [m for m in lab.deps.room.all_messages(case.room) if m.kind == "reply" and m.run_id == case.run_id]


def test_the_claim_s_retry_bound_holds_under_conflicts(lab: ChaosLab) -> None:
    """The conflict injected N times at the claim's transaction (on the chain counter): fewer
    times than the ASL's ``MaxAttempts`` and as many, the run completes once (its claim counted
    once, one reply, one model request); once more, nothing was claimed (no claim, no ledger
    entry, nothing counted, nothing in the room, the execution failed, the wake delivered again
    does nothing); a claim that landed before its retries met the conflict stays claimed and
    RecordFailure ends it ``failed_before_reply``, counted once. Every case also passes the
    crash matrix's checks (no duplicate, a final ledger entry, the next message's run)."""
    n = _claim_retries()
    assert n >= 1 and chaos.claim_retries() == n
    landed_then_died = (chaos._die(chaos.CLAIM_WRITE),)
    points = [
        chaos.Point(chaos.CLAIM_TX, "conflict", "completed", arg=2, times=n - 1),
        chaos.Point(chaos.CLAIM_TX, "conflict", "completed", arg=2, times=n),
        chaos.Point(chaos.CLAIM_TX, "conflict", chaos.NO_RUN, arg=2, times=n + 1),
        chaos.Point(chaos.CLAIM_TX, "conflict", "failed_before_reply", arg=2, times=n, skip=1, also=landed_then_died),
    ]
    cases = [lab.new_case(p) for p in points]
    lab.run_cases(cases)
    faults.disarm()
    assert lab.stack is not None
    rewrites = chaos.stream_rewrites(lab.stack)
    results = [lab.check(c, [], rewrites) for c in cases]
    assert all(r.ok for r in results), chaos.render(chaos.Report(results, 0.0, chaos.non_final_runs(lab), []))
    fewer, as_many, more, landed = cases
    d = lab.deps
    for case in (fewer, as_many):
        assert case.point is not None and case.faults[0].fired == case.point.times
        run = d.ledger.get_run(case.run_id)
        assert run is not None and run.status == "completed"
        assert _counted(lab, case) == 1
        assert [m.id for m in _replies(lab, case)] == [reply_message_id(case.run_id)]
        assert len(d.ledger.model_requests(case.run_id)) == 1
    # out of retries: the retried step met the conflict n + 1 times, and nothing was claimed
    assert more.faults[0].fired == n + 1
    assert (
        d.ledger.get_run(more.run_id) is None
        and d.ledger.get_claim(more.a, f"msg:{lab.message_id(more.room + '-first')}") is None
    )
    assert _counted(lab, more) == 0 and not _replies(lab, more)
    assert [m.kind for m in d.room.all_messages(more.room) if m.author.kind != "person"] == ["reply"]  # the next run's
    sfn = lab.stack.client("stepfunctions")
    arn = lab.stack.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{more.run_id}"
    assert sfn.describe_execution(executionArn=arn)["status"] == "FAILED"
    # claimed, then every retry cancelled: RecordFailure closes the run; the count stays 1
    run = d.ledger.get_run(landed.run_id)
    assert run is not None and run.status == "failed_before_reply" and run.error_class == "TransientError"
    assert _counted(lab, landed) == 1 and not _replies(lab, landed)
    assert not d.ledger.model_requests(landed.run_id)
