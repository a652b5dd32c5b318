"""The cost line's counted operations beyond calls (design §10, issue 13 item 2): model tokens from
the provider's usage fields (what the local provider server sent), DynamoDB consumed capacity
(ReturnConsumedCapacity=TOTAL, summed; what moto does not report is shown as unknown, never 0),
per-model prices (built in, or the MODEL_PRICES setting; an unknown price is said), the bench's
model-excluded figure apart, and `GET /rooms/{room}/cost` / `quay cost` summing a room's runs."""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError
from runhelpers import ANN, TIME_SCALE, Env, make_room

from quaylocal import calls as C
from quaylocal.provider_server import ProviderServer
from quaylocal.stack import LocalStack
from quayutec import deps as quay_deps
from quayutec.cost import line as cost_line
from quayutec.cost import prices
from quayutec.logic.ids import agent_name
from quayutec.logic.services import Services
from quayutec.models import Author, RunCost, TokenCount

#: claude-test is priced by the setting; gpt-test has no price; c1's Bedrock model is built in.
OVERRIDE = {"claude-test": {"input": 3.0, "output": 15.0}}
BEDROCK_MODEL = "amazon.nova-micro-v1:0"


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    server = ProviderServer(scripts={}, keys={})
    server.start()
    settings = {
        "ANTHROPIC_BASE_URL": server.base_url("anthropic"),
        "OPENAI_BASE_URL": server.base_url("openai"),
        "BEDROCK_ENDPOINT_URL": server.base_url("bedrock"),
        "MODEL_PRICES": json.dumps(OVERRIDE),
    }
    try:
        with LocalStack(settings=settings, time_scale=TIME_SCALE) as stack:
            keys = make_room(stack, server)
            d = quay_deps.default_deps()
            stack.client("secretsmanager").create_secret(
                Name=quay_deps.secret_name(d.settings, "acme", "bedrock"), SecretString=keys["acme"]
            )
            svc = Services(d)  # as the API registers and places it
            svc.agents.register(ANN, name="c1", provider="bedrock", model=BEDROCK_MODEL, instructions="Be brief.")
            svc.rooms.place_agent(ANN, "r1", "c1")
            server.keys["c1"] = keys["acme"]
            yield Env(stack=stack, server=server, keys=keys)
    finally:
        server.stop()


def _post(env: Env, person: str, company: str, text: str) -> None:
    from quayutec.logic.room_service import RoomService

    def post() -> None:
        with C.owner(C.SETUP):
            RoomService(quay_deps.default_deps().room).post_message(
                "r1", Author(kind="person", id=person, company=company), text, []
            )

    env.stack.wait_quiet()
    contextvars.copy_context().run(post)
    env.stack.wait_quiet()


def _last_run(env: Env, agent: str) -> Any:
    runs = [r for r in env.deps.ledger.runs_in_room("r1") if agent_name(r.agent_id) == agent]
    return max(runs, key=lambda r: r.started_at)


def _sent(env: Env, agent: str, since: int) -> list[dict | None]:
    return [
        r.usage
        for r in env.server.requests[since:]
        if r.agent_id is not None and agent_name(r.agent_id) == agent and r.status == 200
    ]


