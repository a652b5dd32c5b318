"""Helpers of the API tests: the API Gateway emulation of ``quay dev`` (authorizer first, REST
proxy events) calling the deployed handlers in-process, and a seeded world of two companies
sharing a room plus an outsider."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from quaylocal.dev import Gateway
from quayutec.deps import default_deps
from quayutec.logic.access import Caller
from quayutec.logic.services import Services

ADMIN_TOKEN = "qyt_admin_test_token_0123456789"
ACME_KEY = "sk-acme-secret-key-4242"
BOLT_KEY = "sk-bolt-secret-key-4343"
A1_INSTRUCTIONS = "acme-internal-instructions: be brief"
HELD_MEMORY = "acme held plan"


@dataclass
class Resp:
    status: int
    headers: dict[str, str]
    body: Any
    text: str

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


@dataclass
class Api:
    gateway: Gateway

    def call(
        self,
        method: str,
        path: str,
        token: str | None = None,
        body: Any = None,
        *,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Resp:
        hdrs = dict(headers or {})
        if token is not None:
            hdrs.setdefault("Authorization", f"Bearer {token}")
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else b"")
        if data:
            hdrs.setdefault("Content-Type", "application/json")
        if key is not None:
            hdrs["Idempotency-Key"] = key
        result = self.gateway.handle(method, path, hdrs, data)
        text = result.body.decode("utf-8", "replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return Resp(result.status, result.headers, parsed, text)

    def ok(self, method: str, path: str, token: str | None = None, body: Any = None, **kw: Any) -> Any:
        r = self.call(method, path, token, body, **kw)
        assert 200 <= r.status < 300, (method, path, r.status, r.body)
        return r.body


@dataclass
class World:
    api: Api
    tokens: dict[str, str] = field(default_factory=dict)  # person -> token
    ids: dict[str, str] = field(default_factory=dict)  # what the setup created: task, approval, run, ...


def seed(api: Api, stack: Any, *, with_run: bool = True) -> World:
    """acme (ann, amy; agent a1) and bolt (bob; agent b1) share room r1; cato (carl) is in no room.
    acme's policy holds `remember` for a yes. One task for b1, memory lines of each visibility and,
    ``with_run``, one run of a1 parked on a held action."""
    w = World(api)
    adm = ADMIN_TOKEN
    for company, people in (("acme", ["ann", "amy"]), ("bolt", ["bob"]), ("cato", ["carl"])):
        api.ok("POST", "/companies", adm, {"id": company, "people": people})
        # the operator issues a company's first token only; its people issue the rest (design §5)
        for i, person in enumerate(people):
            issuer = adm if i == 0 else w.tokens[people[0]]
            w.tokens[person] = api.ok("POST", f"/companies/{company}/tokens", issuer, {"member": person})["token"]
    w.tokens["admin"] = adm
    api.ok("PUT", "/companies/acme/policy", w.tokens["ann"], {"actions": {"remember": "ask"}})
    # The API generates room ids (design §5); the fixtures' rooms keep the fixed ids the tests
    # name (r1, r-cato), created by the rooms service as POST /rooms creates them (its set-up
    # ``room_id``). test_api_ownership creates rooms through the API.
    rooms = Services(default_deps()).rooms
    rooms.create(Caller(company="acme", member="ann"), name="r1", members=["bolt"], room_id="r1")
    # bolt is invited (design §5): bob accepts through the API, as a person of bolt does
    api.ok("POST", "/rooms/r1/invitations/accept", w.tokens["bob"])
    rooms.create(Caller(company="cato", member="carl"), name="r-cato", room_id="r-cato")
    w.ids["room"] = "r1"
    api.ok(
        "POST",
        "/agents",
        w.tokens["ann"],
        {
            "name": "a1",
            "provider": "anthropic",
            "model": "claude-test",
            "instructions": A1_INSTRUCTIONS,
            "api_key": ACME_KEY,
        },
    )
    api.ok(
        "POST",
        "/agents",
        w.tokens["bob"],
        {"name": "b1", "provider": "openai", "model": "gpt-test", "api_key": BOLT_KEY},
    )
    api.ok("POST", "/rooms/r1/agents", w.tokens["ann"], {"agent": "a1"})
    api.ok("POST", "/rooms/r1/agents", w.tokens["bob"], {"agent": "b1"})
    api.ok("POST", "/rooms/r1/memory", w.tokens["ann"], {"text": "acme-only memory line", "visibility": "company"})
    api.ok("POST", "/rooms/r1/memory", w.tokens["bob"], {"text": "bolt-only memory line", "visibility": "company"})
    api.ok("POST", "/rooms/r1/memory", w.tokens["ann"], {"text": "shared memory line", "visibility": "room"})
    w.ids["task"] = api.ok("POST", "/rooms/r1/tasks", w.tokens["bob"], {"to": "b1", "title": "t"})["id"]
    if not with_run:
        return w
    api.ok("POST", "/rooms/r1/messages", w.tokens["ann"], {"text": "@a1 remember the plan"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pending = api.ok("GET", "/rooms/r1/approvals", w.tokens["ann"])["approvals"]
        if pending and stack.is_parked(pending[0]["run_id"]):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("a1's held action never reached an approval request")
    w.ids["approval"] = pending[0]["id"]
    w.ids["run"] = pending[0]["run_id"]
    stack.wait_quiet(60)
    return w
