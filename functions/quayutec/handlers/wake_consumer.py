"""Wake queue → one Step Functions execution per wake (design §3). Event: an SQS batch whose
bodies are :class:`~quayutec.models.Wake` JSON; returns partial batch failures. A malformed wake
fails its record (after ``maxReceiveCount`` it lands in the dead-letter queue)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.logging import Logger
from aws_lambda_powertools.metrics import Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from quayutec.deps import default_deps
from quayutec.handlers._batch import partial_response, sqs_id
from quayutec.logic.wake_consumer import start_run
from quayutec.models import Wake

logger = Logger()
metrics = Metrics()


def record_handler(record: dict[str, Any]) -> str:
    wake = Wake.model_validate_json(record["body"])
    count = (record.get("attributes") or {}).get("ApproximateReceiveCount")
    return start_run(default_deps(), wake, receive_count=int(count or 1))


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return partial_response(event, record_handler, sqs_id)
