"""Authorization as a matrix (issue 4): every endpoint x a person of the other company in the
room, a person of a company outside the room, an operator, no token and a wrong token; plus the
leaks that must never happen (another company's keys, agent configuration, company-only memory,
ledger details, held-action text)."""

from __future__ import annotations

import time

import pytest
from apihelpers import A1_INSTRUCTIONS, ACME_KEY, BOLT_KEY, HELD_MEMORY, World

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

#: Never in a response to anyone but acme (and keys never in any response at all).
ACME_ONLY = [A1_INSTRUCTIONS, "acme-only memory line", HELD_MEMORY]
NEVER = [ACME_KEY, BOLT_KEY]

# (method, path, body, other (bob, bolt: in the room), outsider (carl, cato: not), admin)
# None: not called for that caller (it would change what the other rows rely on).
MATRIX = [
    ("GET", "/companies/acme", None, 404, 404, 200),
    ("POST", "/companies/acme/people", {"person": "eve"}, 404, 404, None),
    ("POST", "/companies/acme/tokens", {"member": "ann"}, 404, 404, 403),  # an operator: the first only
    ("GET", "/companies/acme/tokens", None, 404, 404, 200),
    ("GET", "/companies/acme/audit", None, 404, 404, 200),
    ("DELETE", "/companies/acme/tokens/0123456789abcdef", None, 404, 404, 404),
    ("POST", "/companies", {"id": "evil"}, 403, 403, None),
    ("PATCH", "/companies/acme", {"max_concurrent_runs": 3}, 403, 403, None),
    ("GET", "/companies/acme/policy", None, 404, 404, 200),
    ("PUT", "/companies/acme/policy", {"default": "allow"}, 404, 404, None),
    ("GET", "/rooms/r1", None, 200, 404, 403),
    ("GET", "/rooms/r1/members", None, 200, 404, 403),
    ("POST", "/rooms/r1/members", {"company": "bolt"}, 409, 404, 403),
    ("POST", "/rooms/r1/agents", {"agent": "a1"}, 404, 404, 403),
    ("POST", "/rooms/r1/invitations/accept", None, 404, 404, 403),  # bob: no invitation, a member
    ("POST", "/rooms/r1/invitations/decline", None, 404, 404, 403),
    ("POST", "/rooms/r1/leave", None, None, 404, 403),  # bob would take bolt out of r1
    ("GET", "/agents/a1", None, 404, 404, 403),
    ("POST", "/rooms/r1/messages", {"text": "hello from outside?"}, 201, 404, 403),
    ("GET", "/rooms/r1/messages", None, 200, 404, 403),
    ("GET", "/rooms/r1/changes", None, 200, 404, 403),  # exactly the other room reads'
    ("POST", "/rooms/r1/tasks", {"to": "b1", "title": "matrix task"}, 201, 404, 403),
    ("GET", "/rooms/r1/tasks", None, 200, 404, 403),
    ("GET", "/rooms/r1/tasks/{task}", None, 200, 404, 403),
    ("POST", "/rooms/r1/tasks/{task}/updates", {"note": "progress"}, 201, 404, 403),
    ("POST", "/rooms/r1/tasks/{task}/close", {"result": "done"}, None, 404, 403),
    ("GET", "/rooms/r1/memory", None, 200, 404, 403),
    ("POST", "/rooms/r1/memory", {"text": "a room line", "visibility": "room"}, 201, 404, 403),
    ("GET", "/rooms/r1/approvals", None, 200, 404, 403),
    ("POST", "/rooms/r1/approvals/{approval}/approve", None, 404, 404, 403),
    ("POST", "/rooms/r1/approvals/{approval}/deny", None, 404, 404, 403),
    ("GET", "/rooms/r1/runs", None, 200, 404, 403),
    ("GET", "/rooms/r1/cost", None, 200, 404, 403),  # exactly the runs listing's visibility
    ("GET", "/runs/{run}", None, 404, 404, 403),
    ("GET", "/rooms", None, 200, 200, 403),
    ("GET", "/invitations", None, 200, 200, 403),
    ("GET", "/agents", None, 200, 200, 403),
]
CALLERS = {"other": ("bob", 3), "outsider": ("carl", 4), "admin": ("admin", 5)}


def _path(world: World, template: str) -> str:
    return template.format(**world.ids)


def _no_leak(text: str, who: str, where: str) -> None:
    for secret in NEVER + (ACME_ONLY if who != "ann" else []):
        assert secret not in text, f"{secret!r} leaked to {who} by {where}"


@pytest.mark.parametrize("row", MATRIX, ids=lambda r: f"{r[0]} {r[1]}")
def test_matrix(world: World, row) -> None:
    method, template, body = row[:3]
    path = _path(world, template)
    for caller, (person, col) in CALLERS.items():
        expected = row[col]
        if expected is None:
            continue
        r = world.api.call(method, path, world.tokens[person], body)
        assert r.status == expected, (caller, method, path, r.status, r.body)
        _no_leak(r.text, person, f"{method} {path}")
        if r.status >= 400:
            assert isinstance(r.body, dict) and r.body.get("error") and r.body.get("message"), r.body
    for bad in (None, "qyt_not_a_token_at_all_0000000000", "", "Basic YW5uOnB3"):
        headers = (
            {} if bad is None else {"Authorization": bad if bad.startswith("Basic") or not bad else f"Bearer {bad}"}
        )
        r = world.api.call(method, path, None, body, headers=headers)
        assert r.status == 401, (bad, method, path, r.status)
        _no_leak(r.text, "anonymous", f"{method} {path}")


