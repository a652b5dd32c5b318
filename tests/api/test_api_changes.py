"""``GET /rooms/{room}/changes`` (design §9, §14): one request for what changed in a room since a
cursor (messages, approvals, tasks, runs, files), each change once, the cursor continuing without
repeats or gaps, bounded in count and in bytes whatever the content, members only."""

from __future__ import annotations

import base64
import json
from typing import Any

from apihelpers import World

from quaylab.costs import counted_reads
from quayutec.dal.files import upload_key
from quayutec.dal.ledger import LIVE_READ_LIMIT
from quayutec.deps import default_deps
from quayutec.logic.access import Caller
from quayutec.logic.changes import KINDS, MAX_CHANGES_BYTES, Changes, encode_cursor
from quayutec.logic.services import Services


def changes(w: World, room: str, person: str, since: str | None, limit: int | None = None) -> dict[str, Any]:
    q = [f"since={since}"] if since else []
    if limit is not None:
        q.append(f"limit={limit}")
    return w.api.ok("GET", f"/rooms/{room}/changes" + ("?" + "&".join(q) if q else ""), w.tokens[person])


def drain(w: World, room: str, person: str, cursor: str, limit: int | None = None) -> tuple[list[dict], str, int]:
    """Follow the cursor until ``more`` is false: every answer, merged, the last cursor, calls."""
    answers, calls = [], 0
    while True:
        got = changes(w, room, person, cursor, limit)
        calls += 1
        answers.append(got)
        cursor = got["cursor"]
        if not got["more"]:
            return answers, cursor, calls
        assert calls < 100


def ids(answers: list[dict], kind: str, key: str = "id") -> list[str]:
    return [item[key] for a in answers for item in a[kind]]


def test_each_change_appears_once_for_who_may_see_it(stack_env, world: World) -> None:
    w, (stack, _) = world, stack_env
    start = changes(w, "r1", "ann", None)
    assert {k: start[k] for k in KINDS} == {key: [] for key in KINDS} and not start["more"]
    bob_start = changes(w, "r1", "bob", None)["cursor"]

    msg = w.api.ok("POST", "/rooms/r1/messages", w.tokens["bob"], {"text": "hello from bolt"})
    task = w.api.ok("POST", "/rooms/r1/tasks", w.tokens["ann"], {"to": "b1", "title": "review"})
    up = w.api.ok(
        "POST", "/rooms/r1/files", w.tokens["ann"], {"name": "n.md", "content_type": "text/markdown", "size": 9}
    )
    w.api.ok("POST", f"/rooms/r1/approvals/{w.ids['approval']}/deny", w.tokens["ann"])  # a1's run goes on
    stack.wait_quiet(60)

    answers, cursor, _ = drain(w, "r1", "ann", start["cursor"])
    assert ids(answers, "messages").count(msg["id"]) == 1
    assert ids(answers, "tasks") == [task["id"]]
    assert ids(answers, "files") == [up["file"]["id"]]
    approvals = [a for x in answers for a in x["approvals"]]
    assert [(a["id"], a["status"]) for a in approvals] == [(w.ids["approval"], "rejected")]
    runs = [r for x in answers for r in x["runs"]]
    assert [r["run_id"] for r in runs] == [w.ids["run"]] and runs[0]["status"] not in ("running", "waiting")
    # nothing new: an empty answer, the same positions
    again = changes(w, "r1", "ann", cursor)
    assert {k: again[k] for k in KINDS} == {key: [] for key in KINDS} and not again["more"]
    # bolt sees the room's messages, tasks and files, never acme's approvals or runs
    bob, _, _ = drain(w, "r1", "bob", bob_start)
    assert msg["id"] in ids(bob, "messages") and ids(bob, "tasks") == [task["id"]]
    assert ids(bob, "approvals") == []
    assert {r["company"] for x in bob for r in x["runs"]} <= {"bolt"}  # b1's run of the task, if any

    # a change of an item brings it again, in its new state, once
    w.api.ok("POST", f"/rooms/r1/tasks/{task['id']}/close", w.tokens["ann"], {"result": "done"})
    stack.client("s3").put_object(
        Bucket=default_deps().files.bucket, Key=upload_key("r1", up["file"]["id"]), Body=b"# n\nnine\n"
    )
    stack.wait_quiet(60)
    later, _, _ = drain(w, "r1", "ann", cursor)
    assert [(t["id"], t["status"]) for x in later for t in x["tasks"]] == [(task["id"], "closed")]
    assert [(f["id"], f["status"]) for x in later for f in x["files"]] == [(up["file"]["id"], "ready")]
    assert ids(later, "approvals") == [] and ids(later, "runs", "run_id") == []


def test_the_cursor_continues_without_repeats_or_gaps(world: World) -> None:
    w = world
    cursor = changes(w, "r1", "amy", None)["cursor"]
    posted = [w.api.ok("POST", "/rooms/r1/messages", w.tokens["bob"], {"text": f"m{i}"})["id"] for i in range(23)]
    answers, last, calls = drain(w, "r1", "amy", cursor, limit=5)
    assert ids(answers, "messages") == posted  # in order, each once
    assert calls == 5 and [len(a["messages"]) for a in answers] == [5, 5, 5, 5, 3]
    assert all(a["more"] for a in answers[:-1])
    more = w.api.ok("POST", "/rooms/r1/messages", w.tokens["ann"], {"text": "one more"})["id"]
    assert ids([changes(w, "r1", "amy", last, limit=5)], "messages") == [more]


