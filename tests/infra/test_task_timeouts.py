"""Every Task of the agent-run state machine times out no later than the Lambda function it
invokes (design §2), read from the synthesized template: its definition, its substitutions (which
name the function of each Task) and each function's ``Timeout``.

* a fixed ``TimeoutSeconds`` equals its function's timeout;
* ``TimeoutSecondsPath: $.budget.remaining_s``: the run's active time left, which the phase before
  hands on capped at the next Task's function timeout; a run given far more active time than any
  function has (RUN_TIME_LIMIT_SECONDS=3600) still hands no Task more than its function's timeout;
* a ``.waitForTaskToken`` Task (RequestApproval) is the exception: its timeout is the wait for a
  person's answer, not its invocation (the function returns at once).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from quaylocal.scenario import Player, Scenario
from quaylocal.stack import LocalStack
from quayutec import resources as R

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

BUDGET_PATH = "$.budget.remaining_s"


def _tasks(states: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, s in states.items():
        if s["Type"] == "Task":
            out[name] = s
        if s["Type"] == "Map":
            out.update(_tasks(s["ItemProcessor"]["States"]))
    return out


def _task_functions(resources: dict[str, Any]) -> dict[str, tuple[dict[str, Any], str, int]]:
    """Each Task of the deployed definition → (its state, its function's logical id, that
    function's Timeout in the template)."""
    props = resources[R.STATE_MACHINE_LOGICAL_ID]["Properties"]
    subs = props["DefinitionSubstitutions"]
    out = {}
    for name, task in _tasks(json.loads(props["DefinitionString"])["States"]).items():
        placeholder = re.fullmatch(r"\$\{(\w+)\}", task["Parameters"]["FunctionName"])
        assert placeholder, name
        function_id = subs[placeholder.group(1)]["Fn::GetAtt"][0]
        out[name] = (task, function_id, resources[function_id]["Properties"]["Timeout"])
    return out


def test_each_task_times_out_no_later_than_its_function(resources):
    tasks = _task_functions(resources)
    assert set(tasks) == {
        "ClaimAndRead",
        "CallModel",
        "DecideAndPost",
        "RequestApproval",
        "ApplyAndFinish",
        "RecordFailure",
        "WaitForTurn",
    }
    for name, (task, function_id, timeout) in tasks.items():
        if task["Resource"].endswith(".waitForTaskToken"):  # the wait for the token, not the function
            expected = "$.turn.recheck_s" if name == "WaitForTurn" else "$.approval_timeout_s"
            assert task["TimeoutSecondsPath"] == expected, name
        elif "TimeoutSeconds" in task:
            assert task["TimeoutSeconds"] == timeout, (name, function_id)
        else:  # every Task has a timeout: Step Functions' default is a year
            assert task["TimeoutSecondsPath"] == BUDGET_PATH, name


def _budget_tasks(resources: dict[str, Any]) -> dict[str, int]:
    return {
        name: timeout
        for name, (task, _fn, timeout) in _task_functions(resources).items()
        if task.get("TimeoutSecondsPath") == BUDGET_PATH
    }


def test_the_budget_handed_to_a_task_never_exceeds_its_function_timeout(resources):
    """A run with 3600 s of active time, a 429 (retry-after 1 s: a Wait, CallModel again) and a
    reply declaring an allowed action (DecideAndPost, ApplyAndFinish):
    each Task entered with the budget as its timeout got at most its function's timeout (and, with
    that much time left, exactly it)."""
    limits = _budget_tasks(resources)
    assert set(limits) == {"CallModel", "DecideAndPost", "ApplyAndFinish"}
    assert max(limits.values()) < 3600
    sc = Scenario.model_validate(
        {
            "companies": [{"id": "harbour", "people": ["ana"]}],
            "agents": [
                {
                    "id": "patient",
                    "company": "harbour",
                    "provider": "anthropic",
                    "model": "claude-haiku-4-5",
                    "instructions": "One line.",
                }
            ],
            "room": {"id": "timeouts", "members": ["harbour"]},
            "model_replies": {
                "patient": [
                    {
                        "error": {
                            "status": 429,
                            "headers": {"retry-after": "1"},
                            "body": {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}},
                        }
                    },
                    {
                        "reply": {
                            "text": "Noted.",
                            "actions": [{"kind": "remember", "text": "Budgets are capped.", "visibility": "company"}],
                        }
                    },
                ]
            },
            "steps": [{"post": {"as": "ana", "text": "Please note it.", "to": ["patient"]}}],
            "expect": {"replies": {"patient": 1}, "memory_lines": 1, "runs": {"completed": 1}},
        }
    )
    entered: list[tuple[str, int]] = []

    def inspect(stack: LocalStack, _result: Any) -> None:
        sfn = stack.client("stepfunctions")
        for ex in sfn.list_executions(stateMachineArn=stack.state_machine_arn)["executions"]:
            events = sfn.get_execution_history(executionArn=ex["executionArn"], maxResults=1000)["events"]
            for e in events:
                details = e.get("stateEnteredEventDetails", {})
                if e["type"] == "TaskStateEntered" and details.get("name") in limits:
                    entered.append((details["name"], json.loads(details["input"])["budget"]["remaining_s"]))

    result = Player(sc, time_scale=0.01, quiet_timeout_s=60, settings={"RUN_TIME_LIMIT_SECONDS": "3600"}).play(inspect)
    assert result.failures == [], result.failures
    assert sorted(name for name, _ in entered) == ["ApplyAndFinish", "CallModel", "CallModel", "DecideAndPost"]
    for name, remaining_s in entered:
        assert remaining_s == limits[name], (name, remaining_s, limits[name])
