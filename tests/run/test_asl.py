"""The state machine file: its placeholders equal the substitutions the code provides, every phase
retries only the transient error names of design §2.1 and is caught by the failure recorder, held
actions catch their own denial/expiry, and the execution outlives any approval (design §2.6)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from quayutec import resources
from quayutec.settings import MAX_APPROVAL_TIMEOUT_SECONDS

ASL_PATH = Path(__file__).resolve().parents[2] / "statemachines" / resources.STATE_MACHINE_FILE
TRANSIENT = {
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.Unknown",
    "Sandbox.Timedout",
    "TransientError",
}
THROTTLED = "Lambda.TooManyRequestsException"


def _tasks(states: dict) -> list[tuple[str, dict]]:
    out = []
    for name, s in states.items():
        if s["Type"] == "Task":
            out.append((name, s))
        if s["Type"] == "Map":
            out += _tasks(s["ItemProcessor"]["States"])
    return out


@pytest.mark.unit
def test_placeholders_equal_the_substitutions() -> None:
    text = ASL_PATH.read_text()
    placeholders = set(re.findall(r"\$\{([A-Za-z0-9]+)\}", text))
    assert placeholders == {f.asl_placeholder for f in resources.FUNCTIONS if f.asl_placeholder} | {
        resources.ASL_PARTITION_PLACEHOLDER
    }
    assert "arn:aws:" not in text  # the partition is a substitution (aws, aws-cn, aws-us-gov)


def test_local_stack_substitutes_every_placeholder() -> None:
    from quaylocal.stack import LocalStack

    with LocalStack() as stack:
        definition = stack.client("stepfunctions").describe_state_machine(stateMachineArn=stack.state_machine_arn)[
            "definition"
        ]
        assert "${" not in definition
        assert set(stack.definition_substitutions()) == set(re.findall(r"\$\{([A-Za-z0-9]+)\}", ASL_PATH.read_text()))


@pytest.mark.unit
def test_retry_and_catch_on_every_phase() -> None:
    asl = json.loads(ASL_PATH.read_text())
    for name, task in _tasks(asl["States"]):
        transient, throttled = task["Retry"]
        assert set(transient["ErrorEquals"]) == TRANSIENT, name
        assert transient["MaxAttempts"] <= 5 and transient["BackoffRate"] > 1, name
        # Lambda throttling: its own retrier with AWS's recommended backoff.
        assert throttled["ErrorEquals"] == [THROTTLED], name
        assert throttled["MaxAttempts"] >= 6 and throttled["IntervalSeconds"] == 2, name
        assert throttled["BackoffRate"] == 2, name
        for r in task["Retry"]:
            assert r["JitterStrategy"] == "FULL", name
        assert task["Resource"].startswith("arn:${Partition}:states:::lambda:invoke"), name
        if name == "RecordFailure":
            assert "Catch" not in task  # its own failure ends the execution: the reconciler closes the run
        elif name == "RequestApproval":
            caught = {e: c["Next"] for c in task["Catch"] for e in c["ErrorEquals"]}
            assert caught == {
                "ApprovalRejected": "Rejected",
                "RunStopped": "ApprovalStopped",
                "States.Timeout": "Expired",
                "States.HeartbeatTimeout": "Expired",
            }
            assert task["Resource"].endswith("lambda:invoke.waitForTaskToken")
            assert task["TimeoutSecondsPath"] == "$.approval_timeout_s"
        elif name == "WaitForTurn":  # design §12.3: its timer sends it back to look again
            assert task["Catch"] == [
                {
                    "ErrorEquals": ["States.Timeout", "States.HeartbeatTimeout"],
                    "ResultPath": "$.error",
                    "Next": "ClaimAndRead",
                },
                {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "RecordFailure"},
            ]
            assert task["Resource"].endswith("lambda:invoke.waitForTaskToken")
            assert task["TimeoutSecondsPath"] == "$.turn.recheck_s" and task["Next"] == "ClaimAndRead"
        else:
            assert task["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "RecordFailure"}]
    assert asl["States"]["HeldActions"]["Catch"][0]["Next"] == "RecordFailure"


@pytest.mark.unit
def test_a_plain_run_enters_six_states() -> None:
    """ClaimAndRead → CallModel → ModelOutcome? → DecideAndPost → Finished? → Done (issue 13:
    adjacent phases merged; no Choice where a Catch or the Map's empty case covers it)."""
    states = json.loads(ASL_PATH.read_text())["States"]
    path, name = [], "ClaimAndRead"
    while True:
        path.append(name)
        s = states[name]
        if s["Type"] == "Succeed" or s.get("End"):
            break
        if s["Type"] == "Choice":
            name = next(
                c["Next"] for c in s["Choices"] if c.get("StringEquals") == "reply" or c.get("BooleanEquals") is True
            )
        else:
            name = s["Next"]
    assert path == ["ClaimAndRead", "CallModel", "ModelOutcome?", "DecideAndPost", "Finished?", "Done"]
    assert states["Finished?"]["Default"] == "ApplyAndFinish" and states["HeldActions"]["Next"] == "ApplyAndFinish"
    held = [c for c in states["Finished?"]["Choices"] if c["Next"] == "HeldActions"]
    assert held == [{"Variable": "$.rights.held_count", "NumericGreaterThan": 0, "Next": "HeldActions"}]
    assert states["ApplyAndFinish"]["End"] is True


@pytest.mark.unit
def test_model_retry_pause_is_a_wait_state_and_budget_is_the_task_timeout() -> None:
    asl = json.loads(ASL_PATH.read_text())["States"]
    assert asl["WaitBeforeNextRequest"] == {
        **asl["WaitBeforeNextRequest"],
        "Type": "Wait",
        "SecondsPath": "$.model.wait_seconds",
        "Next": "CallModel",
    }
    for name in ("CallModel", "DecideAndPost", "ApplyAndFinish"):
        assert asl[name]["TimeoutSecondsPath"] == "$.budget.remaining_s", name


@pytest.mark.unit
def test_execution_outlives_the_longest_approval_plus_active_time() -> None:
    asl = json.loads(ASL_PATH.read_text())
    assert asl["TimeoutSeconds"] >= MAX_APPROVAL_TIMEOUT_SECONDS + 300


@pytest.mark.unit
def test_a_wake_not_started_ends_in_not_started_through_call_model() -> None:
    """A refused claim is a value: ClaimAndRead → CallModel (passes it through) → ModelOutcome? →
    NotStarted, a Succeed state; no Catch and no error name for it (design §2.1, §12.1)."""
    states = json.loads(ASL_PATH.read_text())["States"]
    assert states["ClaimAndRead"]["Next"] == "CallModel"
    [branch] = [c for c in states["ModelOutcome?"]["Choices"] if c.get("StringEquals") == "not_started"]
    assert branch["Next"] == "NotStarted" and states["NotStarted"]["Type"] == "Succeed"
    caught = {e for c in states["ClaimAndRead"]["Catch"] for e in c["ErrorEquals"]}
    assert caught == {"States.ALL"}
