"""Company-only notices through the messages API (design §12.5): a notice for acme is in acme's
people's transcript and in no one else's, and pages stay whole around the notices a reader does
not see: a page is short only when it has a next cursor, and a cursor after a page with messages
names the page's last message, never a hidden notice."""

from __future__ import annotations

import base64
import json

import pytest
from apihelpers import World

from quayutec.dal import pages as pages_dal
from quayutec.deps import default_deps
from quayutec.logic.notices import company_notice

SECRET = "acme only: your provider key expires on Friday"


def _notice(room: str, n: str, company: str = "acme", text: str = SECRET) -> str:
    notice = company_notice(id=f"notice-test-{n}", room_id=room, company=company, text=text)
    assert default_deps().room.put_message(notice)
    return notice.id


def _pages(w: World, person: str, room: str, limit: int, order: str = "asc") -> list[tuple[list[dict], str | None]]:
    """Every page a person reads of a room's messages: ``(messages, next_cursor)``."""
    out: list[tuple[list[dict], str | None]] = []
    cursor = None
    for _ in range(100):
        q = f"?limit={limit}&order={order}" + (f"&cursor={cursor}" if cursor else "")
        page = w.api.ok("GET", f"/rooms/{room}/messages{q}", w.tokens[person])
        out.append((page["messages"], page["next_cursor"]))
        cursor = page["next_cursor"]
        if not cursor:
            return out
    raise AssertionError("the pages never ended")


def _cursor_sk(cursor: str) -> str:
    """The sort key of the last message a cursor names (its ``messages`` part, quayutec.dal.pages)."""
    return json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))["p"]["messages"]["sk"]


def test_a_company_only_notice_is_read_by_its_company_alone(light_world: World) -> None:
    w = light_world
    w.api.ok("POST", "/rooms/r1/messages", w.tokens["bob"], {"text": "before the notice"})
    nid = _notice("r1", "key")
    w.api.ok("POST", "/rooms/r1/messages", w.tokens["bob"], {"text": "after the notice"})
    for person in ("ann", "amy"):  # acme's people
        seen = [m for page, _ in _pages(w, person, "r1", 50) for m in page]
        [notice] = [m for m in seen if m["id"] == nid]
        assert notice["text"] == SECRET and notice["visible_to"] == "acme" and notice["kind"] == "notice"
    for order in ("asc", "desc"):  # bolt's person: not there, in either order, nor its text
        pages = _pages(w, "bob", "r1", 50, order)
        texts = [m["text"] for page, _ in pages for m in page]
        assert "before the notice" in texts and "after the notice" in texts
        assert SECRET not in json.dumps(pages) and nid not in json.dumps(pages)
    assert w.api.call("GET", "/rooms/r1/messages", w.tokens["carl"]).status == 404  # outside the room: as ever


def _room_with_notices(room: str) -> tuple[list[str], list[str]]:
    """A room of acme and bolt: bolt's messages m0..m5 with runs of acme-only notices between and
    after them. Returns (bolt's texts, the notice ids), in time order."""
    from quayutec.logic.access import Caller
    from quayutec.logic.room_service import RoomService
    from quayutec.logic.services import Services
    from quayutec.models import Author

    acme = Caller(company="acme", member="ann")
    Services(default_deps()).rooms.create(acme, name=room, members=["bolt"], room_id=room)
    Services(default_deps()).rooms.accept(Caller(company="bolt", member="bob"), room)  # design §5
    rooms = RoomService(default_deps().room)
    bob = Author(kind="person", id="bob", company="bolt")
    texts, hidden = [], []
    for i, run in enumerate([3, 0, 5, 1, 0, 2, 4]):
        hidden += [_notice(room, f"{room}-{i}-{j}", text=f"{SECRET} #{i}.{j}") for j in range(run)]
        if i < 6:
            texts.append(rooms.post_message(room, bob, f"m{i}").text)
    return texts, hidden


@pytest.mark.parametrize("limit", [1, 2, 4])
def test_pages_fill_past_the_notices_a_reader_does_not_see(light_world: World, limit: int) -> None:
    room = f"r-pages-{limit}"
    texts, hidden = _room_with_notices(room)
    for order, want in (("asc", texts), ("desc", texts[::-1])):
        pages = _pages(light_world, "bob", room, limit, order)
        assert [m["text"] for page, _ in pages for m in page] == want
        # Every page but the last is full: none is short, none looks final before the end.
        assert all(len(page) == limit for page, _ in pages[:-1]), [len(p) for p, _ in pages]
        assert len(pages) <= -(-len(want) // limit) + 1  # at most one more: an empty last page
        assert all(_cursor_sk(c)[len("MSG#") :] not in hidden for _, c in pages if c)
    acme = [m for page, _ in _pages(light_world, "ann", room, limit) for m in page]
    assert len(acme) == len(texts) + len(hidden) and [m["id"] for m in acme if m["kind"] == "notice"] == hidden


def test_a_page_bounded_in_reads_is_short_only_with_a_cursor(
    light_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one read per page (the bound reached at once), pages may be short, never final
    before the end, and a cursor after a page with messages names its last message."""
    monkeypatch.setattr(pages_dal, "FILTERED_READS", 1)
    room = "r-bounded"
    texts, _ = _room_with_notices(room)
    pages = _pages(light_world, "bob", room, 2)
    assert [m["text"] for page, _ in pages for m in page] == texts
    assert any(len(page) < 2 for page, c in pages if c)  # the bound did cut pages short
    for page, cursor in pages:
        if page and cursor:
            assert _cursor_sk(cursor) == "MSG#" + page[-1]["id"]
