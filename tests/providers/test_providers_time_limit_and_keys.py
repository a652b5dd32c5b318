"""Two plays on the local stack (design §2.3, §5):

* the run's time limit: with RUN_TIME_LIMIT_SECONDS=20, a retry-after of 1 s is waited for and
  the run completes, a retry-after of 20 s would cross the limit and ends the run ``timed_out``
  after one request, without a Wait state;
* the companies' keys: they never reach the Step Functions executions (input, output, history),
  the ledger, the room, the claim table or the run data, not even when the provider echoes the
  key in its error body; and each run reads only its own company's secret.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from quaylocal.provider_server import ProviderServer
from quaylocal.scenario import Player, PlayResult, Scenario
from quaylocal.stack import LocalStack
from quayutec import deps as quay_deps
from quayutec import resources as r

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


@pytest.fixture(scope="module", autouse=True)
def _sdks_imported() -> None:
    import anthropic  # noqa: F401 - imported once here, not by several runs at once
    import openai  # noqa: F401


def anthropic_429(retry_after: str) -> dict[str, Any]:
    return {
        "error": {
            "status": 429,
            "headers": {"retry-after": retry_after},
            "body": {"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limited"}},
        }
    }


def executions(stack: LocalStack) -> list[dict[str, Any]]:
    """Every execution: its description (input, output) and its full history."""
    sfn = stack.client("stepfunctions")
    out = []
    for status in ("RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"):
        for ex in sfn.list_executions(stateMachineArn=stack.state_machine_arn, statusFilter=status)["executions"]:
            out.append(
                {
                    "name": ex["name"],
                    "describe": sfn.describe_execution(executionArn=ex["executionArn"]),
                    "history": sfn.get_execution_history(executionArn=ex["executionArn"], maxResults=1000)["events"],
                }
            )
    return out


def wait_inputs(execution: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        json.loads(e["stateEnteredEventDetails"]["input"])
        for e in execution["history"]
        if e["type"] == "WaitStateEntered"
    ]


# ----------------------------------------------------------------------------- time limit
def test_a_wait_that_would_cross_the_run_time_limit_ends_the_run_timed_out() -> None:
    sc = Scenario.model_validate(
        {
            "companies": [{"id": "harbour", "people": ["ana"]}],
            "agents": [
                {
                    "id": a,
                    "company": "harbour",
                    "provider": "anthropic",
                    "model": "claude-haiku-4-5",
                    "instructions": "One line.",
                }
                for a in ("quick-agent", "late-agent")
            ],
            "room": {"id": "time-limit", "members": ["harbour"]},
            "model_replies": {
                "quick-agent": [anthropic_429("1"), {"reply": {"text": "In time."}}],
                "late-agent": [anthropic_429("20")],
            },
            "steps": [{"post": {"as": "ana", "text": "Quickly, please.", "to": ["quick-agent", "late-agent"]}}],
            "expect": {
                "replies": {"quick-agent": 1},
                "model_requests": {"quick-agent": 2, "late-agent": 1},
                "runs": {"completed": 1, "timed_out": 1},
            },
        }
    )
    seen: dict[str, Any] = {}
    result = Player(sc, time_scale=0.01, quiet_timeout_s=60, settings={"RUN_TIME_LIMIT_SECONDS": "20"}).play(
        lambda stack, _: seen.update({e["name"]: e for e in executions(stack)})
    )
    assert result.failures == [], result.failures
    quick, late = (
        next(x for x in result.runs if x["agent_id"].split(".")[-1] == a) for a in ("quick-agent", "late-agent")
    )
    assert quick["status"] == "completed"
    [wait] = wait_inputs(seen[quick["run_id"]])
    assert wait["model"]["wait_seconds"] == 1
    assert 1 <= wait["budget"]["remaining_s"] <= 19  # the next Task's budget: 20 s less the time used and the wait
    assert late["status"] == "timed_out" and late["error_class"] == "RunTimedOut"
    [q] = late["requests"]
    assert (q["status"], q["category"], q["retryable"], q["wait_s"]) == (429, "rate_limit", True, None)
    assert q["decision"].startswith("retry-after: 20 -> wait 20 s before request 2, but only ")
    assert q["decision"].endswith(" s of the run's time are left: not waited for")
    assert wait_inputs(seen[late["run_id"]]) == []


# ----------------------------------------------------------------------------- keys
ACME_KEY = "sk-local-acme-5e1f0c2b9d8a7f6e"
BOLT_KEY = "sk-local-bolt-0a9b8c7d6e5f4a3b"


class BoltSecretGone(Player):
    """Plays with bolt's anthropic secret deleted once the companies are set up."""

    def _setup(self, stack: LocalStack, server: ProviderServer) -> None:
        super()._setup(stack, server)
        name = quay_deps.secret_name(quay_deps.default_deps().settings, "bolt", "anthropic")
        stack.client("secretsmanager").delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)


