"""Every listing is a bounded page with a cursor (design §14): bounded in count (``limit``) and in
bytes as the API serializes it (escapes included), read by bounded queries, continued by an
opaque cursor bound to its listing, room and company. A room of 300 runs pages 20 at a time
without repeats or gaps; a member's hostile content (control characters JSON escapes to six
bytes, emoji to twelve) pages without a 502; a bad cursor is a 400."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from apihelpers import World

from quaylab.costs import seed_room_runs
from quayutec.api.pages import PAGE_BYTES
from quayutec.deps import default_deps
from quayutec.logic.access import Caller
from quayutec.logic.services import Services
from quayutec.models import ApprovalRequest

#: The envelope of a page over its items: field names, brackets, the cursor (a few hundred bytes).
ENVELOPE = 4096
CONTROL_TEXT = "\x01" * 10_920  # a POST body of 65,533 bytes (JSON: six bytes each): just under 64 KiB
EMOJI_BODY = "😀" * 16_000  # a task body of 16,000 characters (JSON: twelve bytes each)


def _pages(w: World, person: str, path: str, field: str, limit: int, most: int = 100) -> list[dict[str, Any]]:
    """Every page a person reads of a listing, following ``next_cursor`` to the end."""
    out: list[dict[str, Any]] = []
    cursor = None
    sep = "&" if "?" in path else "?"
    for _ in range(most):
        q = f"{sep}limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        r = w.api.call("GET", path + q, w.tokens[person])
        assert r.status == 200, (path, r.status, r.text[:300])
        assert len(r.text.encode()) <= PAGE_BYTES + ENVELOPE or len(r.body[field]) == 1, len(r.text)
        out.append(r.body)
        cursor = r.body.get("next_cursor")
        if not cursor:
            return out
    raise AssertionError("the pages never ended")


def _ids(pages: list[dict[str, Any]], field: str, key: str) -> list[str]:
    return [item[key] for page in pages for item in page[field]]


def _room(room: str, members: list[str] | None = None) -> str:
    """A room of acme's, with ``members`` (acme and bolt by default), made as POST /rooms makes one."""
    ann, rooms = Caller(company="acme", member="ann"), Services(default_deps()).rooms
    made = rooms.create(ann, name=room, members=members or ["acme", "bolt"], room_id=room).room
    people = {"bolt": "bob", "cato": "carl"}
    for company in made.invited:  # each invited company's person accepts (design §5)
        rooms.accept(Caller(company=company, member=people[company]), room)
    return room


# ----------------------------------------------------------------------------- runs
def test_a_room_of_300_runs_pages_20_at_a_time_without_repeats_or_gaps(light_world: World) -> None:
    w = light_world
    room = _room("r-300")
    seed_room_runs(default_deps().ledger, room, {"acme": 300, "bolt": 30})
    first = w.api.ok("GET", f"/rooms/{room}/runs?limit=20", w.tokens["ann"])
    assert len(first["runs"]) == 20 and first["next_cursor"]
    assert [r["run_id"] for r in first["runs"]] == [f"run-{room}-acme-{i}" for i in range(299, 279, -1)]
    pages = _pages(w, "ann", f"/rooms/{room}/runs", "runs", 20)
    ids = _ids(pages, "runs", "run_id")
    assert ids == [f"run-{room}-acme-{i}" for i in range(299, -1, -1)]  # newest first, each once
    assert all(len(p["runs"]) == 20 for p in pages[:15]) and len(pages) <= 16
    assert len(_ids(_pages(w, "bob", f"/rooms/{room}/runs", "runs", 7), "runs", "run_id")) == 30


# ----------------------------------------------------------------------------- bytes
@pytest.fixture(scope="module")
def hostile_room(light_world: World) -> str:
    """100 messages of 10,920 control characters each, posted through the API by ann."""
    room = _room("r-ctl")
    for i in range(100):
        w = light_world
        w.api.ok("POST", f"/rooms/{room}/messages", w.tokens["ann"], {"text": CONTROL_TEXT[: 10_920 - 3] + f"{i:03d}"})
    return room


@pytest.mark.parametrize("limit", [100, 200])
def test_control_character_messages_page_under_the_byte_bound(
    light_world: World, hostile_room: str, limit: int
) -> None:
    w = light_world
    for order in ("asc", "desc"):
        r = w.api.call("GET", f"/rooms/{hostile_room}/messages?limit={limit}&order={order}", w.tokens["bob"])
        assert r.status == 200, (r.status, r.text[:200])  # not 502: the answer is under Lambda's 6 MB
        assert len(r.text.encode()) <= PAGE_BYTES + ENVELOPE
        assert 0 < len(r.body["messages"]) < 100 and r.body["next_cursor"]
        pages = _pages(w, "bob", f"/rooms/{hostile_room}/messages?order={order}", "messages", limit)
        texts = [m["text"][-3:] for p in pages for m in p["messages"]]
        want = [f"{i:03d}" for i in range(100)]
        assert texts == (want if order == "asc" else want[::-1])  # every message once, in order