# ----------------------------------------------------------------------------- tokens and prices
def test_tokens_are_what_the_provider_server_sent_for_each_wire_format(env: Env) -> None:
    from quaycli.cli import cost_lines

    before = len(env.server.requests)
    for agent in ("a1", "b1", "c1"):
        env.server.set_script(
            agent, [{"reply": {"text": f"{agent} answers at some length, no action.", "actions": []}}]
        )
    _post(env, "ann", "acme", "@a1 @b1 @c1 what does each of you cost?")
    for agent, model, provider in (
        ("a1", "claude-test", "anthropic"),
        ("b1", "gpt-test", "openai"),
        ("c1", BEDROCK_MODEL, "bedrock"),
    ):
        run = _last_run(env, agent)
        assert run.status == "completed" and run.cost is not None, run
        [sent] = _sent(env, agent, before)
        assert sent["input"] > 100 and sent["output"] >= 1  # about 4 characters a token of the prompt
        assert run.cost.tokens == {
            model: TokenCount(provider=provider, input=sent["input"], output=sent["output"], replies=1)
        }
        assert run.cost.usd_model_excluded > 0
    a1, b1, c1 = (_last_run(env, a).cost for a in ("a1", "b1", "c1"))
    t = a1.tokens["claude-test"]
    assert a1.model_usd == pytest.approx((t.input * 3.0 + t.output * 15.0) / 1e6, abs=1e-8)  # the setting's
    assert a1.usd == pytest.approx(a1.usd_model_excluded + a1.model_usd, abs=1e-8)
    t = c1.tokens[BEDROCK_MODEL]
    _, p_in, p_out, source, date = prices.MODEL_PRICES[BEDROCK_MODEL]
    assert source and date and c1.model_usd == pytest.approx((t.input * p_in + t.output * p_out) / 1e6, abs=1e-8)
    # gpt-test has no price: the USD figure is the AWS side alone, and the line says so.
    assert b1.model_usd is None and b1.model_price_unknown == ["gpt-test"] and b1.usd == b1.usd_model_excluded
    lines = cost_lines(b1.model_dump(mode="json"))
    assert any("model price unknown (gpt-test)" in line for line in lines), lines
    assert any(line.startswith(f"  AWS side ${b1.usd_model_excluded:.6f} (estimated); ") for line in lines), lines
    assert any(f"tokens gpt-test (openai): {b1.tokens['gpt-test'].input} input" in line for line in lines)
    assert {"usd", "usd_model_excluded", "model_usd", "billed_ms", "transitions"} == set(b1.estimated)


