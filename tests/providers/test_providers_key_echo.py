"""A model server that echoes the company's key (design §5: keys never appear in the ledger, the
room, the run data or Step Functions; they are scrubbed in every encoding), played through the
real run path against the local provider server:

* an owner's (openai-compatible) server is sent the key in the ``Authorization`` header and
  echoes it in its reply text (raw, JSON-escaped, URL-encoded, base64 of the header, hex, upper
  case, HTML entities), in a ``remember`` action's text and in its ``x-request-id`` header: the
  room, the memory line, the ledger's actions and request row hold ``[redacted]`` instead;
* the same on a failure: an error body and ``x-request-id`` that echo the key;
* a stored key that is not printable ASCII (``sk-ünïcode-SECRET123``) fails its request at once
  as an invalid key, final, nothing sent, with no key text (not even one of its characters) in the
  ledger; the API refuses such a key at registration (tests/api/test_api_hostile_input.py).
"""

from __future__ import annotations

import base64
import html
import json
from typing import Any
from urllib.parse import quote

import pytest

from quaylocal.scenario import Player, PlayResult, Scenario
from quaylocal.stack import LocalStack
from quayutec import resources as r
from quayutec.providers.keys import key_problem
from quayutec.providers.models import ModelReply, ToolCall

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

#: acme's key: quotes, a backslash, ``/``, ``+`` and ``=`` make its raw, JSON and URL forms differ.
ACME_KEY = 'sk-own/er+Key="Q9f3a\\b7c1d2e5f60718293a4'
UNICODE_KEY = "sk-ünïcode-SECRET123"
HEADER_B64 = base64.b64encode(f"Authorization: Bearer {ACME_KEY}".encode()).decode()


def forms(key: str) -> dict[str, str]:
    """The key as an echo may carry it, written out independently of the scrubber."""
    return {
        "raw": key,
        "json": json.dumps(key)[1:-1],
        "json twice": json.dumps(json.dumps(key)[1:-1])[1:-1],
        "url": quote(key, safe=""),
        "base64": base64.b64encode(key.encode()).decode().rstrip("="),
        "base64 of the header": HEADER_B64.rstrip("="),
        "hex": key.encode().hex(),
        "HEX": key.encode().hex().upper(),
        "upper": key.upper(),
        "upper json": json.dumps(key.upper())[1:-1],
        "html": html.escape(key),
        "html numeric": "".join(f"&#{ord(c)};" for c in key),
    }


ECHO_TEXT = "\n".join(f"{name}: <{value}>" for name, value in forms(ACME_KEY).items())


def scenario() -> Scenario:
    return Scenario.model_validate(
        {
            "companies": [
                {"id": "acme", "people": ["ann"]},
                {"id": "bolt", "people": ["bob"]},
                {"id": "cafe", "people": ["cy"]},
            ],
            "agents": [
                {
                    "id": "owner-echo",
                    "company": "acme",
                    "provider": "openai-compatible",
                    "model": "local-llama",
                    "instructions": "One line.",
                },
                {
                    "id": "owner-echo-error",
                    "company": "acme",
                    "provider": "openai-compatible",
                    "model": "local-llama",
                    "instructions": "One line.",
                },
                {
                    "id": "cafe-gpt",
                    "company": "cafe",
                    "provider": "openai",
                    "model": "gpt-4.1",
                    "instructions": "One line.",
                },
            ],
            "room": {"id": "key-echo", "members": ["acme", "bolt", "cafe"]},
            "model_replies": {
                "owner-echo": [
                    {
                        "reply": {
                            "text": f"Your header was:\n{ECHO_TEXT}",
                            "actions": [
                                {
                                    "kind": "remember",
                                    "visibility": "company",
                                    "text": f"the key is {ACME_KEY} aka {quote(ACME_KEY, safe='')} aka {HEADER_B64}",
                                },
                                # denied as malformed: the reasons name the field and the kind
                                {"kind": "remember", "text": "x", ACME_KEY: [json.dumps(ACME_KEY), ACME_KEY.upper()]},
                                {"kind": ACME_KEY, "text": "y"},
                            ],
                            "headers": {"x-request-id": f"req {ACME_KEY}"},
                        }
                    }
                ],
                "owner-echo-error": [
                    {
                        "error": {
                            "status": 400,
                            "headers": {"x-request-id": f"req {ACME_KEY}"},
                            "body": {
                                "error": {"message": f"bad key {HEADER_B64}", "type": f"t-{ACME_KEY}", "code": ACME_KEY}
                            },
                        }
                    }
                ],
                "cafe-gpt": [{"reply": {"text": "never sent: cafe's key is not valid"}}],
            },
            "steps": [
                {"post": {"as": "ann", "text": "Echo, please.", "to": ["owner-echo", "owner-echo-error"]}},
                {"post": {"as": "cy", "text": "Cafe here, please answer.", "to": ["cafe-gpt"]}},
            ],
            "expect": {
                "replies": {"owner-echo": 1},
                "memory_lines": 1,
                "model_requests": {"owner-echo": 1, "owner-echo-error": 1, "cafe-gpt": 0},
                "runs": {"completed": 1, "failed_before_reply": 2},
            },
        }
    )


