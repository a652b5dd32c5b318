"""The metrics the alarms watch (docs/design.md §13), counted on the local stack.

moto has no CloudWatch metrics of Lambda or Step Functions, and the local stack switches
Powertools metrics off (POWERTOOLS_METRICS_DISABLED: no EMF lines in the output). So they are
counted here, in this process:

* the runtime's own metrics: every ``add_metric`` call of Powertools' EMF provider (the one
  place every ``metrics.add_metric`` of the runtime goes through, disabled or not) adds its
  value to :data:`RECORDER` under its name, as CloudWatch's ``Sum`` would over the play;
* a function's ``Errors``: the local invoker (``quaylocal.stack``) counts each invocation that
  raised, by function name, as Lambda does;
* ``IteratorAge``: the stream poller records, per batch it hands to the relay, the age of
  its newest record (ms), as the event source mapping does; the largest is kept (``Maximum``);
* queue depth and the age of its oldest message are read off SQS when asked
  (:func:`queue_depth_and_age`).

``Throttles`` has no local counterpart (the local invoker never refuses an invocation): it reads
0 here, and the template test checks its alarm.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider


class Recorder:
    """Counts of one play: ``app`` (runtime metric name -> sum), ``errors`` (function name ->
    invocations that raised), ``iterator_age_ms`` (function name -> largest age seen)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.app: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.iterator_age_ms: dict[str, float] = {}

    def reset(self) -> None:
        with self._lock:
            self.app.clear()
            self.errors.clear()
            self.iterator_age_ms.clear()

    def count(self, name: str, value: float) -> None:
        with self._lock:
            self.app[name] += value  # type: ignore[assignment]

    def error(self, function_name: str) -> None:
        with self._lock:
            self.errors[function_name] += 1

    def iterator_age(self, function_name: str, age_ms: float) -> None:
        with self._lock:
            self.iterator_age_ms[function_name] = max(age_ms, self.iterator_age_ms.get(function_name, 0.0))


RECORDER = Recorder()
_original_add_metric = AmazonCloudWatchEMFProvider.add_metric
_installed = False


def _counting_add_metric(
    self: AmazonCloudWatchEMFProvider, name: str, unit: Any, value: float, *a: Any, **k: Any
) -> None:
    _original_add_metric(self, name, unit, value, *a, **k)  # validates name, unit and value first
    RECORDER.count(name, value)


def install() -> None:
    """Count every runtime metric in :data:`RECORDER` (once per process)."""
    global _installed
    if not _installed:
        AmazonCloudWatchEMFProvider.add_metric = _counting_add_metric  # type: ignore[method-assign]
        _installed = True


def newest_record_age_ms(records: list[dict[str, Any]], now: float | None = None) -> float:
    """The age (ms) of the newest of a batch's stream ``records`` (``ApproximateCreationDateTime``:
    a datetime from boto3, or epoch seconds), as Lambda's ``IteratorAge`` counts it."""
    stamps = []
    for rec in records:
        at = (rec.get("dynamodb") or {}).get("ApproximateCreationDateTime")
        if at is not None:
            stamps.append(at.timestamp() if hasattr(at, "timestamp") else float(at))
    if not stamps:
        return 0.0
    return max(0.0, ((now if now is not None else time.time()) - max(stamps)) * 1000.0)


def queue_depth_and_age(sqs: Any, url: str, now: float | None = None) -> tuple[int, float]:
    """``(ApproximateNumberOfMessagesVisible, ApproximateAgeOfOldestMessage in s)`` of the queue
    at ``url``: the age from the ``SentTimestamp`` of the messages a look finds (received with
    visibility timeout 0: they stay visible)."""
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    depth = int(attrs.get("ApproximateNumberOfMessages", 0))
    if depth == 0:
        return 0, 0.0
    msgs = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0, AttributeNames=["SentTimestamp"]
    ).get("Messages", [])
    sent = [int(m["Attributes"]["SentTimestamp"]) / 1000.0 for m in msgs]
    oldest = min(sent) if sent else (now if now is not None else time.time())
    return depth, max(0.0, (now if now is not None else time.time()) - oldest)