def test_members_only_as_the_other_room_reads(world: World) -> None:
    w = world
    for person in ("carl", "admin"):
        listing = w.api.call("GET", "/rooms/r1/messages", w.tokens[person])
        got = w.api.call("GET", "/rooms/r1/changes", w.tokens[person])
        assert (got.status, got.body["error"]) == (listing.status, listing.body["error"]), person
    assert w.api.call("GET", "/rooms/r1/changes", w.tokens["carl"]).status == 404
    assert w.api.call("GET", "/rooms/r1/changes", w.tokens["admin"]).status == 403
    assert w.api.call("GET", "/rooms/no-such-room/changes", w.tokens["ann"]).status == 404
    assert w.api.call("GET", "/rooms/r1/changes").status == 401


def test_a_bad_cursor_is_a_400_with_a_clear_message(world: World) -> None:
    w = world
    other = changes(w, "r-cato", "carl", None)["cursor"]  # another room's cursor
    forged = base64.urlsafe_b64encode(json.dumps({"v": 1, "room": "r1", "at": {"messages": "x"}}).encode()).decode()
    deep = base64.urlsafe_b64encode(b"[" * 1000).decode()
    for bad in ("not-a-cursor", other, forged, deep, "%00%01"):
        got = w.api.call("GET", f"/rooms/r1/changes?since={bad}", w.tokens["ann"])
        assert got.status == 400, (bad, got.status, got.body)
        assert got.body["error"] == "invalid_input" and "since" in got.body["message"], got.body
    too_long = w.api.call("GET", "/rooms/r1/changes?since=" + "a" * 3000, w.tokens["ann"])
    assert too_long.status in (400, 422)
    assert w.api.call("GET", "/rooms/r1/changes?limit=0", w.tokens["ann"]).status in (400, 422)
    assert w.api.call("GET", "/rooms/r1/changes?limit=101", w.tokens["ann"]).status in (400, 422)


def test_bounded_in_bytes_and_reads_whatever_the_content(world: World) -> None:
    """100 messages of 10,920 control characters (each escaped to six bytes, 6.5 MB of JSON in
    all) page through in answers of at most 1 MiB of items, each once; one answer reads a
    bounded number of items however long the room's history."""
    w = world
    d = default_deps()
    ann = Caller(company="acme", member="ann")  # the room made as POST /rooms makes one
    Services(d).rooms.create(ann, name="r-big", members=["acme", "bolt"], room_id="r-big")
    w.api.ok("POST", "/rooms/r-big/invitations/accept", w.tokens["bob"])  # bolt accepts (design §5)
    cursor = changes(w, "r-big", "ann", None)["cursor"]
    hostile = "\x01" * 10_920
    posted = [w.api.ok("POST", "/rooms/r-big/messages", w.tokens["bob"], {"text": hostile})["id"] for _ in range(100)]
    seen: list[str] = []
    while True:
        r = w.api.call("GET", f"/rooms/r-big/changes?since={cursor}&limit=100", w.tokens["ann"])
        assert r.status == 200, r.status
        assert len(r.text.encode()) < MAX_CHANGES_BYTES + 64 * 1024, len(r.text)
        seen += [m["id"] for m in r.body["messages"]]
        cursor = r.body["cursor"]
        if not r.body["more"]:
            break
    assert seen == posted

    # the reads of one answer: one query per kind, at most `limit` items each, and one of the
    # room's live items (busy agents, refused wakes: design §9), whatever came before
    service = Changes(d)
    start = encode_cursor("r-big", dict.fromkeys(KINDS, "2000-01-01T00:00:00.000000Z"))
    got, reads = counted_reads(d.room.db, lambda: service.since(Caller("acme", "ann"), "r-big", start, limit=10))
    assert len(got.messages) <= 10 and got.more
    assert reads["queries"] <= len(KINDS) + 1, reads
    assert reads["items_read"] <= 10 * len(KINDS) + LIVE_READ_LIMIT, reads
    # a quiet poll: one query per kind and the live one, no more
    _, quiet = counted_reads(d.room.db, lambda: service.since(Caller("acme", "ann"), "r-big", cursor))
    assert quiet["queries"] == len(KINDS) + 1, quiet


def test_a_deleted_file_is_reported_by_its_id(stack_env, world: World) -> None:
    """Design §9: a file deleted since the cursor comes in ``deleted_files`` (its record is gone,
    a tombstone holds its place in the changes feed); the files listing does not list it."""
    w, (stack, _) = world, stack_env
    up = w.api.ok(
        "POST", "/rooms/r1/files", w.tokens["ann"], {"name": "gone.md", "content_type": "text/markdown", "size": 9}
    )
    file_id = up["file"]["id"]
    cursor = drain(w, "r1", "bob", changes(w, "r1", "bob", None)["cursor"])[1]
    w.api.ok("DELETE", f"/rooms/r1/files/{file_id}", w.tokens["ann"])
    stack.wait_quiet(60)
    answers, cursor, _ = drain(w, "r1", "bob", cursor)
    assert [i for a in answers for i in a["deleted_files"]] == [file_id]
    assert file_id not in ids(answers, "files")
    listed = w.api.ok("GET", "/rooms/r1/files", w.tokens["bob"])
    assert file_id not in [f["id"] for f in listed["files"]]
    # once reported, not again
    assert changes(w, "r1", "bob", cursor)["deleted_files"] == []
