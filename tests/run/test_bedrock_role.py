"""A `bedrock` agent with a role runs end to end on the local stack (docs/design.md §5): registered
through the API with its company's role ARN (the answer gives the company's external id), woken by
a message, CallModel assumes the role (moto's STS, the role's trust policy armed by
:mod:`quaylab.sts_trust`: it requires that external id), signs Converse with the session (the
local provider server sees SigV4 with the session's key id, no bearer key) and the reply is posted.
Every AWS call, CallModel's ``sts:AssumeRole`` included, is checked against the synthesized roles.
A role that does not trust the company's external id fails the run, final, naming the role, with
no model request; STS throttling is retried like a provider's rate limit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from runhelpers import TIME_SCALE

from quaylab import sts_trust
from quaylocal.dev import Gateway, direct_invoke, preload_handlers
from quaylocal.provider_server import ProviderServer
from quaylocal.scenario import PROVIDER_ENV
from quaylocal.stack import LocalStack
from quayutec.dal.auth import TokenStore
from quayutec.deps import default_deps
from quayutec.logic.access import Caller
from quayutec.logic.services import Services
from quayutec.providers import roles

ADMIN = "qyt_admin_test_token_0123456789"
MODEL = "amazon.nova-micro-v1:0"
ROLE = "arn:aws:iam::210987654321:role/quayutec-bedrock-acme"


@dataclass
class World:
    stack: LocalStack
    server: ProviderServer
    gateway: Gateway
    tokens: dict[str, str]

    def call(self, method: str, path: str, who: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        data = json.dumps(body).encode() if body is not None else b""
        if data:
            headers["Content-Type"] = "application/json"
        result = self.gateway.handle(method, path, headers, data)
        text = result.body.decode()
        return result.status, (json.loads(text) if text else None)

    def ok(self, method: str, path: str, who: str, body: Any = None) -> Any:
        status, answer = self.call(method, path, who, body)
        assert 200 <= status < 300, (method, path, status, answer)
        return answer

    def run_of(self, agent: str) -> dict[str, Any]:
        self.stack.wait_quiet()
        runs = [r for r in self.ok("GET", "/rooms/r1/runs", "ann")["runs"] if r["agent_id"] == f"acme.{agent}"]
        assert len(runs) == 1, runs
        return runs[0]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    preload_handlers()
    server = ProviderServer(scripts={}, keys={})
    server.start()
    try:
        settings = {PROVIDER_ENV[p]: server.base_url(p) for p in PROVIDER_ENV}
        with LocalStack(settings=settings, time_scale=TIME_SCALE) as stack:
            TokenStore(default_deps().room.table).issue(None, "admin", admin=True, token=ADMIN)
            w = World(stack, server, Gateway(direct_invoke()), {"admin": ADMIN})
            for company, person in (("acme", "ann"), ("bolt", "bob")):
                w.ok("POST", "/companies", "admin", {"id": company, "people": [person]})
                w.tokens[person] = w.ok("POST", f"/companies/{company}/tokens", "admin", {"member": person})["token"]
            Services(default_deps()).rooms.create(  # POST /rooms's service, keeping the fixed id r1
                Caller(company="acme", member="ann"), name="r1", members=["bolt"], room_id="r1"
            )
            w.ok("POST", "/rooms/r1/invitations/accept", "bob")  # bolt accepts its invitation (design §5)
            yield w
    finally:
        server.stop()


def _register(w: World, name: str, role: str = ROLE) -> dict[str, Any]:
    agent = w.ok("POST", "/agents", "ann", {"name": name, "provider": "bedrock", "model": MODEL, "role_arn": role})
    w.ok("POST", "/rooms/r1/agents", "ann", {"agent": name})
    return agent


def test_a_bedrock_agent_with_a_role_runs_end_to_end(world: World) -> None:
    agent = _register(world, "c1")
    external_id = agent["external_id"]
    assert agent["role_arn"] == ROLE and roles.is_external_id(external_id)
    assert world.ok("GET", "/companies/acme", "ann")["external_id"] == external_id  # one per company
    world.server.set_script("c1", [{"reply": {"text": "answered from acme's own account"}}])
    with sts_trust.armed() as trust:
        trust.trust(ROLE, external_id)  # acme's trust policy, written with the id the API gave
        world.ok("POST", "/rooms/r1/messages", "ann", {"text": "@c1 hello"})
        run = world.run_of("c1")
    assert run["status"] == "completed", run
    assert trust.calls == [{"RoleArn": ROLE, "ExternalId": external_id, "RoleSessionName": "quayutec-acme.c1"}]
    [sent] = [r for r in world.server.requests if r.agent_id == "acme.c1"]
    assert sent.status == 200 and sent.signed_by and sent.signed_by.startswith("ASIA")
    texts = [m["text"] for m in world.ok("GET", "/rooms/r1/messages", "ann")["messages"]]
    assert "answered from acme's own account" in texts
    # A second agent of acme under the same role gets the same external id (one trust policy).
    assert _register(world, "c2")["external_id"] == external_id


def test_a_role_that_does_not_trust_the_external_id_fails_the_run_with_a_clear_reason(world: World) -> None:
    role = "arn:aws:iam::210987654321:role/quayutec-bedrock-other"
    _register(world, "c3", role)
    before = len(world.server.requests)
    with sts_trust.armed() as trust:
        trust.trust(role, "quayutec-" + "0" * 32)  # written with another company's id
        world.ok("POST", "/rooms/r1/messages", "ann", {"text": "@c3 hello"})
        run = world.run_of("c3")
    assert run["status"] == "failed_before_reply", run
    assert role in run["error_message"] and "role_denied" in run["error_message"], run
    assert len(trust.calls) == 1  # final: never retried
    assert not [r for r in world.server.requests[before:] if r.agent_id == "acme.c3"]  # no model request


def test_sts_throttling_is_waited_out_and_retried(world: World) -> None:
    agent = _register(world, "c4")
    world.server.set_script("c4", [{"reply": {"text": "after the throttle"}}])
    with sts_trust.armed() as trust:
        trust.trust(ROLE, agent["external_id"])
        trust.fail("Throttling", 400, "Rate exceeded")
        world.ok("POST", "/rooms/r1/messages", "ann", {"text": "@c4 hello"})
        run = world.run_of("c4")
    assert run["status"] == "completed", run
    assert len(trust.calls) == 2


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"provider": "anthropic", "model": "m", "role_arn": ROLE}, "only a bedrock agent"),
        ({"provider": "bedrock", "model": MODEL, "role_arn": ROLE, "api_key": "sk-acme-0123456789"}, "not both"),
        ({"provider": "bedrock", "model": MODEL, "role_arn": "arn:aws:iam::210987654321:role/admin"}, "must start"),
        ({"provider": "bedrock", "model": MODEL, "role_arn": "not-an-arn"}, "not an IAM role ARN"),
        (
            {"provider": "bedrock", "model": MODEL, "role_arn": "arn:aws:iam::210987654321:role/x/quayutec-bedrock-a"},
            "path",
        ),
    ],
)
def test_a_bad_role_is_a_400_that_says_why_and_registers_nothing(world: World, body: dict[str, Any], says: str) -> None:
    status, answer = world.call("POST", "/agents", "ann", {"name": "bad1", **body})
    assert status == 400 and says in answer["message"] and "role_arn" in answer["message"], answer
    assert not [a for a in world.ok("GET", "/agents", "ann")["agents"] if a["name"] == "bad1"]


def test_a_role_agent_shows_no_secret_and_other_companies_see_no_external_id(world: World) -> None:
    status, answer = world.call("GET", "/companies/acme", "bob")
    assert status in (403, 404) and "quayutec-" not in json.dumps(answer)
    agents = world.ok("GET", "/agents", "ann")["agents"]
    c1 = next(a for a in agents if a["name"] == "c1")
    assert set(c1) >= {"role_arn", "external_id", "key_stored"} and "api_key" not in c1
