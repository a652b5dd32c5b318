"""The wake consumer's logic (docs/design.md §3): a wake from the SQS wake queue starts its run's
execution, named from the wake, so a wake delivered again starts nothing (the wakes come from the
outbox relay, :mod:`quayutec.logic.outbox`).
"""

from __future__ import annotations

import json

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import ClientError

from quayutec.dal.aws import error_code, transient_errors
from quayutec.deps import Deps
from quayutec.logic import ids
from quayutec.models import Wake

logger = Logger(child=True)
metrics = Metrics()


def start_run(deps: Deps, wake: Wake, receive_count: int = 1) -> str:
    """Start the execution of a wake, named from ``(agent_id, wake_id)``. Returns ``started`` or
    ``already_exists`` (``ExecutionAlreadyExists`` counts as done; Step Functions also returns
    the running execution for a repeat with the same name and input: StartExecution, Step
    Functions API reference).

    ``receive_count``: the SQS record's ``ApproximateReceiveCount`` (1 on a first delivery).
    A repeated delivery — refused by Step Functions, or a message SQS delivered before — is
    counted in the ledger and as the ``DuplicateWakeDelivery`` metric; a first delivery writes
    nothing (design §10: the wake's cost is its ``StartExecution``). A repeat that Step Functions
    answers with the running execution cannot be told from a first start without a write per
    wake, and is not counted."""
    name = ids.execution_name(wake.agent_id, wake.wake_id)
    sfn = deps.stepfunctions()
    outcome = "started"
    try:
        with transient_errors():
            sfn.start_execution(
                stateMachineArn=deps.settings.state_machine_arn,
                name=name,
                input=json.dumps({"wake": wake.model_dump(mode="json")}),
            )
    except ClientError as exc:
        if error_code(exc) != "ExecutionAlreadyExists":
            raise
        outcome = "already_exists"
    if outcome == "already_exists" or receive_count > 1:
        repeats = deps.ledger.count_repeat_delivery(wake.agent_id, wake.wake_id, outcome)
        logger.info(
            "repeated wake delivery",
            extra={
                "agent_id": wake.agent_id,
                "wake_id": wake.wake_id,
                "repeats": repeats,
                "outcome": outcome,
                "receive_count": receive_count,
            },
        )
        metrics.add_metric(name="DuplicateWakeDelivery", unit=MetricUnit.Count, value=1)
    return outcome
