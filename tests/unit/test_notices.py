"""Company-only notices (design §12.5, quayutec.logic.notices): the helper's shape, the stored item
(``visible_to`` only when set), who may read one, and what the model reads of it. The read paths
that filter them are tested on the local stack: tests/api/test_api_notices.py (the messages API,
its pages) and tests/run/test_company_notices.py (a run's context)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from quayutec.dal.store import RoomStore
from quayutec.logic.notices import company_notice
from quayutec.logic.prompt import user_text
from quayutec.models import Author, Message, now_iso

pytestmark = pytest.mark.unit  # no AWS, no network: make unit


def _notice() -> Message:
    return company_notice(id="notice-acme-key-r1", room_id="r1", company="acme", text="Your key expires soon.")


def test_the_helper_builds_a_system_notice_only_its_company_sees() -> None:
    n = _notice()
    assert (n.id, n.room_id, n.kind, n.visible_to, n.text) == (
        "notice-acme-key-r1",
        "r1",
        "notice",
        "acme",
        "Your key expires soon.",
    )
    assert n.author == Author(kind="system", id="quayutec") and n.to == [] and n.mentions == []
    assert n.visible_to_company("acme") and not n.visible_to_company("bolt")
    # deterministic: the caller's id is the write's key, so a retried step writes one item
    assert company_notice(id=n.id, room_id="r1", company="acme", text=n.text).id == n.id


@pytest.mark.parametrize("bad", ["msg-0123", "reply-run1", "notice-", "acme-key"])
def test_the_helper_takes_only_notice_ids(bad: str) -> None:
    with pytest.raises(ValueError, match="notice id"):
        company_notice(id=bad, room_id="r1", company="acme", text="t")


def test_only_a_system_notice_may_be_company_only() -> None:
    ann = Author(kind="person", id="ann", company="acme")
    with pytest.raises(ValidationError, match="only a system notice"):
        Message(id="msg-1", room_id="r1", author=ann, text="secret", visible_to="acme", created_at=now_iso())
    with pytest.raises(ValidationError, match="only a system notice"):
        Message(
            id="reply-1",
            room_id="r1",
            author=Author(kind="system", id="quayutec"),
            kind="reply",
            text="t",
            visible_to="acme",
            created_at=now_iso(),
        )
    everyone = Message(id="msg-2", room_id="r1", author=ann, text="hi", created_at=now_iso())
    assert everyone.visible_to is None and everyone.visible_to_company("bolt")


def test_the_stored_item_carries_visible_to_only_when_set() -> None:
    store = RoomStore("room-table", client=object())  # builds items only: no call
    item = store._message_item(_notice(), None)
    assert item["visible_to"] == "acme" and item["sk"] == "MSG#notice-acme-key-r1"
    plain = Message(id="msg-3", room_id="r1", author=Author(kind="person", id="ann"), text="hi", created_at=now_iso())
    assert "visible_to" not in store._message_item(plain, None)


def test_the_model_reads_that_only_its_company_sees_the_notice() -> None:
    n = _notice().model_dump(mode="json")
    ctx = {
        "agent": {"id": "acme.a1", "company": "acme", "instructions": ""},
        "room": {"id": "r1", "members": ["acme", "bolt"], "agents": []},
        "messages": [n],
        "open_tasks": [],
        "memory": [],
        "passages": [],
        "cause": {"kind": "message", "message": n},
    }
    text = user_text(ctx)
    assert "[system] (only acme sees this): Your key expires soon." in text
    assert "Message from [system] (only acme sees this): Your key expires soon." in text


def test_a_repeated_post_never_answers_a_notice_of_another_company() -> None:
    """A person's post that finds its id taken answers the stored message: never a company-only
    notice the author's company may not read (notice ids never take a message's ``msg-`` form;
    this holds should one ever)."""
    from quayutec.errors import Conflict
    from quayutec.logic.room_service import RoomService
    from quayutec.models import Room

    notice = _notice()

    class Store:
        def get_room(self, room_id: str) -> Room:
            return Room(id=room_id, members=["acme", "bolt"])

        def room_agent_ids(self, room_id: str) -> list[str]:
            return []

        def named_room_agents(self, room_id: str, refs: list[str]) -> dict[str, str]:
            return {}

        def put_message(self, message: Message, wakes: object) -> bool:
            return False  # the id is taken

        def get_message(self, room_id: str, message_id: str) -> Message:
            return notice

    rooms = RoomService(Store())  # type: ignore[arg-type]
    with pytest.raises(Conflict):
        rooms.post_message("r1", Author(kind="person", id="bob", company="bolt"), "hi")
    assert rooms.post_message("r1", Author(kind="person", id="ann", company="acme"), "hi") is notice