def test_emoji_tasks_page_under_the_byte_bound(light_world: World) -> None:
    w = light_world
    room = _room("r-emoji")
    w.api.ok("POST", f"/rooms/{room}/agents", w.tokens["bob"], {"agent": "b1"})
    for i in range(30):
        body = json.dumps({"to": "b1", "title": f"t{i:02d}", "body": EMOJI_BODY}, ensure_ascii=False).encode()
        r = w.api.call("POST", f"/rooms/{room}/tasks", w.tokens["bob"], raw=body)
        assert r.status == 201, (r.status, r.text[:200])
    for status in ("open", "all"):
        r = w.api.call("GET", f"/rooms/{room}/tasks?status={status}&limit=200", w.tokens["ann"])
        assert r.status == 200 and len(r.text.encode()) <= PAGE_BYTES + ENVELOPE, (r.status, len(r.text))
        assert r.body["next_cursor"] and r.body["tasks"][0]["body"] == EMOJI_BODY
        pages = _pages(w, "ann", f"/rooms/{room}/tasks?status={status}", "tasks", 200)
        assert [t["title"] for p in pages for t in p["tasks"]] == [f"t{i:02d}" for i in range(30)]
    assert w.api.ok("GET", f"/rooms/{room}/tasks?status=closed", w.tokens["ann"]) == {"tasks": [], "next_cursor": None}


# ----------------------------------------------------------------------------- every other listing
def test_approvals_memory_files_rooms_and_members_page_to_the_end(light_world: World) -> None:
    w = light_world
    d = default_deps()
    room = _room("r-lists")
    for i in range(25):
        approval = ApprovalRequest(
            id=f"run-l-{i}:0",
            room_id=room,
            run_id=f"run-l-{i}",
            index=0,
            agent_id="acme.a1",
            company="acme",
            summary="remember (room)",
            fields={"text": f"line {i}"},
            created_at=f"2026-11-30T00:01:{i:02d}.000000Z",
            status="pending" if i % 3 else "rejected",
        )
        d.room.put_approval(approval, f"token-{i}")
    every = _ids(_pages(w, "ann", f"/rooms/{room}/approvals?status=all", "approvals", 4), "approvals", "run_id")
    assert every == [f"run-l-{i}" for i in range(25)]
    pending = _ids(_pages(w, "ann", f"/rooms/{room}/approvals", "approvals", 4), "approvals", "run_id")
    assert pending == [f"run-l-{i}" for i in range(25) if i % 3]
    assert _pages(w, "bob", f"/rooms/{room}/approvals?status=all", "approvals", 4)[0]["approvals"] == []

    for i in range(12):
        person, vis = ("ann", "company") if i % 2 else ("bob", "room")
        w.api.ok("POST", f"/rooms/{room}/memory", w.tokens[person], {"text": f"m{i:02d}", "visibility": vis})
    ann = [m["text"] for p in _pages(w, "ann", f"/rooms/{room}/memory", "lines", 5) for m in p["lines"]]
    assert ann == [f"m{i:02d}" for i in range(11, -1, -1)]  # newest first: room-wide and acme's own
    bob = [m["text"] for p in _pages(w, "bob", f"/rooms/{room}/memory", "lines", 5) for m in p["lines"]]
    assert bob == [f"m{i:02d}" for i in range(10, -1, -2)]

    for i in range(7):
        w.api.ok(
            "POST",
            f"/rooms/{room}/files",
            w.tokens["ann"],
            {"name": f"f{i}.md", "content_type": "text/markdown", "size": 5},
        )
    names = sorted(f["name"] for p in _pages(w, "ann", f"/rooms/{room}/files", "files", 3) for f in p["files"])
    assert names == [f"f{i}.md" for i in range(7)]

    mine = [r for p in _pages(w, "ann", "/rooms", "rooms", 2) for r in p["rooms"]]
    assert len(mine) == len(set(mine)) and {"r1", room, "r-300"} <= set(mine) and mine == sorted(mine)

    w.api.ok("POST", f"/rooms/{room}/agents", w.tokens["ann"], {"agent": "a1"})
    w.api.ok("POST", f"/rooms/{room}/agents", w.tokens["bob"], {"agent": "b1"})
    pages = _pages(w, "bob", f"/rooms/{room}/members", "agents", 1)
    assert [a["id"] for p in pages for a in p["agents"]] == ["acme.a1", "bolt.b1"]
    assert pages[0]["members"] == ["acme", "bolt"]


