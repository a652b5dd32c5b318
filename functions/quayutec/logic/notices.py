"""Company-only notices (design §12.5): a system notice in a room that only one company's people and
agents read (``Message.visible_to``). Every read path filters them for the reader's company: the
messages API (the caller's company), a run's context (its agent's company: recent messages and the
wake's cause). Only the operator's tools (the scenario player's transcript) read them all.

A notice wakes no one (design §3): it is written with no wakes, e.g.
``deps.room.put_message(company_notice(...))``, once (its id is the write's key).
"""

from __future__ import annotations

from quayutec.logic import ids
from quayutec.models import AskAgain, Author, Message, now_iso

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


#: The words of a run's end without its reply, by final status (design §2).
_UNANSWERED = {
    "failed_before_reply": "could not answer",
    "timed_out": "ran out of time before it answered",
}
#: The longest cause a company's notice quotes (the ledger keeps the whole message).
CAUSE_CHARS = 500


def unanswered_notices(
    *,
    run_id: str,
    room_id: str,
    agent_id: str,
    company: str,
    status: str,
    error: str,
    message: str,
    asked: str | None = None,
) -> list[Message]:
    """The notices of a run that ended without its reply (``status``: ``failed_before_reply`` or
    ``timed_out``; any other: none), so no one waits for an answer that will not come (design
    §2): one that everyone in the room sees ("acme.a1 could not answer (run …); ask again to
    retry"), and one that only the agent's ``company`` sees, with the cause (``error``, the error
    name, and the first :data:`CAUSE_CHARS` characters of ``message``). Both are keyed from the
    run (:func:`quayutec.logic.ids.run_end_notice_ids`), so a retried or concurrent close writes
    each once; they wake no one. The room's notice carries ``ask_again`` (the agent, and
    ``asked``: the id of the message whose wake started the run, ``None`` for a task's): what the
    room page's "Ask again" re-asks (design §9)."""
    what = _UNANSWERED.get(status)
    if what is None:
        return []
    public_id, cause_id = ids.run_end_notice_ids(run_id)
    public = Message(
        id=public_id,
        room_id=room_id,
        author=Author(kind="system", id="quayutec"),
        kind="notice",
        text=f"{agent_id} {what} (run {run_id}); ask again to retry.",
        run_id=run_id,
        ask_again=AskAgain(agent=agent_id, message_id=asked),
        created_at=now_iso(),
    )
    cause = " ".join(message.split())[:CAUSE_CHARS]
    private = company_notice(
        id=cause_id,
        room_id=room_id,
        company=company,
        text=f"Why {agent_id} did not answer (run {run_id}, {status}): {error}" + (f": {cause}" if cause else ""),
        run_id=run_id,
    )
    return [public, private]