def test_keys_stay_in_secrets_manager_and_each_run_reads_only_its_company_s_secret() -> None:
    sc = Scenario.model_validate(
        {
            "companies": [{"id": "acme", "people": ["ann"]}, {"id": "bolt", "people": ["bob"]}],
            "agents": [
                {
                    "id": "acme-claude",
                    "company": "acme",
                    "provider": "anthropic",
                    "model": "claude-haiku-4-5",
                    "instructions": "One line.",
                },
                {
                    "id": "acme-gpt",
                    "company": "acme",
                    "provider": "openai",
                    "model": "gpt-4.1",
                    "instructions": "One line.",
                },
                {
                    "id": "bolt-claude",
                    "company": "bolt",
                    "provider": "anthropic",
                    "model": "claude-haiku-4-5",
                    "instructions": "One line.",
                },
            ],
            "room": {"id": "keys", "members": ["acme", "bolt"]},
            "model_replies": {
                "acme-claude": [
                    anthropic_429("1"),
                    {
                        "reply": {
                            "text": "Noted.",
                            "actions": [
                                {"kind": "remember", "text": "Keys stay in Secrets Manager.", "visibility": "company"}
                            ],
                        }
                    },
                ],
                # a provider that echoes the key it was sent in its error body
                "acme-gpt": [
                    {
                        "error": {
                            "status": 401,
                            "headers": {},
                            "body": {
                                "error": {
                                    "message": f"Incorrect API key provided: {ACME_KEY}. You can find your API key at "
                                    "https://platform.openai.com/account/api-keys.",
                                    "type": "invalid_request_error",
                                    "param": None,
                                    "code": "invalid_api_key",
                                }
                            },
                        }
                    }
                ],
                "bolt-claude": [{"reply": {"text": "never sent: bolt's key is gone"}}],
            },
            "steps": [
                {"post": {"as": "ann", "text": "Please check the keys.", "to": ["acme-claude", "acme-gpt"]}},
                {"post": {"as": "bob", "text": "Bolt here, please answer.", "to": ["bolt-claude"]}},
            ],
            "expect": {
                "replies": {"acme-claude": 1},
                "memory_lines": 1,
                "model_requests": {"acme-claude": 2, "acme-gpt": 1, "bolt-claude": 0},
                "runs": {"completed": 1, "failed_before_reply": 2},
            },
        }
    )
    player = BoltSecretGone(sc, time_scale=0.01, quiet_timeout_s=60)
    player.company_keys = {"acme": ACME_KEY, "bolt": BOLT_KEY}
    places: dict[str, str] = {}

    def inspect(stack: LocalStack, result: PlayResult) -> None:
        places["step functions"] = json.dumps(executions(stack), default=str)
        ddb_items = {}
        for t in r.TABLES:
            ddb_items[t.default_name] = stack.client("dynamodb").scan(TableName=t.default_name)["Items"]
        places["ledger table"] = json.dumps(ddb_items.pop(r.LEDGER_TABLE.default_name))
        places["room table"] = json.dumps(ddb_items.pop(r.ROOM_TABLE.default_name))
        places["other tables"] = json.dumps(ddb_items)
        s3 = stack.client("s3")
        bucket = r.RUN_DATA_BUCKET.default_name
        places["run data"] = "\n".join(
            s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read().decode()
            for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])
        )
        sm = stack.client("secretsmanager")
        places["acme secret"] = sm.get_secret_value(
            SecretId=quay_deps.secret_name(quay_deps.default_deps().settings, "acme", "anthropic")
        )["SecretString"]

    result = player.play(inspect)
    assert result.failures == [], result.failures
    # the keys are where they belong, and the scanned places hold the play's data (the scan reads something)
    assert places.pop("acme secret") == ACME_KEY
    assert "Please check the keys." in places["room table"] and "Keys stay in Secrets Manager." in places["room table"]
    assert "invalid_api_key" in places["ledger table"] and "acme-claude" in places["step functions"]
    assert "Please check the keys." in places["run data"]
    for where, text in places.items():
        for company, key in player.company_keys.items():
            assert key not in text, f"{company}'s key found in the {where}"
    # the echoed key was scrubbed before the provider's body reached the ledger
    runs = {x["agent_id"].split(".")[-1]: x for x in result.runs}  # {company}.{name}
    [echo] = runs["acme-gpt"]["requests"]
    assert (echo["status"], echo["category"]) == (401, "auth") and "[redacted]" in echo["body"]
    # acme's run used acme's key (the provider server answers a wrong key with a 401 before the
    # script), and was not disturbed by bolt's secret being gone; bolt's run did not fall back to
    # another company's key: it failed before sending anything
    assert runs["acme-claude"]["status"] == "completed"
    assert [q["status"] for q in runs["acme-claude"]["requests"]] == [429, 200]
    assert runs["bolt-claude"]["status"] == "failed_before_reply" and runs["bolt-claude"]["requests"] == []
    assert "can't find the specified secret" in (runs["bolt-claude"]["error_message"] or "")