@pytest.fixture(scope="module")
def played() -> tuple[PlayResult, dict[str, str]]:
    import openai  # noqa: F401 - imported once here, not by several runs at once

    player = Player(scenario(), time_scale=0.01, quiet_timeout_s=60)
    player.company_keys = {"acme": ACME_KEY, "bolt": "sk-local-bolt-0a9b8c7d6e5f4a3b", "cafe": UNICODE_KEY}
    places: dict[str, str] = {}

    def inspect(stack: LocalStack, result: PlayResult) -> None:
        sfn = stack.client("stepfunctions")
        history = []
        for ex in sfn.list_executions(stateMachineArn=stack.state_machine_arn)["executions"]:
            history.append(sfn.describe_execution(executionArn=ex["executionArn"]))
            history.append(sfn.get_execution_history(executionArn=ex["executionArn"], maxResults=1000)["events"])
        places["step functions"] = json.dumps(history, default=str, ensure_ascii=False)
        ddb = stack.client("dynamodb")
        for t in r.TABLES:
            places[t.default_name] = json.dumps(ddb.scan(TableName=t.default_name)["Items"], ensure_ascii=False)
        s3 = stack.client("s3")
        bucket = r.RUN_DATA_BUCKET.default_name
        places["run data"] = "\n".join(
            s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read().decode()
            for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])
        )

    result = player.play(inspect)
    assert result.failures == [], result.failures
    return result, places


def run_of(result: PlayResult, agent: str) -> dict[str, Any]:
    [run] = [x for x in result.runs if x["agent_id"].split(".")[-1] == agent]  # {company}.{name}
    return run


def test_an_echoed_key_reaches_no_room_ledger_run_data_or_execution(played: Any) -> None:
    _result, places = played
    room, ledger = places[r.ROOM_TABLE.default_name], places[r.LEDGER_TABLE.default_name]
    # the scanned places hold the play's data, scrubbed where the key was
    assert "Your header was:" in room and "[redacted]" in room and "the key is [redacted]" in room
    assert "remember" in ledger and "[redacted]" in ledger and "owner-echo" in places["step functions"]
    for where, text in places.items():
        for name, value in forms(ACME_KEY).items():
            assert value not in text, f"acme's key ({name}) found in the {where}"
        for part in (UNICODE_KEY, json.dumps(UNICODE_KEY)[1:-1], "SECRET123", "ünïcode", "U+00FC"):
            assert part not in text, f"cafe's key ({part!r}) found in the {where}"


