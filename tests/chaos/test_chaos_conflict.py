"""The claim under DynamoDB's ``TransactionConflict`` (design §2.1, §3), on the local stack with
fault injection on.

A hot chain counter makes DynamoDB cancel the claim's transaction with a ``TransactionConflict``
reason; moto never does. The fault lab's ``conflict`` kind is that cancellation as botocore hands
it to our code; ``dal.aws.transact_refusals`` takes it for a TransientError and the ASL retries
ClaimAndRead (design §3).
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from quaylocal import chaos, faults
from quayutec.dal.aws import transact_refusals
from quayutec.errors import TransientError

CONFLICT_REASON = {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}


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
    faults.Fault("claim:before:tx claims:CLAIM+ledger:RUN+ledger:CHAIN", "conflict")
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
