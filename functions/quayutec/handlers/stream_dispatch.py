"""Room-table stream → wake queue (the outbox, SPEC §3). Event: a DynamoDB Streams batch;
returns ``{"batchItemFailures": [...]}`` (Powertools batch processing) so only failed records
are retried. Only records of the room table's own stream are read (``eventSourceARN``
``arn:…:table/{room table}/stream/…``): a record of any other source is skipped and logged, never
turned into wakes."""

from __future__ import annotations

import re
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from quayutec.logic.dispatch import send_wakes, wakes_of_stream_image
from quayutec.settings import get_settings

logger = Logger()
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


_STREAM_ARN = re.compile(r"^arn:[\w-]+:dynamodb:[\w-]*:\d*:table/(?P<table>[^/]+)/stream/.+$")


def from_room_table(record: DynamoDBRecord) -> bool:
    """Whether ``record`` comes from the room table's stream."""
    match = _STREAM_ARN.match(str(record.raw_event.get("eventSourceARN") or ""))
    return bool(match) and match.group("table") == get_settings().room_table


def record_handler(record: DynamoDBRecord) -> int:
    if record.raw_event.get("eventName") != "INSERT":
        return 0
    if not from_room_table(record):
        logger.warning("stream record of another source skipped",
                       extra={"event_source_arn": str(record.raw_event.get("eventSourceARN"))[:256]})
        return 0
    wakes = wakes_of_stream_image(record.dynamodb.new_image if record.dynamodb else None)
    if wakes:
        send_wakes(get_settings().wake_queue_url, wakes)
    return len(wakes)


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