def test_a_failed_request_counts_no_tokens_and_a_reply_without_usage_is_not_guessed(env: Env) -> None:
    env.server.set_script(
        "a1",
        [
            {
                "error": {
                    "status": 503,
                    "body": {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
                }
            },
            {"reply": {"text": "after one retry", "actions": [], "usage": {"input": 1234, "output": 56}}},
        ],
    )
    _post(env, "ann", "acme", "@a1 once more")
    run = _last_run(env, "a1")
    assert run.status == "completed" and run.cost.tokens == {
        "claude-test": TokenCount(provider="anthropic", input=1234, output=56, replies=1)
    }
    assert run.cost.lambda_invocations >= 4  # CallModel twice (the Wait between)

    env.server.set_script("b1", [{"reply": {"text": "no usage here", "actions": [], "usage": None}}])
    _post(env, "bob", "bolt", "@b1 and you?")
    run = _last_run(env, "b1")
    assert run.status == "completed"
    assert run.cost.tokens == {"gpt-test": TokenCount(provider="openai", replies=0, unreported=1)}
    from quaycli.cli import cost_lines

    assert any(
        "1 reply reported no usage (not counted)" in line for line in cost_lines(run.cost.model_dump(mode="json"))
    )


@pytest.mark.unit
def test_model_prices_built_in_overridden_or_unknown() -> None:
    cost = RunCost(
        lambda_invocations=3,
        billed_ms=30,
        transitions=6,
        aws_requests={"dynamodb.GetItem": 2},
        capacity={"read_units": 1.0, "write_units": 0.0},
        tokens={"gpt-4.1": TokenCount(provider="openai", input=1_000_000, output=1_000_000, replies=1)},
    )
    priced = prices.price_cost(cost, memory_mb=512)
    assert priced.model_usd == pytest.approx(2.0 + 8.0) and priced.usd == pytest.approx(priced.usd_model_excluded + 10)
    assert prices.price_cost(cost, memory_mb=512, overrides={"gpt-4.1": (1.0, 1.0)}).model_usd == pytest.approx(2.0)
    # An openai-compatible server's "gpt-4.1" is not OpenAI's: no built-in price.
    compat = cost.model_copy(update={"tokens": {"gpt-4.1": TokenCount(provider="openai-compatible", input=5)}})
    unknown = prices.price_cost(compat, memory_mb=512)
    assert unknown.model_usd is None and unknown.model_price_unknown == ["gpt-4.1"]
    assert unknown.usd == unknown.usd_model_excluded == priced.usd_model_excluded
    assert prices.model_price("claude-haiku-4-5-20251001", "anthropic") == (1.0, 5.0)
    for m, (provider, p_in, p_out, source, date) in prices.MODEL_PRICES.items():
        assert provider in ("anthropic", "openai", "bedrock") and p_in > 0 and p_out > 0 and source and date, m


@pytest.mark.parametrize(
    "bad",
    [
        '{"m": {"input": -1, "output": 2}}',
        '{"m": {"input": 1}}',
        "not json",
        '{"m": {"input": 1, "output": 2, "cached": 3}}',
        "[1, 2]",
    ],
)
@pytest.mark.unit
def test_a_bad_model_prices_setting_is_refused_naming_it(bad: str) -> None:
    from quayutec import settings as S

    with pytest.raises(ValidationError, match="MODEL_PRICES"):
        S.validate_settings({"MODEL_PRICES": bad})
    ok = S.validate_settings({"MODEL_PRICES": json.dumps(OVERRIDE)})
    assert cost_line.model_prices_of(ok) == {"claude-test": (3.0, 15.0)}


# ----------------------------------------------------------------------------- DynamoDB capacity
def test_consumed_capacity_is_asked_for_and_summed_and_what_moto_omits_is_unknown(env: Env) -> None:
    """Inside a run phase's count every DynamoDB data call asks ReturnConsumedCapacity=TOTAL and
    its response's ConsumedCapacity is summed. moto answers constants (GetItem 0.5, PutItem 1,
    UpdateItem 0.5), an empty list for TransactWriteItems and nothing for a failed conditional
    write: those two are counted as unknown, not as 0. Outside a count nothing is asked."""
    from quayutec.dal import aws

    seen: list[bytes] = []  # the request bodies sent

    def observe(request: Any, **_: Any) -> None:
        seen.append(request.body or b"")

    table = env.deps.settings.ledger_table
    db = aws.dynamodb()
    db.meta.events.register("before-send.dynamodb", observe, unique_id="test-cost-body")
    try:
        db.get_item(TableName=table, Key={"pk": "COST#x", "sk": "A"})
        assert b"ReturnConsumedCapacity" not in seen[-1]
        with cost_line.counting():
            db.get_item(TableName=table, Key={"pk": "COST#x", "sk": "A"})
            db.put_item(TableName=table, Item={"pk": "COST#x", "sk": "A"})
            db.update_item(
                TableName=table,
                Key={"pk": "COST#x", "sk": "A"},
                UpdateExpression="SET n = :n",
                ExpressionAttributeValues={":n": 1},
            )
            assert not aws.put_new(db, table, {"pk": "COST#x", "sk": "A"})  # a failed conditional put
            assert aws.transact_new(
                db,
                [
                    {
                        "Put": {
                            "TableName": table,
                            "Item": {"pk": "COST#x", "sk": "B"},
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    }
                ],
            )
            cost = cost_line.so_far(None, 1)
        assert len(seen) == 6 and all(b'"ReturnConsumedCapacity": "TOTAL"' in body for body in seen[1:]), seen
    finally:
        db.meta.events.unregister("before-send.dynamodb", unique_id="test-cost-body")
    assert cost.capacity == {"read_units": 0.5, "write_units": 1.5}
    assert cost.capacity_unknown == {"dynamodb.PutItem": 1, "dynamodb.TransactWriteItems": 1}
    from quaycli.cli import cost_lines

    line = next(x for x in cost_lines(cost.model_dump(mode="json")) if "DynamoDB capacity" in x)
    assert "0.5 read units, 1.5 write units" in line and "dynamodb.TransactWriteItems 1" in line


def test_a_runs_capacity_is_what_its_phases_responses_reported(env: Env) -> None:
    """The run's cost line sums the ConsumedCapacity its phases' responses carried (observed here
    independently, per function); the final write's own capacity cannot be inside it: unknown."""
    from quayutec import seams

    phases = {
        C.function_owner(f)
        for f in (
            "ClaimAndReadFunction",
            "CallModelFunction",
            "DecideAndPostFunction",
            "ApplyAndFinishFunction",
            "RequestApprovalFunction",
            "RecordFailureFunction",
        )
    }
    observed = {"read": 0.0, "write": 0.0, "unknown": 0, "final": 0}

    def mark(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        # The final ledger write carries the cost line: its own capacity cannot be inside it.
        context["final_write"] = '"lambda_invocations"' in json.dumps(params, default=str)

    def after(parsed: Any, model: Any, context: dict[str, Any], **_: Any) -> None:
        if C.OWNER.get() not in phases or model.name not in cost_line.CAPACITY_OPERATIONS:
            return
        if context.get("final_write"):
            observed["final"] += 1
            return
        consumed = parsed.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
        if not entries:
            observed["unknown"] += 1
        for e in entries:
            kind = "write" if prices.ddb_kind(model.name) == "write" else "read"
            observed[kind] += float(e["CapacityUnits"])

    def hook(client: Any) -> None:
        if client.meta.service_model.service_name == "dynamodb":
            client.meta.events.register("before-parameter-build.dynamodb", mark, unique_id="test-cost-mark")
            client.meta.events.register("after-call.dynamodb", after, unique_id="test-cost-capacity")

    with seams.installed(seams.Instruments("test capacity", client=hook)):  # clients rebuilt with it, and after
        env.server.set_script("a1", [{"reply": {"text": "plain", "actions": []}}])
        _post(env, "ann", "acme", "@a1 a plain one")
    cost = _last_run(env, "a1").cost
    assert cost.capacity["read_units"] == pytest.approx(observed["read"]) and observed["read"] > 0
    # a plain run's writes are all transactions now (the stop guard, the spend counters), whose
    # responses moto sends without ConsumedCapacity: counted as unknown, never guessed
    assert cost.capacity.get("write_units", 0.0) == pytest.approx(observed["write"])
    assert cost.capacity_unknown.get("dynamodb.TransactWriteItems", 0) >= 3
    assert observed["final"] == 1
    assert sum(cost.capacity_unknown.values()) == observed["unknown"] + 1  # + the final write


# ----------------------------------------------------------------------------- quay cost
class _Api:
    """The room API through ``quay dev``'s API Gateway emulation, in this process."""

    def __init__(self) -> None:
        from quaylocal.dev import Gateway, direct_invoke

        self.gateway = Gateway(direct_invoke())

    def call(self, method: str, path: str, token: str) -> Any:
        result = self.gateway.handle(method, path, {"Authorization": f"Bearer {token}"}, b"")
        return type("Resp", (), {"status": result.status, "body": json.loads(result.body or b"null")})

    def ok(self, method: str, path: str, token: str) -> Any:
        r = self.call(method, path, token)
        assert 200 <= r.status < 300, (method, path, r.status, r.body)
        return r.body


def _token(company: str, person: str) -> str:
    from quayutec.dal.auth import TokenStore

    return TokenStore(quay_deps.default_deps().room.table).issue(company, person)[0]


def _post_in(room_id: str, person: str, company: str, text: str, env: Env) -> None:
    from quayutec.logic.room_service import RoomService

    def post() -> None:
        with C.owner(C.SETUP):
            RoomService(quay_deps.default_deps().room).post_message(
                room_id, Author(kind="person", id=person, company=company), text, []
            )

    env.stack.wait_quiet()
    contextvars.copy_context().run(post)
    env.stack.wait_quiet()


def test_room_cost_is_the_rooms_share_of_the_companys_spend_counters(env: Env) -> None:
    """`GET /rooms/{room}/cost` (design §12.4): the caller's company's model spend in the room,
    from the same spend counters its budgets read: with all of acme's requests in r1, r1's day
    and month are acme's spend; a run in another room counts there and not in r1; bolt sees its
    own; one BatchGetItem however many runs; a bad day, `since` and a non-member are refused."""
    for agent in ("a1", "b1"):
        env.server.set_script(agent, [{"reply": {"text": "counted", "actions": []}}])
    _post(env, "ann", "acme", "@a1 @b1 one run each")
    tokens = {p: _token(c, p) for p, c in (("ann", "acme"), ("bob", "bolt"))}
    api = _Api()
    for person, company in (("ann", "acme"), ("bob", "bolt")):
        room = api.ok("GET", "/rooms/r1/cost", tokens[person])
        assert room["room_id"] == "r1" and room["company"] == company
        for period in ("day", "month"):
            spend = api.ok("GET", f"/companies/{company}/spend?period={period}", tokens[person])
            assert spend["reserved_usd"] == 0 and spend["reserved_tokens"] == 0  # nothing in flight
            assert room[period]["key"] == spend["key"]
            assert room[period]["spent_usd"] == pytest.approx(spend["spent_usd"])
            assert room[period]["spent_tokens"] == spend["spent_tokens"]
        assert room["day"]["spent_usd"] > 0 or room["day"]["spent_tokens"] > 0, room
    # a run of acme's a1 in a room of its own: counted there, r1 unchanged
    d = quay_deps.default_deps()
    with C.owner(C.SETUP):
        Services(d).rooms.create(ANN, name="r-cost-2", members=[], room_id="r-cost-2")
        Services(d).rooms.place_agent(ANN, "r-cost-2", "a1")
    before = api.ok("GET", "/rooms/r1/cost", tokens["ann"])
    company_before = api.ok("GET", "/companies/acme/spend?period=day", tokens["ann"])
    env.server.set_script("a1", [{"reply": {"text": "elsewhere", "actions": []}}])
    _post_in("r-cost-2", "ann", "acme", "@a1 in the other room", env)
    other = api.ok("GET", "/rooms/r-cost-2/cost", tokens["ann"])
    company_after = api.ok("GET", "/companies/acme/spend?period=day", tokens["ann"])
    assert api.ok("GET", "/rooms/r1/cost", tokens["ann"]) == before
    assert other["day"]["spent_usd"] == pytest.approx(company_after["spent_usd"] - company_before["spent_usd"])
    assert other["day"]["spent_tokens"] == company_after["spent_tokens"] - company_before["spent_tokens"]
    assert other["day"]["spent_usd"] > 0 or other["day"]["spent_tokens"] > 0, other
    # one read of the counters, whatever the room's history
    calls: list[str] = []

    def count(model: Any, **_: Any) -> None:
        calls.append(model.name)

    db = d.ledger.db
    db.meta.events.register("before-call.dynamodb", count, unique_id="test-room-cost-calls")
    try:
        with C.owner(C.SETUP):
            Services(d).runs.cost(ANN, "r1")
    finally:
        db.meta.events.unregister("before-call.dynamodb", unique_id="test-room-cost-calls")
    assert calls.count("BatchGetItem") == 1 and "Query" not in calls, calls
    # another day: nothing then; no day, `since`, a non-member: refused
    empty = api.ok("GET", "/rooms/r1/cost?day=2001-02-03", tokens["ann"])
    assert empty["day"] == {"key": "2001-02-03", "spent_usd": 0.0, "spent_tokens": 0}
    assert empty["month"]["key"] == "2001-02"
    for query, word in (("day=yesterday", "day"), ("since=2026-11-30T00:00:00Z", "since")):
        bad = api.call("GET", f"/rooms/r1/cost?{query}", tokens["ann"])
        assert bad.status == 400 and bad.body["error"] == "invalid_input" and word in bad.body["message"], bad.body
    from quayutec.logic.access import OPERATOR

    Services(d).companies.create(OPERATOR, "cato", ["carl"])
    carl = _token("cato", "carl")
    for path in ("/rooms/r1/runs", "/rooms/r1/cost", "/rooms/no-such-room/cost"):
        r = api.call("GET", path, carl)
        assert (r.status, r.body["error"]) == (404, "not_found"), (path, r.body)


def test_quay_cost_prints_the_rooms_spend(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    """`quay cost --room R [--day D]` over HTTP-shaped calls: the room's spend of the day and month."""
    from quaycli import cli

    env.server.set_script("a1", [{"reply": {"text": "counted", "actions": []}}])
    _post(env, "ann", "acme", "@a1 one more")
    token = _token("acme", "ann")
    api = _Api()

    class Client:  # the CLI's client, answered by the in-process gateway
        def room_cost(self, room: str, day: str | None = None) -> dict:
            return api.ok("GET", f"/rooms/{room}/cost" + (f"?day={day}" if day else ""), token)

    orig = cli._client
    cli._client = lambda url, tok: Client()  # type: ignore[assignment]
    try:
        cli.cost(room="r1", day=None, as_json=True, url="-", token="-")
        body = json.loads(capsys.readouterr().out)
        cli.cost(room="r1", day=None, as_json=False, url="-", token="-")
        text = capsys.readouterr().out
        cli.cost(room="r1", day="2001-02-03", as_json=False, url="-", token="-")
        old = capsys.readouterr().out
    finally:
        cli._client = orig
    assert body == api.ok("GET", "/rooms/r1/cost", token)
    day = body["day"]
    assert f"room r1, acme's agents' model spend (AWS not included: quay ledger RUN):\n  {day['key']}: " in text
    assert f"${day['spent_usd']:.6f} for models with a known price" in text
    assert f"{day['spent_tokens']:,} tokens of models without one" in text  # not read as free
    assert "2001-02-03: $0.000000 for models with a known price; 0 tokens of models without one" in old
