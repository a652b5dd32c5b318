"""Ingest: S3 events of the files bucket (``uploads/{room}/{file_id}`` created or removed),
delivered through the ingest queue → the room's retrieval index (design §8). Event: an SQS batch
whose bodies are S3 event notifications; returns partial batch failures (a failing record is
redelivered, and after ``maxReceiveCount`` lands in the ingest dead-letter queue). A redelivered
event ingests once: an upload (an S3 version) already ingested is skipped; an upload whose file
was deleted is deleted (``discarded``); a denied read (403) fails the record, to be retried."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.logging import Logger
from aws_lambda_powertools.metrics import Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from quayutec.dal.files import parse_upload_key
from quayutec.deps import Deps, default_deps
from quayutec.handlers._batch import partial_response, sqs_id
from quayutec.logic import files as room_files
from quayutec.models import iso

logger = Logger()
metrics = Metrics()


def process(deps: Deps, body: str) -> list[str]:
    """Every S3 record of one queue message, in order; what happened to each."""
    message = json.loads(body)
    out: list[str] = []
    for rec in message.get("Records", []):  # none in S3's "s3:TestEvent"
        key = unquote_plus(rec.get("s3", {}).get("object", {}).get("key", ""))
        where = parse_upload_key(key)
        if where is None:
            out.append(f"ignored {key}")
            continue
        room_id, file_id = where
        name = str(rec.get("eventName", ""))
        if name.startswith("ObjectRemoved"):
            room_files.remove(deps, room_id, file_id)
            out.append(f"removed {file_id}")
        elif name.startswith("ObjectCreated"):
            at = iso(deps.clock())
            result = room_files.ingest(deps, room_id, file_id, at)
            logger.info("ingest", extra={"room_id": room_id, "file_id": file_id, "result": result})
            out.append(f"{file_id}: {result}")
        else:
            out.append(f"ignored {name}")
    return out


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext, deps: Deps | None = None) -> dict[str, Any]:
    d = deps or default_deps()

    return partial_response(event, lambda record: process(d, record["body"]), sqs_id)
