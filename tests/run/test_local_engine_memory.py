"""What a long-lived local stack keeps (``quay dev``, issue 13 item 4): moto's model instances
are tracked weakly, so a replaced or deleted DynamoDB item is freed; TransactWriteItems backs up
the items it writes instead of deep-copying whole tables, and a cancelled one still leaves the
table and its stream exactly as they were; the ASL interpreter's finished threads are dropped
when an execution ends."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import Item
from moto.s3.models import FakeKey
from moto.stepfunctions.parser.utils import TMP_THREADS
from runhelpers import Env

from quaylocal import moto_patches
from quaylocal import stack as st
from quayutec.logic.room_service import RoomService
from quayutec.models import Author

TABLE = "t"


@pytest.fixture
def ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for k in st.LOCAL_ONLY_ENVS:  # region, test credentials, as the local stack sets them
        monkeypatch.setenv(k, st.local_environment()[k])
    st.install_seams()
    with mock_aws():
        client = boto3.client("dynamodb", region_name=st.REGION)
        client.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        yield client


def _backend() -> Any:
    return dynamodb_backends[st.ACCOUNT][st.REGION]


PK = "local-engine-memory"


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": PK}, "sk": {"S": sk}}


def _scan(ddb: Any) -> list[dict[str, Any]]:
    return sorted(ddb.scan(TableName=TABLE)["Items"], key=lambda i: i["sk"]["S"])


def _stream(ddb: Any) -> tuple[Any, str]:
    streams = boto3.client("dynamodbstreams", region_name=st.REGION)
    arn = ddb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    return streams, streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
        "ShardIterator"
    ]


def _seed(ddb: Any) -> None:
    for sk, n in (("a", "1"), ("c", "3"), ("d", "4")):
        ddb.put_item(TableName=TABLE, Item={**_key(sk), "n": {"N": n}, "m": {"M": {"l": {"L": [{"S": sk}]}}}})


def test_a_cancelled_transaction_leaves_the_items_and_the_stream_as_they_were(ddb: Any) -> None:
    _seed(ddb)
    streams, it = _stream(ddb)
    seeded = streams.get_records(ShardIterator=it)
    assert len(seeded["Records"]) == 3
    before, table = _scan(ddb), _backend().tables[TABLE]
    with pytest.raises(ddb.exceptions.TransactionCanceledException):
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": _key("a"),
                        "UpdateExpression": "SET n = n + :one, m.l[0] = :x",
                        "ExpressionAttributeValues": {":one": {"N": "1"}, ":x": {"S": "changed"}},
                    }
                },
                {"Put": {"TableName": TABLE, "Item": {**_key("b"), "n": {"N": "2"}}}},
                {"Put": {"TableName": TABLE, "Item": {**_key("c"), "n": {"N": "30"}}}},
                {"Delete": {"TableName": TABLE, "Key": _key("d")}},
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": _key("zz"),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )
    assert _scan(ddb) == before
    assert _backend().tables[TABLE] is table  # the table was not swapped for a whole copy
    # the reader's iterator sees no record of the cancelled writes, and the next real one
    assert streams.get_records(ShardIterator=seeded["NextShardIterator"])["Records"] == []
    ddb.put_item(TableName=TABLE, Item={**_key("e"), "n": {"N": "5"}})
    after = streams.get_records(ShardIterator=seeded["NextShardIterator"])["Records"]
    assert [(r["eventName"], r["dynamodb"]["Keys"]["sk"]["S"]) for r in after] == [("INSERT", "e")]

    ddb.transact_write_items(
        TransactItems=[  # a transaction that lands still lands
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": _key("a"),
                    "UpdateExpression": "SET n = n + :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
            {"Delete": {"TableName": TABLE, "Key": _key("d")}},
        ]
    )
    assert [(i["sk"]["S"], i["n"]["N"]) for i in _scan(ddb)] == [("a", "2"), ("c", "3"), ("e", "5")]


def test_a_table_a_cancelled_transaction_only_checks_is_neither_copied_nor_changed(ddb: Any) -> None:
    ddb.create_table(
        TableName="u",
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
    )
    ddb.put_item(TableName="u", Item={"pk": {"S": PK}, "n": {"N": "1"}})
    _seed(ddb)
    before, checked = _scan(ddb), _backend().tables["u"]
    with pytest.raises(ddb.exceptions.TransactionCanceledException):
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {**_key("b"), "n": {"N": "2"}}}},
                {
                    "ConditionCheck": {
                        "TableName": "u",
                        "Key": {"pk": {"S": PK}},
                        "ConditionExpression": "n = :two",
                        "ExpressionAttributeValues": {":two": {"N": "2"}},
                    }
                },
            ]
        )
    assert _scan(ddb) == before and _backend().tables["u"] is checked
    assert ddb.scan(TableName="u")["Items"] == [{"pk": {"S": PK}, "n": {"N": "1"}}]


def test_a_transaction_moto_rejects_for_its_key_still_rolls_back_whole(ddb: Any) -> None:
    _seed(ddb)
    streams, it = _stream(ddb)
    seeded = streams.get_records(ShardIterator=it)
    before = _scan(ddb)
    with pytest.raises(ddb.exceptions.ClientError):  # the key lacks the range key: moto's own copy
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {**_key("b"), "n": {"N": "2"}}}},
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": {"pk": {"S": PK}},
                        "UpdateExpression": "SET n = :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}},
                    }
                },
            ]
        )
    assert _scan(ddb) == before
    ddb.put_item(TableName=TABLE, Item={**_key("e"), "n": {"N": "5"}})
    after = streams.get_records(ShardIterator=seeded["NextShardIterator"])["Records"]
    assert [(r["eventName"], r["dynamodb"]["Keys"]["sk"]["S"]) for r in after] == [("INSERT", "e")]


def test_replaced_and_deleted_items_are_not_kept_alive_by_moto(ddb: Any) -> None:
    for i in range(20):  # overwritten 20 times, queried, transacted: one item stays
        ddb.put_item(TableName=TABLE, Item={**_key("a"), "n": {"N": str(i)}})
        ddb.query(TableName=TABLE, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": PK}})
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": _key("a"),
                        "UpdateExpression": "SET n = n + :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}},
                    }
                }
            ]
        )
    ddb.put_item(TableName=TABLE, Item={**_key("gone"), "n": {"N": "0"}})
    ddb.delete_item(TableName=TABLE, Key=_key("gone"))
    gc.collect()
    stored = [i for row in _backend().tables[TABLE].items.values() for i in row.values()]
    assert len(stored) == 1
    alive = [o for o in gc.get_objects() if type(o) is Item and o.hash_key.value == PK]
    assert alive == stored and alive[0] is stored[0]
    assert list(Item.instances_tracked) == stored  # moto's registry still lists the live ones
    assert type(FakeKey.instances_tracked) is list  # S3 keys: moto's reset disposes them through it


@pytest.mark.unit
def test_finished_interpreter_threads_are_dropped_and_the_rest_kept() -> None:
    release = threading.Event()
    finished, running = threading.Thread(target=lambda: None), threading.Thread(target=release.wait)
    unstarted = threading.Thread(target=lambda: None)
    finished.start()
    finished.join()
    running.start()
    TMP_THREADS.extend([finished, running, unstarted])
    try:
        moto_patches.forget_finished_threads()
        assert finished not in TMP_THREADS and running in TMP_THREADS and unstarted in TMP_THREADS
    finally:
        release.set()
        running.join()
        TMP_THREADS[:] = [t for t in TMP_THREADS if t is not running and t is not unstarted]


def test_an_ended_execution_drops_the_finished_threads(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    forget = moto_patches.forget_finished_threads
    monkeypatch.setattr(moto_patches, "forget_finished_threads", lambda: (calls.append(1), forget()))
    RoomService(env.deps.room).post_message("r1", Author(kind="person", id="ann", company="acme"), "@a1 hi", [])
    env.stack.wait_quiet(30)
    assert len(calls) == 1