# ----------------------------------------------------------------------------- bad input
def _forge(doc: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def test_a_bad_cursor_is_a_400_naming_it(light_world: World) -> None:
    w = light_world
    ann = w.tokens["ann"]
    r1 = w.api.ok("GET", "/rooms/r-300/runs?limit=2", ann)["next_cursor"]
    doc = json.loads(base64.urlsafe_b64decode(r1 + "=" * (-len(r1) % 4)))
    other_company = json.loads(json.dumps(doc).replace("acme#", "bolt#"))
    other_room = {**doc, "l": "runs:r1"}
    bad = {
        "garbage": "not-a-cursor!",
        "not json": base64.urlsafe_b64encode(b"\xff\x00").decode(),
        "deep": _forge(json.loads("[" * 50 + "]" * 50)),
        "another version": _forge({**doc, "v": 2}),
        "another company": _forge(other_company),
        "another room": _forge(other_room),
        "another listing": w.api.ok("GET", "/rooms/r-ctl/messages?limit=1", ann)["next_cursor"],
        "a key out of range": _forge({**doc, "p": {"runs": {"pk": "RUN#x", "sk": "RUN", "gsi1pk": "ROOM#r-300"}}}),
    }
    for what, cursor in bad.items():
        r = w.api.call("GET", f"/rooms/r-300/runs?cursor={cursor}", ann)
        assert r.status == 400 and r.body["error"] == "invalid_input", (what, r.status, r.body)
        assert r.body["message"].startswith("invalid cursor"), (what, r.body)
    for path in (
        "/rooms/r-300/messages",
        "/rooms/r-300/tasks",
        "/rooms/r-300/approvals",
        "/rooms/r-300/memory",
        "/rooms/r-300/files",
        "/rooms/r-300/members",
        "/rooms",
    ):
        r = w.api.call("GET", f"{path}?cursor={r1}", ann)  # a runs cursor anywhere else
        assert r.status == 400 and r.body["message"].startswith("invalid cursor"), (path, r.status, r.body)


@pytest.mark.parametrize(
    "path",
    [
        "/rooms",
        "/rooms/r-300/runs",
        "/rooms/r-300/messages",
        "/rooms/r-300/tasks",
        "/rooms/r-300/approvals",
        "/rooms/r-300/memory",
        "/rooms/r-300/files",
        "/rooms/r-300/members",
    ],
)
@pytest.mark.parametrize("limit", ["0", "201", "-1"])
def test_a_limit_out_of_range_names_the_parameter(light_world: World, path: str, limit: str) -> None:
    r = light_world.api.call("GET", f"{path}?limit={limit}", light_world.tokens["ann"])
    assert r.status == 422 and r.body["error"] == "validation_error", (r.status, r.body)
    assert "query.limit" in r.body["message"] and [f["field"] for f in r.body["fields"]] == ["query.limit"]


# ----------------------------------------------------------------------------- the document
LISTINGS = {
    "/rooms": "RoomList",
    "/rooms/{room_id}/runs": "RunList",
    "/rooms/{room_id}/messages": "MessagePage",
    "/rooms/{room_id}/tasks": "TaskList",
    "/rooms/{room_id}/approvals": "ApprovalList",
    "/rooms/{room_id}/memory": "MemoryList",
    "/rooms/{room_id}/files": "FileList",
    "/rooms/{room_id}/members": "MembersPage",
}


def test_the_openapi_document_names_limit_cursor_and_next_cursor_on_every_listing() -> None:
    from quayutec.api.app import openapi_json

    doc = json.loads(openapi_json())
    for path, schema in LISTINGS.items():
        op = doc["paths"][path]["get"]
        query = {p["name"]: p["schema"] for p in op["parameters"] if p["in"] == "query"}
        assert query["limit"].get("minimum") == 1 and query["limit"].get("maximum") == 200, path
        assert "cursor" in query, path
        assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(schema)
        assert "next_cursor" in doc["components"]["schemas"][schema]["properties"], schema


def test_the_byte_bound_measures_what_the_resolver_writes() -> None:
    """The page's items as the API serializes them: escapes counted, the bound never passed but
    by a page's one item."""
    from quayutec.api.pages import SERIALIZER, fit, serialized_bytes
    from quayutec.dal.pages import END, Page, Rows
    from quayutec.models import Author, Message

    ann = Author(kind="person", id="ann", company="acme")
    items = [
        Message(id=f"m{i}", room_id="r", author=ann, text=CONTROL_TEXT if i % 2 else EMOJI_BODY, created_at="t")
        for i in range(40)
    ]
    keys = [{"pk": "ROOM#r#MSG", "sk": f"MSG#m{i}"} for i in range(40)]
    page = Page("messages:asc:r", {"messages": Rows(items, keys, None, END)})
    got = fit(page)
    body = SERIALIZER([m.model_dump(mode="json") for m in got.items])
    assert len(body.encode()) <= PAGE_BYTES < len(body.encode()) + serialized_bytes(items[len(got.items)])
    assert serialized_bytes(items[1]) > 6 * len(CONTROL_TEXT) and serialized_bytes(items[0]) > 12 * 16_000
    assert got.next_cursor and fit(page, budget=1).items == items[:1]  # always one item
    assert fit(Page("x", {"messages": Rows(items[:2], keys[:2], None, END)})).next_cursor is None
