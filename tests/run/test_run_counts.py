"""Counted figures of a plain run (design §10), pinned so a regression shows: AWS calls and
writes from the call recorder, transitions from the execution history, Lambda invocations
(issue 13 has the budget; these are today's counts, lower them as the run gets cheaper)."""

from __future__ import annotations

from runhelpers import Env

from quaylab.costs import plain_runs

#: Today's counts of one plain run (warm: the second run of the process), in a room that holds
#: no memory yet: the wake path (SendMessageBatch, StartExecution); ClaimAndRead (BatchGetItem,
#: the claim transaction, recent messages, open tasks, PutObject context); CallModel (GetObject
#: context, its company's budget and spend counters in one BatchGetItem, the request's two ledger
#: transactions: reserve, then the reply with the settlement); DecideAndPost (GetItem reply, one
#: transaction: reply + final write). Fair turns (design §12.3) add two transactions: the
#: company's turn taken in ClaimAndRead and given back after the final write.
AWS_CALLS_PER_PLAIN_RUN = 15
WRITES_PER_PLAIN_RUN = 6
TRANSITIONS_PER_PLAIN_RUN = 6
#: The wake relay once (the person's message, which carries the wake: the stream's filter keeps
#: the reply, which carries none, from invoking it), the wake consumer, three phases.
LAMBDA_INVOCATIONS_PER_PLAIN_RUN = 5
#: Issue 13's budget for one plain run; one call more since budgets (design §12.4: the read of the
#: company's budget and spend counters before each request), two more since fair turns (§12.3:
#: the turn taken and given back; no state and no invocation more).
BUDGET = {"aws_calls": 15, "writes": 6, "transitions": 7, "lambda_invocations": 6}


def test_a_plain_run_costs_what_it_cost(env: Env) -> None:
    first, second = plain_runs(env.stack, env.server, 2)
    for figure, most in BUDGET.items():
        assert getattr(second, figure) <= most, (figure, second.by_operation)
    assert second.aws_calls == AWS_CALLS_PER_PLAIN_RUN, second.by_operation
    assert second.writes == WRITES_PER_PLAIN_RUN
    assert second.transitions == TRANSITIONS_PER_PLAIN_RUN
    assert second.lambda_invocations == LAMBDA_INVOCATIONS_PER_PLAIN_RUN
    # The first run of the process reads the company's key; the next ones find it cached (60 s).
    assert first.by_operation.pop("secrets-manager.GetSecretValue") == 1
    assert first.by_operation == second.by_operation


#: A run whose reply declares one allowed action (a room memory line): DecideAndPost also reads
#: the recorded actions and the company's policy and records the decision; ApplyAndFinish reads
#: the run and its actions, writes the line (its partition marked on the room item by an earlier run),
#: records its outcome and writes the final status (the hop limit travels in the state); the
#: company's turn taken and given back (design §12.3).
AWS_CALLS_PER_ONE_ACTION_RUN = 25
WRITES_PER_ONE_ACTION_RUN = 10


def test_a_run_with_one_action_costs_what_it_cost(env: Env) -> None:
    remember = [{"kind": "remember", "text": "counted line", "visibility": "room"}]
    _, second = plain_runs(env.stack, env.server, 2, actions=remember)
    assert second.aws_calls == AWS_CALLS_PER_ONE_ACTION_RUN, second.by_operation
    assert second.writes == WRITES_PER_ONE_ACTION_RUN
    # ApplyAndFinish instead of Done; Finished? skips the HeldActions Map when nothing is held
    assert second.transitions == TRANSITIONS_PER_PLAIN_RUN
    # ApplyAndFinish; the reply and the memory line carry no wake: no dispatch for them
    assert second.lambda_invocations == LAMBDA_INVOCATIONS_PER_PLAIN_RUN + 1
    lines = [m.text for m in env.deps.room.all_memory("r1", ["acme"])]
    assert lines == ["counted line 0", "counted line 1"]


#: The wake path's calls before the run exists (wake relay, wake consumer): not in the
#: run's cost line, which counts the phases' own calls (quayutec.cost.line).
WAKE_PATH = {"sqs.SendMessageBatch": 1, "sfn.StartExecution": 1}


