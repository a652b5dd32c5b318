"""Helpers for the run-path tests: the local stack (moto in-process) with scaled Step Functions
time, a room set up like a scenario, and a local provider server with scripted replies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from quaylocal.provider_server import ProviderServer
from quaylocal.stack import LocalStack
from quayutec import deps as quay_deps
from quayutec.models import Agent, Company, RightsPolicy, Room

TIME_SCALE = 0.01


@dataclass
class Env:
    stack: LocalStack
    server: ProviderServer
    keys: dict[str, str]

    @property
    def deps(self) -> quay_deps.Deps:
        return quay_deps.default_deps()


def make_room(env_stack: LocalStack, server: ProviderServer, *, policy: RightsPolicy | None = None) -> dict[str, str]:
    """Two companies (acme: ann, agent a1 on anthropic; bolt: bob, agent b1 on openai) in room r1."""
    d = quay_deps.default_deps()
    keys = {"acme": "sk-acme-test", "bolt": "sk-bolt-test"}
    d.room.put_company(Company(id="acme", people=["ann"], rights=policy or RightsPolicy()))
    d.room.put_company(Company(id="bolt", people=["bob"]))
    d.room.put_agent(
        Agent(id="a1", company="acme", provider="anthropic", model="claude-test", instructions="Be brief.")
    )
    d.room.put_agent(Agent(id="b1", company="bolt", provider="openai", model="gpt-test", instructions="Be brief."))
    d.room.put_room(Room(id="r1", members=["acme", "bolt"]))
    d.room.add_room_agent("r1", "a1")
    d.room.add_room_agent("r1", "b1")
    sm = env_stack.client("secretsmanager")
    sm.create_secret(Name=quay_deps.secret_name(d.settings, "acme", "anthropic"), SecretString=keys["acme"])
    sm.create_secret(Name=quay_deps.secret_name(d.settings, "bolt", "openai"), SecretString=keys["bolt"])
    server.keys.update({"a1": keys["acme"], "b1": keys["bolt"]})
    return keys


def table_items(stack: LocalStack, table: str) -> list[dict[str, Any]]:
    """Every item of a table, as plain Python values (for asserting on what was written)."""
    from boto3.dynamodb.types import TypeDeserializer

    des = TypeDeserializer()
    ddb = stack.client("dynamodb")
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table}
    while True:
        page = ddb.scan(**kwargs)
        items += [{k: des.deserialize(v) for k, v in i.items()} for i in page["Items"]]
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def s3_keys(stack: LocalStack, bucket: str) -> list[str]:
    resp = stack.client("s3").list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in resp.get("Contents", []))


class FakeContext:
    """The Lambda context fields Powertools reads."""

    function_name = "test-function"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:test-function"
    memory_limit_in_mb = 512
    aws_request_id = "test-request"
    log_group_name = "/aws/lambda/test-function"
    log_stream_name = "test"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 30_000


CTX = FakeContext()


def hold_cross_company_tasks(deps: quay_deps.Deps, company_id: str = "acme") -> None:
    """Make ``company_id``'s policy hold (``ask``) every task its agents send to another company."""
    company = deps.room.get_company(company_id)
    assert company is not None
    company.rights.cross_company["create_task"] = "ask"
    deps.room.put_company(company)
