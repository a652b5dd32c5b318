"""A run that ends without its reply is not silent in the room (docs/design.md §2): everyone in the
room sees one notice that the agent could not answer (ask again to retry); only the agent's
company sees why. Both are keyed from the run: a second close writes nothing more."""

from __future__ import annotations

import contextvars

from runhelpers import Env

from quayutec.logic.phases.record_failure import close_failed_run
from quayutec.logic.room_service import RoomService
from quayutec.models import Author

REJECTED_KEY = {
    "error": {
        "status": 401,
        "headers": {},
        "body": {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
    }
}


def test_a_run_that_could_not_answer_tells_the_room_and_its_company_why(env: Env) -> None:
    env.server.set_script("a1", [REJECTED_KEY])
    rooms = RoomService(env.deps.room)
    ann = Author(kind="person", id="ann", company="acme")
    contextvars.copy_context().run(rooms.post_message, "r1", ann, "@a1 what is the plan?", [])
    env.stack.wait_quiet()
    (run,) = env.deps.ledger.runs_in_room("r1")
    assert run.status == "failed_before_reply"

    def notices(reader: str) -> list[str]:
        return [m.text for m in env.deps.room.recent_messages("r1", 20, reader=reader) if m.kind == "notice"]

    public = f"acme.a1 could not answer (run {run.run_id}); ask again to retry."
    assert notices("bolt") == [public]  # another company: that it did not answer, never why
    (acme_public, why) = notices("acme")
    assert acme_public == public
    assert why.startswith(f"Why acme.a1 did not answer (run {run.run_id}, failed_before_reply): ")
    assert "invalid x-api-key" in why or "authentication" in why.lower(), why
    # a second close of the same run (the reconciler after RecordFailure) writes nothing more
    assert close_failed_run(env.deps, run.run_id, None, "ExecutionFailed", "again") is None
    assert len(notices("acme")) == 2
    # a notice wakes no one: still one run
    env.stack.wait_quiet()
    assert len(env.deps.ledger.runs_in_room("r1")) == 1


def test_a_run_that_answered_leaves_no_such_notice(env: Env) -> None:
    env.server.set_script("a1", [{"reply": {"text": "Here is the plan."}}])
    rooms = RoomService(env.deps.room)
    ann = Author(kind="person", id="ann", company="acme")
    contextvars.copy_context().run(rooms.post_message, "r1", ann, "@a1 what is the plan?", [])
    env.stack.wait_quiet()
    kinds = [m.kind for m in env.deps.room.recent_messages("r1", 20, reader="acme")]
    assert kinds == ["message", "reply"]
