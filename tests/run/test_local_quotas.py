"""The AWS quotas the local stack keeps as AWS does: Step Functions' 256 KiB payload per state, a
terminal error no ``States.ALL`` catches (moto's interpreter caught it: quaylocal.moto_patches),
and Lambda's 6 MB answer to a synchronous invocation (moto's, a little under 6 MB: it measures
the answer's object, not its 6,291,556 bytes), docs/design.md §11."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from runhelpers import Env

from quaylocal import stack as st
from quayutec import resources as R

STATE_QUOTA = 256 * 1024


def _handler_answering(monkeypatch: pytest.MonkeyPatch, logical_id: str, answers: list[Any]) -> None:
    """The function ``logical_id`` answers ``answers[-1]`` (the others run as deployed)."""
    real, handler_string = st.resolve_handler, R.FUNCTIONS_BY_ID[logical_id].handler

    def resolve(handler: str) -> Any:
        return (lambda event, context: answers[-1]) if handler == handler_string else real(handler)

    monkeypatch.setattr(st, "resolve_handler", resolve)


def _history(env: Env, execution_arn: str) -> list[dict[str, Any]]:
    sfn = env.stack.client("stepfunctions")
    deadline = time.monotonic() + 30
    while sfn.describe_execution(executionArn=execution_arn)["status"] == "RUNNING":
        assert time.monotonic() < deadline, "the execution did not end"
        time.sleep(0.05)
    return sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]


def test_a_state_past_256_kib_ends_its_execution_whatever_catches_states_all(env: Env, monkeypatch) -> None:
    # a phase function: the state machine's role may invoke it
    _handler_answering(monkeypatch, "RecordFailureFunction", [{"big": "x" * (STATE_QUOTA + 1)}])
    sfn = env.stack.client("stepfunctions")
    definition = {
        "StartAt": "Big",
        "States": {
            "Big": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": env.stack.function_arns["RecordFailureFunction"], "Payload": {}},
                "OutputPath": "$.Payload",
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Succeed"},
        },
    }
    machine = sfn.create_state_machine(
        name="quota-probe", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/probe"
    )["stateMachineArn"]
    arn = sfn.start_execution(stateMachineArn=machine, name="big-state", input="{}")["executionArn"]
    events = _history(env, arn)
    assert sfn.describe_execution(executionArn=arn)["status"] == "FAILED"
    failed = [e for e in events if e["type"] == "ExecutionFailed"]
    assert failed and failed[0]["executionFailedEventDetails"]["error"] == "States.DataLimitExceeded"
    entered = [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]
    assert "Caught" not in entered  # terminal: no States.ALL catch takes it, as on AWS


def test_an_answer_past_6_mb_is_lambdas_error_not_a_payload(env: Env, monkeypatch) -> None:
    answers: list[Any] = [{"big": "x" * 6_300_000}]
    _handler_answering(monkeypatch, "ReconcilerFunction", answers)
    with pytest.raises(RuntimeError, match=r"Function\.ResponseSizeTooLarge"):
        env.stack.invoke("ReconcilerFunction", {})
    answers.append({"small": "x" * 5_900_000})
    assert len(env.stack.invoke("ReconcilerFunction", {})["small"]) == 5_900_000
