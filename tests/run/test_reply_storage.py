"""Where a run keeps its model reply (design §2.3, §10): on the request's own ledger write, so no
outcome is stored without its reply and no object write is paid for; a reply too large for a
DynamoDB item (400 KB) goes to the run-data bucket and the ledger names the place."""

from __future__ import annotations

import contextvars
import json

from runhelpers import Env, s3_keys, table_items

from quaylocal import calls as C
from quayutec import resources as r
from quayutec.logic.room_service import RoomService
from quayutec.models import Author

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
    assert req["outcome"] == "ok" and json.loads(req["reply"])["text"] == "Noted, thanks." and "reply_at" not in req
    assert not [k for k in s3_keys(env.stack, r.RUN_DATA_BUCKET.default_name) if k.endswith("/reply.json")]
    replies = [m for m in env.deps.room.all_messages("r1") if m.kind == "reply"]
    assert [m.text for m in replies] == ["Noted, thanks."]
    # the API's view of the request carries no reply (the room has it)
    assert "reply" not in env.deps.ledger.model_requests(req["pk"][len("RUN#") :])[0].model_dump()


def test_a_reply_too_large_for_an_item_goes_to_run_data(env: Env) -> None:
    big = [{"kind": "remember", "text": f"note {i} " + "x" * 7000, "visibility": "room"} for i in range(60)]
    env.server.set_script("a1", [{"reply": {"text": "Many notes.", "actions": big}}])
    _post(env, "@a1 take notes")
    (req,) = _requests(env)
    assert req["outcome"] == "ok" and req["reply_at"] == "run-data" and "reply" not in req
    run_id = req["pk"][len("RUN#") :]
    assert f"runs/{run_id}/reply.json" in s3_keys(env.stack, r.RUN_DATA_BUCKET.default_name)
    run = env.deps.ledger.get_run(run_id)
    assert run is not None and run.status == "completed", run
    replies = [m for m in env.deps.room.all_messages("r1") if m.kind == "reply"]
    assert len(replies) == 1 and replies[0].text.startswith("Many notes.")
    assert "denied" in replies[0].text  # 60 declared: over the limit of 25, and each text too long


def test_whatever_the_model_wrote_is_stored_as_it_came(env: Env) -> None:
    """Numbers DynamoDB cannot hold (over 38 digits, below 1e-130) and empty keys in a tool call's
    input: the reply is stored as its JSON text, the run completes, the odd action is denied."""
    odd = {"kind": "remember", "text": "x", "visibility": "room", "n": 10**45, "tiny": 1e-200, "": 1}
    env.server.set_script("a1", [{"reply": {"text": "Odd numbers.", "actions": [odd]}}])
    _post(env, "@a1 count")
    (req,) = _requests(env)
    run_id = req["pk"][len("RUN#") :]
    run = env.deps.ledger.get_run(run_id)
    assert run is not None and run.status == "completed", run
    stored = json.loads(req["reply"])
    assert stored["tool_calls"][0]["input"]["n"] == 10**45 and stored["tool_calls"][0]["input"][""] == 1
    [action] = env.deps.ledger.actions(run_id)
    assert action.decision == "deny" and "unexpected field" in action.reason


def test_a_plain_reply_with_more_notices_than_a_transaction_holds_still_lands(env: Env) -> None:
    """A reply that @mentions 100 agents past the hop limit has 100 notices: more than one
    transaction holds (100 entries with the reply and the final write), so the reply, its
    notices and the final write land one after another instead, all of them."""
    from runhelpers import ANN as ACME_ANN
    from runhelpers import BOB

    from quaylocal import calls as C
    from quayutec.logic.services import Services

    d = env.deps
    names = [f"n{i}" for i in range(100)]
    with C.owner(C.SETUP):
        svc = Services(d)  # as through the API: the room, acme's a1 and bolt's 100 agents
        svc.rooms.create(ACME_ANN, name="crowd", members=["bolt"], hop_limit=0, room_id="crowd")
        svc.rooms.accept(BOB, "crowd")  # bolt accepts its invitation (design §5)
        svc.rooms.place_agent(ACME_ANN, "crowd", "a1")
        for name in names:
            svc.agents.register(BOB, name=name, provider="openai", model="m")
            svc.rooms.place_agent(BOB, "crowd", name)
    env.server.set_script("a1", [{"reply": {"text": "Hello " + " ".join(f"@{n}" for n in names), "actions": []}}])

    def post() -> None:
        with C.owner(C.SETUP):
            RoomService(d.room).post_message("crowd", ANN, "@a1 greet everyone", [])

    contextvars.copy_context().run(post)
    env.stack.wait_quiet()
    (run,) = d.ledger.runs_in_room("crowd")
    assert run.status == "completed", run
    messages = d.room.all_messages("crowd")
    assert sum(m.kind == "reply" for m in messages) == 1
    assert sum(m.kind == "notice" for m in messages) == 100
