"""The CallModel phase driven directly (the Step Functions pollers held), against the local
provider server with the real SDKs (design §2.3):

* the cap counts *recorded* requests: a step that died mid-request (its request recorded as
  pending) still counts, so a retried CallModel step never makes a 4th request;
* the time limit: the client timeout is MODEL_TIMEOUT_SECONDS or what is left of the run's
  active time, whichever is less, and a wait that would cross the limit ends the run
  ``RunTimedOut`` with the reason in the ledger.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from quaylocal.provider_server import ProviderServer
from quaylocal.stack import LocalStack
from quayutec import deps as quay_deps
from quayutec.errors import ModelCallFailed, RunTimedOut
from quayutec.handlers import call_model, claim_and_read
from quayutec.logic.access import OPERATOR, Caller
from quayutec.logic.ids import new_room_id
from quayutec.logic.services import Services
from quayutec.models import Author, Message, ModelRequestRecord, Wake, now_iso
from quayutec.providers import ModelReply, ProviderError
from quayutec.providers import call_model as send_one_request

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

KEY = "sk-local-acme-0123456789abcdef"
ARN = "arn:aws:states:us-east-1:123456789012:execution:quayutec-agent-run:"
#: The room the fixture creates (its id is the service's, from this Idempotency-Key).
ROOM_KEY = "providers-call-model-phase"
ROOM = new_room_id(ROOM_KEY)
_ids = itertools.count(1)


class Ctx:
    function_name = "call-model"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:call-model"
    memory_limit_in_mb = 512
    aws_request_id = "test"
    log_group_name = "/aws/lambda/call-model"
    log_stream_name = "test"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 30_000


CTX = Ctx()


@dataclasses.dataclass
class Env:
    stack: LocalStack
    server: ProviderServer

    @property
    def deps(self) -> quay_deps.Deps:
        return quay_deps.default_deps()


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    server = ProviderServer(scripts={}, keys={})
    server.start()
    settings = {
        "ANTHROPIC_BASE_URL": server.base_url("anthropic"),
        "OPENAI_BASE_URL": server.base_url("openai"),
        "BEDROCK_ENDPOINT_URL": server.base_url("bedrock"),
    }
    try:
        with LocalStack(settings=settings) as stack:
            d = quay_deps.default_deps()
            svc, ann = Services(d), Caller(company="acme", member="ann")  # set up as the API does
            # its runs start here and are never ended: turns enough for all of them (design §12.3)
            svc.companies.create(OPERATOR, "acme", ["ann"], max_concurrent_runs=1000)
            assert svc.rooms.create(ann, name="r1", idempotency_key=ROOM_KEY).room.id == ROOM
            for provider in ("anthropic", "openai-compatible"):
                stack.client("secretsmanager").create_secret(
                    Name=quay_deps.secret_name(d.settings, "acme", provider), SecretString=KEY
                )
            for name, provider, model, base_url in (
                ("a1", "anthropic", "claude-haiku-4-5", None),
                ("o1", "openai-compatible", "local-llama", server.base_url("openai-compatible")),
            ):
                svc.agents.register(
                    ann, name=name, provider=provider, model=model, instructions="Be brief.", base_url=base_url
                )
                svc.rooms.place_agent(ann, ROOM, name)
                server.keys[name] = KEY  # the provider server knows an agent by its id or its name
            with stack.paused():
                yield Env(stack, server)
    finally:
        server.stop()


def event(state: dict[str, Any], run_id: str) -> dict[str, Any]:
    return {"state": state, "run_id": run_id, "execution_arn": ARN + run_id}


def start_run(env: Env, agent: str = "a1") -> tuple[str, dict[str, Any]]:
    """A person's message to acme's agent named ``agent`` and the run's ClaimAndRead step (claim,
    read the room)."""
    n = next(_ids)
    agent = f"acme.{agent}"
    msg = Message(
        id=f"m-{n}",
        room_id=ROOM,
        author=Author(kind="person", id="ann", company="acme"),
        text="please answer",
        to=[agent],
        created_at=now_iso(),
    )
    env.deps.room.put_message(msg)
    wake = Wake(
        agent_id=agent,
        wake_id=f"msg:m-{n}",
        room_id=ROOM,
        hop=0,
        chain_id=msg.id,
        by_kind="person",
        by_company="acme",
        cause_kind="message",
        cause_id=msg.id,
    )
    run_id, state = f"{agent}-run-{n}", {"wake": wake.model_dump(mode="json")}
    return run_id, claim_and_read.handler(event(state, run_id), CTX)


def ledger(env: Env, run_id: str) -> list[ModelRequestRecord]:
    return env.deps.ledger.model_requests(run_id)


def error(status: int, headers: dict[str, str] | None = None, message: str = "busy") -> dict[str, Any]:
    return {
        "error": {
            "status": status,
            "headers": headers or {},
            "body": {
                "type": "error",
                "error": {"type": "overloaded_error" if status >= 500 else "rate_limit_error", "message": message},
            },
        }
    }


class LambdaDied(BaseException):  # a process that dies: no handler code catches it
    """Stands for a Lambda that died after sending its request (Sandbox.Timedout, Lambda.Unknown)."""


def dies_after_sending(call: Any) -> Any:
    with contextlib.suppress(ProviderError):
        send_one_request(call)  # the request goes out and the provider answers it...
    raise LambdaDied("the step died before recording the outcome")  # ...but nobody records it


def shifted(env: Env, left_s: float, **settings: Any) -> quay_deps.Deps:
    """Deps whose clock says the run has ``left_s`` seconds of active time left."""
    d = env.deps
    offset = timedelta(seconds=d.settings.run_time_limit_s - left_s)
    return dataclasses.replace(
        d,
        clock=lambda: datetime.now(UTC) + offset,
        settings=d.settings.model_copy(update=settings) if settings else d.settings,
    )


# ----------------------------------------------------------------------------- the cap
def test_steps_that_died_mid_request_count_so_a_4th_request_is_never_made(env: Env) -> None:
    env.server.set_script("a1", [error(503)] * 4)
    before = env.server.count("a1")
    run_id, state = start_run(env)
    dying = dataclasses.replace(env.deps, call_provider=dies_after_sending)
    for attempt in (1, 2, 3):  # Step Functions retries the step after each Lambda death
        with pytest.raises(LambdaDied):
            call_model.handler(event(state, run_id), CTX, deps=dying)
        assert env.server.count("a1") - before == attempt
        assert [q.outcome for q in ledger(env, run_id)] == ["lost"] * (attempt - 1) + ["pending"]
    # the next retry of the step, with a healthy Lambda: the cap counts the recorded requests
    with pytest.raises(ModelCallFailed, match="request cap reached: 3 of 3 requests made"):
        call_model.handler(event(state, run_id), CTX)
    assert env.server.count("a1") - before == 3
    rows = ledger(env, run_id)
    assert [(q.n, q.outcome, q.category) for q in rows] == [
        (1, "lost", "lost"),
        (2, "lost", "lost"),
        (3, "lost", "lost"),
    ]
    assert all("counted against the cap" in (q.decision or "") for q in rows)


def test_a_request_recorded_but_never_sent_still_counts(env: Env) -> None:
    env.server.set_script("a1", [error(503)] * 3)
    before = env.server.count("a1")
    run_id, state = start_run(env)
    first = call_model.handler(event(state, run_id), CTX)  # request 1: 503 -> wait 2 s
    assert first["model"] == {"outcome": "wait", "wait_seconds": 2, "requests": 1}
    # request 2 recorded, then the Lambda died before sending it
    assert env.deps.ledger.record_request(
        run_id, ModelRequestRecord(n=2, sent_at=now_iso(), provider="anthropic", model="claude-haiku-4-5")
    )
    with pytest.raises(ModelCallFailed, match="request 3 of 3 was the last"):
        call_model.handler(event(first, run_id), CTX)  # the retried step sends request 3, not 2
    with pytest.raises(ModelCallFailed, match="request cap reached"):
        call_model.handler(event(first, run_id), CTX)  # and once more: nothing is sent
    assert env.server.count("a1") - before == 2
    assert [(q.n, q.outcome, q.status) for q in ledger(env, run_id)] == [
        (1, "error", 503),
        (2, "lost", None),
        (3, "error", 503),
    ]


def test_an_owner_base_url_agent_with_a_recorded_request_sends_nothing(env: Env) -> None:
    env.server.set_script("o1", [{"reply": {"text": "never sent"}}])
    run_id, state = start_run(env, "o1")
    env.deps.ledger.record_request(
        run_id, ModelRequestRecord(n=1, sent_at=now_iso(), provider="openai-compatible", model="local-llama")
    )
    with pytest.raises(ModelCallFailed, match="request cap reached: 1 of 1"):
        call_model.handler(event(state, run_id), CTX)
    assert env.server.count("o1") == 0


# ----------------------------------------------------------------------------- the time limit
def test_client_timeout_is_model_timeout_or_the_time_left_whichever_is_less(env: Env) -> None:
    seen: list[float] = []

    def capture(call: Any) -> ModelReply:
        seen.append(call.timeout_s)
        return ModelReply(text="ok", tool_calls=[], request_id="req_x", status=200)

    for left, model_timeout in ((200.0, None), (10.0, None), (10.0, 4.0)):
        run_id, state = start_run(env)
        d = shifted(env, left, **({"model_timeout_s": model_timeout} if model_timeout else {}))
        out = call_model.handler(event(state, run_id), CTX, deps=dataclasses.replace(d, call_provider=capture))
        assert out["model"]["outcome"] == "reply"
    assert seen[0] == 120  # MODEL_TIMEOUT_SECONDS (default 120) < 200 s left
    assert 5 < seen[1] <= 10  # the 10 s left of the run's 300 s (less the moments since the claim)
    assert seen[2] == 4  # MODEL_TIMEOUT_SECONDS=4 < 10 s left


def test_the_real_sdk_gives_up_when_the_run_s_time_is_up(env: Env) -> None:
    import anthropic  # noqa: F401 - loaded before the clock starts: this test is about the request

    env.server.set_script("a1", [{"reply": {"text": "too late"}, "delay_s": 15}])
    run_id, state = start_run(env)
    began = time.monotonic()
    with pytest.raises(RunTimedOut, match="time limit is reached"):
        call_model.handler(event(state, run_id), CTX, deps=shifted(env, 5.0))
    assert time.monotonic() - began < 10  # not MODEL_TIMEOUT_SECONDS (120), not the 15 s delay
    [q] = ledger(env, run_id)
    assert (q.outcome, q.status, q.category, q.retryable, q.wait_s) == ("error", None, "timeout", True, None)
    assert re.fullmatch(
        r"no reply within [1-5]\.\d s, the run's time left: the time limit is reached", q.decision or ""
    )


def test_a_slow_sdk_import_is_not_taken_out_of_the_request_s_timeout(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    # A cold Lambda imports the provider SDK on its first request (about a second, seconds without
    # bytecode). The time left is measured after that import, so the request's timeout is what is
    # really left: with 6 s left and a 2.5 s import, the request may take at most ~3.5 s.
    import quayutec.providers as providers

    def slow_load(provider: str) -> None:
        time.sleep(2.5)

    monkeypatch.setattr(providers, "load_sdk", slow_load)
    env.server.set_script("a1", [{"reply": {"text": "too late"}, "delay_s": 15}])
    run_id, state = start_run(env)
    began = time.monotonic()
    with pytest.raises(RunTimedOut, match="time limit is reached"):
        call_model.handler(event(state, run_id), CTX, deps=shifted(env, 6.0))
    assert time.monotonic() - began < 6.5  # the import and the request together stay within the time left
    [q] = ledger(env, run_id)
    m = re.fullmatch(r"no reply within (\d\.\d) s, the run's time left: the time limit is reached", q.decision or "")
    assert m and float(m.group(1)) <= 3.6, q.decision


def test_a_wait_that_would_cross_the_time_limit_ends_the_run_timed_out(env: Env) -> None:
    # 18 s left: retry-after 9 is waited for, and the next Task's budget is what is left after it
    env.server.set_script("a1", [error(429, {"retry-after": "9"})])
    run_id, state = start_run(env)
    out = call_model.handler(event(state, run_id), CTX, deps=shifted(env, 18.0))
    assert out["model"] == {"outcome": "wait", "wait_seconds": 9, "requests": 1}
    assert 1 <= out["budget"]["remaining_s"] <= 8  # 18 s, less the request's time, less the 9 s
    # retry-after 11 (<= 20 s, so eligible) would cross the limit: timed out, and the ledger says why
    env.server.set_script("a1", [error(429, {"retry-after": "11"})])
    run_id, state = start_run(env)
    with pytest.raises(RunTimedOut, match="not waited for"):
        call_model.handler(event(state, run_id), CTX, deps=shifted(env, 10.0))
    [q] = ledger(env, run_id)
    assert (q.status, q.category, q.retryable, q.wait_s) == (429, "rate_limit", True, None)
    assert re.fullmatch(
        r"retry-after: 11 -> wait 11 s before request 2, but only \d+\.\d s of the run's time are "
        r"left: not waited for",
        q.decision or "",
    )
    # retry-after 21 is above 20 s: the call fails (not a time-limit matter)
    env.server.set_script("a1", [error(429, {"retry-after": "21"})])
    run_id, state = start_run(env)
    with pytest.raises(ModelCallFailed, match="21 s > 20 s"):
        call_model.handler(event(state, run_id), CTX, deps=shifted(env, 10.0))


def test_no_request_is_recorded_or_sent_without_a_second_left(env: Env) -> None:
    env.server.set_script("a1", [{"reply": {"text": "never sent"}}])
    before = env.server.count("a1")
    run_id, state = start_run(env)
    with pytest.raises(RunTimedOut, match="no active time left"):
        call_model.handler(event(state, run_id), CTX, deps=shifted(env, 0.5))
    assert env.server.count("a1") == before and ledger(env, run_id) == []


# ----------------------------------------------------------------------------- unclassified errors
def test_an_error_the_provider_layer_did_not_classify_ends_the_call_with_its_text_scrubbed(env: Env) -> None:
    """Issue 10: an exception that is not a ProviderError (an SDK's own, a bug) may carry anything
    in its text — the key included, in any encoding. The request counts (it may have been sent),
    the call ends (never retried), and neither the ledger nor the error Step Functions records
    holds the key."""
    import json
    import urllib.parse

    def leaks(call: Any) -> ModelReply:
        raise ValueError(
            f"bad header Authorization: Bearer {KEY} / {json.dumps(KEY + chr(10))} / {urllib.parse.quote(KEY + '&')}"
        )

    run_id, state = start_run(env)
    with pytest.raises(ModelCallFailed) as failed:
        call_model.handler(event(state, run_id), CTX, deps=dataclasses.replace(env.deps, call_provider=leaks))
    assert KEY not in str(failed.value) and "ValueError" in str(failed.value)
    [row] = ledger(env, run_id)
    assert (row.outcome, row.category, row.retryable) == ("error", "unexpected", False)
    stored = row.model_dump_json()
    assert KEY not in stored and urllib.parse.quote(KEY) not in stored and "ValueError: bad header" in stored
