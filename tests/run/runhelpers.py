"""Helpers for the run-path tests: the local stack (moto in-process) with scaled Step Functions
time, a room set up like a scenario, and a local provider server with scripted replies."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quaylocal.provider_server import ProviderServer
from quaylocal.stack import LocalStack
from quayutec import deps as quay_deps
from quayutec.logic.access import OPERATOR, Caller
from quayutec.logic.services import Services
from quayutec.models import RightsPolicy

TIME_SCALE = 0.01
#: The people and agents of :func:`make_room` (agent ids are ``{company}.{name}``, design §5).
ANN = Caller(company="acme", member="ann")
BOB = Caller(company="bolt", member="bob")
A1, B1 = "acme.a1", "bolt.b1"


@dataclass
class Env:
    stack: LocalStack
    server: ProviderServer
    keys: dict[str, str]

    @property
    def deps(self) -> quay_deps.Deps:
        return quay_deps.default_deps()


def make_room(
    env_stack: LocalStack,
    server: ProviderServer,
    *,
    policy: RightsPolicy | None = None,
    a1_model: str = "claude-test",
) -> dict[str, str]:
    """Two companies (acme: ann, agent acme.a1 on anthropic; bolt: bob, agent bolt.b1 on openai)
    in room r1, set up through the domain services as the API would (the room keeps its fixed id).
    ``a1_model``: acme.a1's model."""
    d = quay_deps.default_deps()
    svc = Services(d)
    keys = {"acme": "sk-acme-test", "bolt": "sk-bolt-test"}
    svc.companies.create(OPERATOR, "acme", ["ann"], policy)
    svc.companies.create(OPERATOR, "bolt", ["bob"])
    sm = env_stack.client("secretsmanager")
    sm.create_secret(Name=quay_deps.secret_name(d.settings, "acme", "anthropic"), SecretString=keys["acme"])
    sm.create_secret(Name=quay_deps.secret_name(d.settings, "bolt", "openai"), SecretString=keys["bolt"])
    svc.agents.register(ANN, name="a1", provider="anthropic", model=a1_model, instructions="Be brief.")
    svc.agents.register(BOB, name="b1", provider="openai", model="gpt-test", instructions="Be brief.")
    svc.rooms.create(ANN, name="r1", members=["bolt"], room_id="r1")
    svc.rooms.accept(BOB, "r1")  # bolt is invited (design §5): bob accepts, as POST …/invitations/accept does
    svc.rooms.place_agent(ANN, "r1", A1)
    svc.rooms.place_agent(BOB, "r1", B1)
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
    """Make ``company_id``'s policy hold (``ask``) every task its agents send to another company
    (set by its first person, as ``PUT /companies/{id}/policy`` sets it)."""
    company = deps.room.get_company(company_id)
    assert company is not None
    company.rights.cross_company["create_task"] = "ask"
    Services(deps).companies.set_policy(
        Caller(company=company_id, member=company.people[0]), company_id, company.rights
    )


def until(what: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll ``what`` every 0.05 s until it is true; AssertionError after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)
