"""Wakes on their way: room-table stream record → wake queue → one execution per wake (design §3)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import ClientError

from quayutec.dal.aws import error_code, sqs, transient_errors
from quayutec.deps import Deps
from quayutec.logic import ids
from quayutec.models import Wake

logger = Logger(child=True)
metrics = Metrics()


def wakes_of_stream_image(new_image: dict[str, Any] | None) -> list[Wake]:
    """The wakes an inserted room-table item carries (deserialized ``NewImage``)."""
    if not new_image or not new_image.get("wakes"):
        return []
    return [Wake.model_validate(w) for w in new_image["wakes"]]


def send_wakes(queue_url: str, wakes: list[Wake], client: Any | None = None) -> None:
    """Send wakes to the SQS wake queue (10 per batch call). Raises on any failed entry, so the
    stream record is retried (a repeat is harmless: the execution name dedups)."""
    q = client or sqs()
    for start in range(0, len(wakes), 10):
        batch = wakes[start : start + 10]
        with transient_errors():
            resp = q.send_message_batch(
                QueueUrl=queue_url,
                Entries=[{"Id": str(i), "MessageBody": w.model_dump_json()} for i, w in enumerate(batch)],
            )
        if resp.get("Failed"):
            raise RuntimeError(
                f"{len(resp['Failed'])} wake(s) not accepted by SQS: " + ", ".join(f["Code"] for f in resp["Failed"])
            )


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