def test_the_echo_s_reply_text_actions_and_request_id_are_scrubbed(played: Any) -> None:
    result, _ = played
    run = run_of(result, "owner-echo")
    assert run["status"] == "completed"
    [q] = run["requests"]
    assert (q["status"], q["request_id"]) == (200, "req [redacted]")
    [reply] = [m for m in result.transcript if m["author"]["id"].split(".")[-1] == "owner-echo"]
    lines = dict(line.split(": ", 1) for line in reply["text"].splitlines()[1 : len(forms(ACME_KEY)) + 1])
    assert set(lines) == set(forms(ACME_KEY)), lines
    for name, line in lines.items():  # base64 keeps the characters it shares with what surrounds the key
        assert line == "<[redacted]>" or (name.startswith("base64") and "[redacted]" in line), (name, line)
    assert "unexpected field '[redacted]'" in reply["text"] and "unknown action kind '[redacted]'" in reply["text"]
    [memory] = result.memory
    assert memory["text"].startswith("the key is [redacted] aka [redacted] aka QXV0aG9yaXphdGlvbjogQmVhcmVy")
    assert memory["text"].count("[redacted]") == 3 and HEADER_B64 not in memory["text"]
    actions = json.dumps(run.get("actions") or [])
    assert ACME_KEY not in actions and json.dumps(ACME_KEY)[1:-1] not in actions


def test_a_failure_s_body_and_request_id_are_scrubbed(played: Any) -> None:
    result, _ = played
    run = run_of(result, "owner-echo-error")
    assert run["status"] == "failed_before_reply"
    [q] = run["requests"]
    assert (q["status"], q["outcome"], q["request_id"]) == (400, "error", "req [redacted]")
    assert q["error_type"] == "t-[redacted]" and q["error_code"] == "[redacted]"
    assert "[redacted]" in q["body"] and "[redacted]" in q["message"]


def test_a_stored_key_that_is_not_printable_ascii_fails_as_an_invalid_key_with_nothing_sent(played: Any) -> None:
    result, _ = played
    run = run_of(result, "cafe-gpt")
    assert run["status"] == "failed_before_reply" and result.model_requests["cafe-gpt"] == 0
    [q] = run["requests"]
    assert (q["outcome"], q["status"], q["category"], q["retryable"]) == ("error", None, "auth", False)
    assert q["error_type"] == "invalid_key" and "not valid" in q["message"]
    assert run["error_class"] == "ModelCallFailed" and "final: auth" in run["error_message"]


# ----------------------------------------------------------------------------- the rule itself
@pytest.mark.parametrize(
    "key",
    [UNICODE_KEY, "sk-ascii-and-\u00e9", "sk-\u0430bcdefgh", "sk-abcdefgh\uff01", "sk-abc\x7fdefgh", "sk-abc defgh"],
)
@pytest.mark.unit
def test_a_key_is_printable_ascii_without_whitespace(key: str) -> None:
    problem = key_problem(key)
    assert (problem and "ASCII" in problem) or "whitespace" in (problem or ""), problem
    assert not any(ch in problem for ch in key if not ch.isascii()) and "U+" not in problem


@pytest.mark.unit
def test_printable_ascii_keys_pass() -> None:
    assert key_problem("".join(chr(c) for c in range(0x21, 0x7F))) is None
    assert key_problem('sk-own/er+Key="Q9f3a\\b7c1d2e') is None


@pytest.mark.unit
def test_scrub_reply_covers_text_tool_calls_and_request_id() -> None:
    from quayutec.providers.keys import scrub_reply, scrubber

    key = ACME_KEY
    reply = ModelReply(
        text=ECHO_TEXT,
        request_id=f"req {key}",
        stop_reason="stop",
        tool_calls=[
            ToolCall(
                id=f"call-{key}",
                name="remember",
                input={"text": key, key: [1, {"x": key.lower()}]},
                raw_input=json.dumps({"text": key}),
            )
        ],
    )
    clean = scrub_reply(reply, key).model_dump_json()
    for name, value in forms(key).items():
        assert value not in clean and json.dumps(value)[1:-1] not in clean, name
    assert key.lower() not in clean
    assert scrubber(key)("nothing here") == "nothing here"
