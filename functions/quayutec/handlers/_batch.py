"""Partial batch responses for the SQS and DynamoDB-stream handlers (Lambda's
``ReportBatchItemFailures``): each record handled on its own, the failed ones reported by id so
only they are retried. The contract of Powertools' ``BatchProcessor`` (``process_partial_response``),
in a few lines: that utility imports its event data classes, its parser models and asyncio at
cold start, a third of these functions' import time (issue 13 item 1).

* SQS: a failure is the record's ``messageId``; DynamoDB streams: its ``dynamodb.SequenceNumber``.
* Every record failed: :class:`BatchFailed` is raised (the whole batch is retried, as Powertools'
  ``BatchProcessingError``); an empty batch answers no failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.logging import Logger

logger = Logger(child=True)


class BatchFailed(Exception):
    """Every record of the batch failed (each one's error was logged)."""


def sqs_id(record: dict[str, Any]) -> str:
    return str(record.get("messageId", ""))


def stream_id(record: dict[str, Any]) -> str:
    return str((record.get("dynamodb") or {}).get("SequenceNumber", ""))


def partial_response(
    event: dict[str, Any], handle: Callable[[dict[str, Any]], Any], item_id: Callable[[dict[str, Any]], str]
) -> dict[str, Any]:
    """``{"batchItemFailures": [{"itemIdentifier": id}, ...]}`` of ``event``'s records, each given
    to ``handle`` (a raw record dict) in order; raises :class:`BatchFailed` when all failed."""
    records = (event.get("Records") or []) if isinstance(event, dict) else []
    failures: list[dict[str, str]] = []
    for record in records:
        try:
            handle(record)
        except Exception as exc:
            logger.exception("batch record failed", extra={"item": item_id(record), "error": type(exc).__name__})
            failures.append({"itemIdentifier": item_id(record)})
    if records and len(failures) == len(records):
        raise BatchFailed(f"All records failed processing ({len(records)}): each error logged")
    return {"batchItemFailures": failures}
