"""Fixtures for the run-path tests: the local stack (moto in-process) with scaled Step Functions
time, a room set up like a scenario, and a local provider server with scripted replies."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from quayutec import deps as quay_deps
from quayutec.models import Agent, Company, Room, RightsPolicy
from quaylocal.provider_server import ProviderServer
from quaylocal.stack import LocalStack

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
    d.room.put_agent(Agent(id="a1", company="acme", provider="anthropic", model="claude-test", instructions="Be brief."))
    d.room.put_agent(Agent(id="b1", company="bolt", provider="openai", model="gpt-test", instructions="Be brief."))
    d.room.put_room(Room(id="r1", members=["acme", "bolt"]))
    d.room.add_room_agent("r1", "a1")
    d.room.add_room_agent("r1", "b1")
    sm = env_stack.client("secretsmanager")
    sm.create_secret(Name="quayutec/acme/anthropic", SecretString=keys["acme"])
    sm.create_secret(Name="quayutec/bolt/openai", SecretString=keys["bolt"])
    server.keys.update({"a1": keys["acme"], "b1": keys["bolt"]})
    return keys


@pytest.fixture
def env() -> Iterator[Env]:
    server = ProviderServer(scripts={}, keys={})
    server.start()
    settings = {"ANTHROPIC_BASE_URL": server.base_url("anthropic"), "OPENAI_BASE_URL": server.base_url("openai"),
                "BEDROCK_ENDPOINT_URL": server.base_url("bedrock")}
    try:
        with LocalStack(settings=settings, time_scale=TIME_SCALE) as stack:
            keys = make_room(stack, server)
            yield Env(stack=stack, server=server, keys=keys)
    finally:
        server.stop()


def table_items(stack: LocalStack, table: str) -> list[dict[str, Any]]:
    """Every item of a table (for asserting on what was written)."""
    ddb = stack.client("dynamodb")
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table}
    while True:
        page = ddb.scan(**kwargs)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def s3_keys(stack: LocalStack, bucket: str) -> list[str]:
    resp = stack.client("s3").list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in resp.get("Contents", []))
