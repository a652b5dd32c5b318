"""Wake queue → one Step Functions execution per wake (SPEC §3). Event: an SQS batch whose
bodies are :class:`~quayutec.models.Wake` JSON; returns partial batch failures. A malformed wake
fails its record (after ``maxReceiveCount`` it lands in the dead-letter queue)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from quayutec.deps import default_deps
from quayutec.logic.dispatch import start_run
from quayutec.models import Wake

logger = Logger()
metrics = Metrics()
processor = BatchProcessor(event_type=EventType.SQS)


def record_handler(record: SQSRecord) -> str:
    wake = Wake.model_validate_json(record.body)
    return start_run(default_deps(), wake, receive_count=int(record.attributes.approximate_receive_count or 1))


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