def test_a_non_member_sees_nothing_of_a_room(world: World) -> None:
    rooms = world.api.ok("GET", "/rooms", world.tokens["carl"])["rooms"]
    assert rooms == ["r-cato"]
    # an unknown room and a room of others answer the same
    a = world.api.call("GET", "/rooms/r1/messages", world.tokens["carl"])
    b = world.api.call("GET", "/rooms/no-such-room/messages", world.tokens["carl"])
    assert (a.status, a.body["error"]) == (b.status, b.body["error"]) == (404, "not_found")


def test_company_memory_only_for_its_company(world: World) -> None:
    ann = {m["text"] for m in world.api.ok("GET", "/rooms/r1/memory", world.tokens["ann"])["lines"]}
    bob = {m["text"] for m in world.api.ok("GET", "/rooms/r1/memory", world.tokens["bob"])["lines"]}
    assert {"acme-only memory line", "shared memory line"} <= ann and "bolt-only memory line" not in ann
    assert {"bolt-only memory line", "shared memory line"} <= bob and "acme-only memory line" not in bob


def test_approvals_runs_and_agents_only_for_the_owner(world: World) -> None:
    ann, bob = world.tokens["ann"], world.tokens["bob"]
    assert [a["id"] for a in world.api.ok("GET", "/rooms/r1/approvals", ann)["approvals"]] == [world.ids["approval"]]
    assert world.api.ok("GET", "/rooms/r1/approvals", bob)["approvals"] == []
    assert world.ids["run"] in [r["run_id"] for r in world.api.ok("GET", "/rooms/r1/runs", ann)["runs"]]
    assert all(r["company"] == "bolt" for r in world.api.ok("GET", "/rooms/r1/runs", bob)["runs"])
    detail = world.api.ok("GET", f"/runs/{world.ids['run']}", ann)
    assert detail["actions"][0]["decision"] == "ask"
    mine = world.api.ok("GET", "/agents/a1", ann)
    assert mine["instructions"] == A1_INSTRUCTIONS and mine["key_stored"] is True
    assert "api_key" not in mine and ACME_KEY not in str(mine)
    room = world.api.ok("GET", "/rooms/r1", bob)
    assert {"id": "acme.a1", "name": "a1", "company": "acme"} in room["agents"]  # who is in the room, nothing more


def test_no_one_posts_as_someone_else(world: World) -> None:
    bob = world.tokens["bob"]
    forged = world.api.call(
        "POST",
        "/rooms/r1/messages",
        bob,
        {"text": "I am ann", "author": {"kind": "person", "id": "ann", "company": "acme"}},
    )
    assert forged.status == 422 and any(f["field"] == "body.author" for f in forged.body["fields"])
    posted = world.api.ok(
        "POST", "/rooms/r1/messages", bob, {"text": "really me"}, headers={"X-Company": "acme", "X-Member": "ann"}
    )
    assert posted["author"] == {"kind": "person", "id": "bob", "company": "bolt"}


def test_the_handler_trusts_only_the_authorizer_context(world: World) -> None:
    from quaylocal.dev import direct_invoke

    event = world.api.gateway.proxy_event(
        "GET", "/rooms/r1", "", [("Authorization", "Bearer x"), ("company", "acme")], b"", None
    )
    payload, error = direct_invoke()("ApiFunction", event)
    assert error is None and payload["statusCode"] == 401


def test_a_revoked_token_is_refused(world: World) -> None:
    api, adm = world.api, world.tokens["admin"]
    issued = api.ok("POST", "/companies/acme/tokens", world.tokens["ann"], {"member": "amy"})
    assert api.call("GET", "/rooms", issued["token"]).status == 200
    listed = api.ok("GET", "/companies/acme/tokens", adm)["tokens"]
    assert issued["token_id"] in [t["token_id"] for t in listed] and "token" not in str(listed).replace("token_id", "")
    api.ok("DELETE", f"/companies/acme/tokens/{issued['token_id']}", adm)
    assert api.call("GET", "/rooms", issued["token"]).status == 401


def test_only_the_owner_decides_then_the_run_completes(world: World, stack_env) -> None:
    stack = stack_env[0]
    api, path = world.api, f"/rooms/r1/approvals/{world.ids['approval']}"
    # to another company in the room, a held action answers as an unknown approval id (design §5)
    outsider = api.call("POST", f"{path}/approve", world.tokens["bob"])
    unknown = api.call("POST", "/rooms/r1/approvals/no-such-run:0/approve", world.tokens["bob"])
    assert outsider.status == unknown.status == 404
    assert outsider.body["message"].replace(world.ids["approval"], "ID") == unknown.body["message"].replace(
        "no-such-run:0", "ID"
    )
    decided = api.call("POST", f"{path}/approve", world.tokens["amy"])  # any person of the owning company
    assert decided.status == 200 and decided.body["status"] == "approved" and decided.body["decided_by"] == "amy"
    assert api.call("POST", f"{path}/deny", world.tokens["ann"]).status == 409  # decided already
    deadline = time.monotonic() + 30
    while api.ok("GET", f"/runs/{world.ids['run']}", world.tokens["ann"])["run"]["status"] != "completed":
        assert time.monotonic() < deadline, "the approved run did not complete"
        time.sleep(0.1)
    stack.wait_quiet(30)
    assert HELD_MEMORY in {m["text"] for m in api.ok("GET", "/rooms/r1/memory", world.tokens["ann"])["lines"]}
    assert HELD_MEMORY not in {m["text"] for m in api.ok("GET", "/rooms/r1/memory", world.tokens["bob"])["lines"]}
