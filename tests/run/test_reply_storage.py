"""Where a run keeps its model reply (SPEC §2.3, §10): on the request's own ledger write, so no
outcome is stored without its reply and no object write is paid for; a reply too large for a
DynamoDB item (400 KB) goes to the run-data bucket and the ledger names the place."""

from __future__ import annotations

import contextvars

from quaylocal import calls as C
from quayutec import resources as r
from quayutec.logic.room_service import RoomService
from quayutec.models import Author

from runhelpers import Env, s3_keys, table_items

ANN = Author(kind="person", id="ann", company="acme")


def _post(env: Env, text: str) -> None:
    def post() -> None:
        with C.owner(C.SETUP):
            RoomService(env.deps.room).post_message("r1", ANN, text, [])
    contextvars.copy_context().run(post)
    env.stack.wait_quiet()


def _requests(env: Env) -> list[dict]:
    return [i for i in table_items(env.stack, r.LEDGER_TABLE.default_name) if str(i.get("sk", "")).startswith("REQ#")]


def test_a_reply_rides_on_its_request_record(env: Env) -> None:
    env.server.set_script("a1", [{"reply": {"text": "Noted, thanks.", "actions": []}}])
    _post(env, "@a1 hello")
    (req,) = _requests(env)
    assert req["outcome"] == "ok" and req["reply"]["text"] == "Noted, thanks." and "reply_at" not in req
    assert not [k for k in s3_keys(env.stack, r.RUN_DATA_BUCKET.default_name) if k.endswith("/reply.json")]
    replies = [m for m in env.deps.room.all_messages("r1") if m.kind == "reply"]
    assert [m.text for m in replies] == ["Noted, thanks."]
    # the API's view of the request carries no reply (the room has it)
    assert "reply" not in env.deps.ledger.model_requests(req["pk"][len("RUN#"):])[0].model_dump()


def test_a_reply_too_large_for_an_item_goes_to_run_data(env: Env) -> None:
    big = [{"kind": "remember", "text": f"note {i} " + "x" * 7000, "visibility": "room"} for i in range(60)]
    env.server.set_script("a1", [{"reply": {"text": "Many notes.", "actions": big}}])
    _post(env, "@a1 take notes")
    (req,) = _requests(env)
    assert req["outcome"] == "ok" and req["reply_at"] == "run-data" and "reply" not in req
    run_id = req["pk"][len("RUN#"):]
    assert f"runs/{run_id}/reply.json" in s3_keys(env.stack, r.RUN_DATA_BUCKET.default_name)
    run = env.deps.ledger.get_run(run_id)
    assert run is not None and run.status == "completed", run
    replies = [m for m in env.deps.room.all_messages("r1") if m.kind == "reply"]
    assert len(replies) == 1 and replies[0].text.startswith("Many notes.")
    assert "denied" in replies[0].text  # 60 declared: over the limit of 25, and each text too long
