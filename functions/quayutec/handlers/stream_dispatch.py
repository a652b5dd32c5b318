"""Room-table stream → wake queue (the outbox, design §3). Event: a DynamoDB Streams batch;
returns ``{"batchItemFailures": [...]}`` (:mod:`quayutec.handlers._batch`) so only failed records
are retried. Only records of the room table's own stream are read (``eventSourceARN``
``arn:…:table/{room table}/stream/…``): a record of any other source is skipped and logged, never
turned into wakes."""

from __future__ import annotations

import re
from typing import Any

from aws_lambda_powertools.logging import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from boto3.dynamodb.types import TypeDeserializer

from quayutec.handlers._batch import partial_response, stream_id
from quayutec.logic.dispatch import send_wakes, wakes_of_stream_image
from quayutec.settings import get_settings

logger = Logger()
_deserializer = TypeDeserializer()


_STREAM_ARN = re.compile(r"^arn:[\w-]+:dynamodb:[\w-]*:\d*:table/(?P<table>[^/]+)/stream/.+$")


def from_room_table(record: dict[str, Any]) -> bool:
    """Whether ``record`` comes from the room table's stream."""
    match = _STREAM_ARN.match(str(record.get("eventSourceARN") or ""))
    return match is not None and match.group("table") == get_settings().room_table


def new_image(record: dict[str, Any]) -> dict[str, Any] | None:
    """The record's ``NewImage`` as Python values (numbers as ``Decimal``)."""
    image = (record.get("dynamodb") or {}).get("NewImage")
    return {k: _deserializer.deserialize(v) for k, v in image.items()} if image else None


def record_handler(record: dict[str, Any]) -> int:
    if record.get("eventName") != "INSERT":
        return 0
    if not from_room_table(record):
        logger.warning(
            "stream record of another source skipped",
            extra={"event_source_arn": str(record.get("eventSourceARN"))[:256]},
        )
        return 0
    wakes = wakes_of_stream_image(new_image(record))
    if wakes:
        send_wakes(get_settings().wake_queue_url, wakes)
    return len(wakes)


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return partial_response(event, record_handler, stream_id)
