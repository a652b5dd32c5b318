"""Company-only notices (design §5): a system notice in a room that only one company's people and
agents read (``Message.visible_to``). Every read path filters them for the reader's company: the
messages API (the caller's company), a run's context (its agent's company: recent messages and the
wake's cause). Only the operator's tools (the scenario player's transcript) read them all.

A notice wakes no one (design §3): it is written with no wakes, e.g.
``deps.room.put_message(company_notice(...))``, once (its id is the write's key).
"""

from __future__ import annotations

from quayutec.models import Author, Message, now_iso

#: Where every notice id starts: never an id a person's message (``msg-…``) or a reply (``reply-…``) has.
NOTICE_PREFIX = "notice-"


def company_notice(
    *,
    id: str,
    room_id: str,
    company: str,
    text: str,
    run_id: str | None = None,
    chain_id: str | None = None,
) -> Message:
    """A system notice of room ``room_id`` that only ``company`` (a member of the room) sees:
    ``Message(kind="notice", author=system, visible_to=company)``. ``id``: the caller's
    deterministic id, ``notice-…`` (derived from what the notice is about, so a retried step
    writes the same item once); ``run_id`` / ``chain_id``: the run or chain it is about, if any.
    Raises ValueError for an id that is not a notice id."""
    if not id.startswith(NOTICE_PREFIX) or len(id) == len(NOTICE_PREFIX):
        raise ValueError(f"a notice id starts with {NOTICE_PREFIX!r}: {id!r}")
    return Message(
        id=id,
        room_id=room_id,
        author=Author(kind="system", id="quayutec"),
        kind="notice",
        text=text,
        run_id=run_id,
        chain_id=chain_id,
        visible_to=company,
        created_at=now_iso(),
    )
