"""A company holds its spend (design §12.4): each model request reserves its worst case against the
company's budgets in the transaction that records it, before it is sent, and the answer settles
the reserve to the reported usage, once. Real path on the local stack: stream, queue, executions,
the provider's wire format from the local server."""

from __future__ import annotations

import pytest
from runhelpers import Env

from quayutec.dal.keys import spend_key
from quayutec.logic import budgets
from quayutec.logic.room_service import RoomService
from quayutec.models import Author, BudgetLimits, CompanyBudget, RunRecord

ANN = Author(kind="person", id="ann", company="acme")
BOB = Author(kind="person", id="bob", company="bolt")


def _runs(env: Env, agent_id: str) -> list[RunRecord]:
    return sorted((r for r in env.deps.ledger.runs_in_room("r1") if r.agent_id == agent_id), key=lambda r: r.started_at)


def _counter(env: Env, period: str) -> dict:
    key = budgets.periods(env.deps.clock())[period]
    item = env.deps.ledger.db.get_item(TableName=env.deps.ledger.table, Key=spend_key("acme", key)).get("Item")
    return item or {}


@pytest.mark.parametrize("env", [{"a1_model": "claude-sonnet-4-5"}], indirect=True, ids=["sonnet"])
def test_a_daily_budget_stops_requests_before_they_are_sent(env: Env) -> None:
    """acme's daily budget of $0.10; its agent on claude-sonnet-4-5, whose replies report 5,000
    input and 800 output tokens ($0.027 each), is woken six times: at most three requests reach
    the provider, the later runs end failed_before_reply ("budget reached"), acme reads the
    notices (80 %, then 100 %), bolt reads none, and bolt's agent answers as before."""
    d = env.deps
    d.room.put_budget("acme", CompanyBudget(daily_usd=0.10))
    env.server.set_script("a1", [{"reply": {"text": "noted", "usage": {"input": 5000, "output": 800}}}] * 6)
    rooms = RoomService(d.room)
    for i in range(6):
        rooms.post_message("r1", ANN, f"@a1 note {i}", [])
        env.stack.wait_quiet(30)
    sent = env.server.count("a1")
    assert 1 <= sent <= 3, sent
    runs = _runs(env, "acme.a1")
    assert len(runs) == 6
    assert [r.status for r in runs] == ["completed"] * sent + ["failed_before_reply"] * (6 - sent)
    assert all(
        r.error_message and "budget reached: acme's daily budget of $0.10" in r.error_message for r in runs[sent:]
    )
    # the counters hold what was spent: the reported usage, priced, no reserve left over
    day = _counter(env, "day")
    assert int(day["committed_usd"]) == sent * 27_000 and int(day["reserved_usd"]) == 0
    assert int(day["committed_usd"]) <= 100_000, "the budget was never passed"
    assert int(_counter(env, "month")["committed_usd"]) == sent * 27_000
    # acme's notices, once each; bolt sees none of them
    texts = [m.text for m in d.room.recent_messages("r1", 50, reader="acme") if m.kind == "notice"]
    assert sum("Budget reached: acme's daily budget of $0.10" in t for t in texts) == 1, texts
    assert sum("80 % of acme's daily budget" in t for t in texts) == 1, texts
    assert not [m for m in d.room.recent_messages("r1", 50, reader="bolt") if "budget" in m.text.lower()]
    # another company's agent in the same room answers as before
    env.server.set_script("b1", [{"reply": {"text": "still here"}}])
    rooms.post_message("r1", BOB, "@b1 and you?", [])
    env.stack.wait_quiet(30)
    assert [r.status for r in _runs(env, "bolt.b1")] == ["completed"]


def test_concurrent_wakes_never_pass_a_budget(env: Env) -> None:
    """Twenty wakes of acme's agent started at once (the runs overlap at the provider), with a
    token budget (its model has no known price, its replies report no usage: each keeps its
    reserve) that fits a handful of reserves: the requests that reach the provider are exactly
    those whose reserves fit, their reserves never pass the budget, and the next would have."""
    d = env.deps
    budget = 20_000  # each reserve: the prompt's UTF-8 bytes (+1) and the reply's 2,048 tokens
    d.room.put_budget("acme", CompanyBudget(agents={"a1": BudgetLimits(daily_tokens=budget)}))
    env.server.set_script("a1", [{"reply": {"text": "ok", "usage": None}, "delay_s": 2.0}] * 20)
    rooms = RoomService(d.room)
    with env.stack.paused():
        for i in range(20):
            rooms.post_message("r1", ANN, f"@a1 job {i}", [])
    env.stack.wait_quiet(60)
    sent = [r for r in env.server.requests if r.agent_id == "acme.a1"]
    runs = _runs(env, "acme.a1")
    assert len(runs) == 20 and 2 <= len(sent) < 20, len(sent)
    assert sum(r.status == "completed" for r in runs) == len(sent)
    refused = [r for r in runs if r.status != "completed"]
    assert all("budget reached: acme.a1's daily budget of 20,000 tokens" in (r.error_message or "") for r in refused)
    reserves = [q.reserve_tokens for r in runs for q in d.ledger.model_requests(r.run_id)]
    assert len(reserves) == len(sent), "a refused request is never recorded"
    day = _counter(env, "day")
    assert int(day["agent_tokens:acme.a1"]) == sum(reserves) <= budget, "unreported usage keeps the reserve"
    assert int(day["reserved_tokens"]) == 0
    assert budget - sum(reserves) < max(reserves), "a further reserve would have passed the budget"
    times = sorted(r.time for r in sent)  # side by side: a request started before another was answered
    assert times[1] - times[0] < 2.0


@pytest.mark.parametrize("env", [{"a1_model": "claude-haiku-4-5"}], indirect=True, ids=["haiku"])
def test_spend_equals_the_runs_cost_lines(env: Env) -> None:
    """For a day whose runs have all ended, the spend counter equals the sum of the runs' cost
    lines' model cost (every reply reported its usage)."""
    d = env.deps
    env.server.set_script("a1", [{"reply": {"text": f"answer {i}"}} for i in range(3)])
    rooms = RoomService(d.room)
    for i in range(3):
        rooms.post_message("r1", ANN, f"@a1 question {i}", [])
    env.stack.wait_quiet(60)
    runs = _runs(env, "acme.a1")
    assert [r.status for r in runs] == ["completed"] * 3
    model_usd = sum((r.cost.model_usd or 0.0) for r in runs if r.cost)
    day = _counter(env, "day")
    assert int(day["reserved_usd"]) == 0
    assert abs(int(day["committed_usd"]) / 1e6 - model_usd) < 3e-6, (day, model_usd)  # rounded up per request