def test_the_cost_line_matches_the_call_recorder_and_the_history(env: Env) -> None:
    """design §10: the ledger's cost line of a plain run holds the counts the call recorder and the
    execution history found (the phases' calls, 3 phase invocations, 6 states), written once in
    the final ledger write; `quay ledger RUN` prints it, estimates labelled."""
    from quaycli.cli import cost_lines

    _, second = plain_runs(env.stack, env.server, 2)
    run = sorted(env.deps.ledger.runs_in_room("r1"), key=lambda x: x.started_at)[-1]
    assert run.status == "completed" and run.cost is not None
    phases = dict(second.by_operation)
    for k, n in WAKE_PATH.items():
        phases[k] -= n
    assert run.cost.aws_requests == {k: n for k, n in phases.items() if n}
    assert run.cost.lambda_invocations == 3
    assert run.cost.transitions == second.transitions == TRANSITIONS_PER_PLAIN_RUN
    assert run.cost.billed_ms >= 3 and 0 < run.cost.usd < 0.001
    assert set(run.cost.estimated) == {"billed_ms", "transitions", "usd", "usd_model_excluded", "model_usd"}
    # Tokens: what the local provider server's reply reported; claude-test has no price, so the
    # USD figure is the AWS side alone and says so.
    sent = [r.usage for r in env.server.requests if r.agent_id == "acme.a1"][-1]
    assert {m: (t.input, t.output, t.replies) for m, t in run.cost.tokens.items()} == {
        "claude-test": (sent["input"], sent["output"], 1)
    }
    assert run.cost.model_price_unknown == ["claude-test"] and run.cost.usd == run.cost.usd_model_excluded
    # DynamoDB capacity from the responses; the final write's own (and moto's transactions') unknown.
    assert run.cost.capacity["read_units"] > 0
    assert run.cost.capacity_unknown.get("dynamodb.TransactWriteItems", 0) >= 1
    from quayutec.api.schemas import RunDetail  # what GET /runs/{run} answers

    body = RunDetail(run=run, requests=[], actions=[]).model_dump(mode="json")
    assert body["run"]["cost"]["aws_requests"] == run.cost.aws_requests
    lines = cost_lines(run.cost.model_dump(mode="json"))
    assert "(estimated)" in lines[0] and "3 Lambda invocations" in lines[0]
    assert f"{sum(run.cost.aws_requests.values())} AWS requests" in lines[0]
    assert any(line.startswith("  by service: dynamodb ") for line in lines)
    assert any("model price unknown (claude-test)" in line for line in lines)


def test_a_run_queries_only_the_memory_partitions_the_room_holds(env: Env) -> None:
    """The room item names the memory partitions that hold lines (written with each line, in one
    transaction): a run of acme's agent queries the room-wide and acme's own partition once each
    holds a line — two reads more than in a room without memory — and never bolt's; its context
    holds exactly the lines acme may read."""
    from quaylocal import calls as C
    from quayutec.models import Author, MemoryLine

    d = env.deps
    _, before = plain_runs(env.stack, env.server, 2)
    lines = [
        MemoryLine(
            id=f"m-{vis}-{co}",
            room_id="r1",
            text=f"{vis} line of {co}",
            visibility=vis,
            company=co,
            author=Author(kind="person", id="ann", company=co),
            created_at=f"2026-11-30T00:00:0{i}Z",
        )
        for i, (vis, co) in enumerate([("company", "bolt"), ("room", "bolt"), ("company", "acme")])
    ]
    with C.owner(C.SETUP):
        for line in lines:
            assert d.room.put_memory(line) and not d.room.put_memory(line)  # once
    after = plain_runs(env.stack, env.server, 1)[0]
    assert after.aws_calls == before.aws_calls + 2, after.by_operation
    assert after.by_operation["dynamodb.Query"] == before.by_operation["dynamodb.Query"] + 2
    run = sorted(d.ledger.runs_in_room("r1"), key=lambda x: x.started_at)[-1]
    context = d.rundata.get(run.run_id, "context")
    assert context is not None
    assert sorted(m["id"] for m in context["memory"]) == ["m-company-acme", "m-room-bolt"]


def test_a_plain_run_records_its_phase_spans_in_its_final_write(env: Env) -> None:
    """design §2.8: each phase's span travels in the run state and lands on the final write the
    run makes anyway (the calls above are pinned with it): its three phases, in order, each
    ending at or after its start, the last ending by the run's end."""
    plain_runs(env.stack, env.server, 1)
    run = sorted(env.deps.ledger.runs_in_room("r1"), key=lambda x: x.started_at)[-1]
    assert run.spans is not None
    assert [s.phase for s in run.spans] == ["ClaimAndRead", "CallModel", "DecideAndPost"]
    for earlier, later in zip(run.spans, run.spans[1:], strict=False):
        assert earlier.start <= earlier.end <= later.start
    assert run.ended_at is not None and run.spans[-1].end <= run.ended_at
