"""Wakes (design §3): room-table stream -> WakeRelay -> wake queue -> WakeConsumer.

Two steps, because the functions need the queue URL in their environment:
``Wakes(...)`` creates the queues (from ``resources.QUEUES``), ``connect(functions)`` adds the
event source mappings.
"""

from __future__ import annotations

from typing import cast

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from quayutec import resources as R

from . import checkov, nag
from .functions import Functions
from .storage import Storage

# Where undeliverable *events* land for an operator to inspect: stream batches WakeRelay
# could not process (on-failure destination), execution status events EventBridge could not
# deliver, and reconciler invocations that kept failing. Not a wake DLQ: its messages are
# invocation records, never redriven to a consumer. Infra-only (no handler reads it).
FAILED_EVENTS_QUEUE = R.FAILED_EVENTS_QUEUE

STREAM_BATCH_SIZE = 100
STREAM_RETRY_ATTEMPTS = 3
STREAM_MAX_RECORD_AGE = Duration.hours(1)
WAKE_BATCH_SIZE = 10
#: The wake consumer's SQS mapping runs at most this many consumers at once (ScalingConfig
#: MaximumConcurrency; 2 is AWS's least): it only starts executions, so a burst of wakes takes at
#: most 2 of the account's Lambda executions there, whatever the quota (docs/design.md §12.3).
WAKE_CONSUMER_MAX_CONCURRENCY = 2
WAKE_BATCHING_WINDOW = Duration.seconds(0)
# AWS: "set the source queue's visibility timeout to at least six times the timeout that you
# configure on your function" (Lambda with Amazon SQS), so retries after throttling fit.
VISIBILITY_TO_TIMEOUT = 6
RETENTION = Duration.days(14)  # the longest SQS keeps messages: time to look at failures


class Wakes(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, storage: Storage) -> None:
        super().__init__(scope, construct_id)
        self._storage = storage
        self.queues: dict[str, sqs.Queue] = {}
        for qdef in R.QUEUES:  # ordered: a DLQ comes before the queue that names it
            self.queues[qdef.logical_id] = self._queue(qdef)
        self.failed_events = self.queues[FAILED_EVENTS_QUEUE.logical_id]
        nag.acknowledge(
            self.failed_events,
            "SQS3",
            "This queue is itself a failure destination (stream on-failure, EventBridge target "
            "DLQ, Lambda async on-failure): a DLQ of a DLQ would only move the problem.",
        )

    @property
    def wake_queue(self) -> sqs.Queue:
        return self.queues[R.WAKE_QUEUE.logical_id]

    @property
    def dead_letter_queues(self) -> list[sqs.Queue]:
        return [self.queues[q.logical_id] for q in R.QUEUES if any(o.dead_letter == q.logical_id for o in R.QUEUES)]

    def _queue(self, qdef: R.QueueDef) -> sqs.Queue:
        dlq = None
        if qdef.dead_letter:
            dlq = sqs.DeadLetterQueue(queue=self.queues[qdef.dead_letter], max_receive_count=qdef.max_receive_count)
        queue = sqs.Queue(
            self,
            qdef.logical_id,
            visibility_timeout=Duration.seconds(qdef.visibility_timeout_s),
            retention_period=RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=dlq,
        )
        cast(sqs.CfnQueue, queue.node.default_child).override_logical_id(qdef.logical_id)
        checkov.acknowledge(
            queue,
            "CKV_AWS_27",
            "Encrypted at rest with SSE-SQS (SqsManagedSseEnabled); the check knows only KMS keys, which would "
            "add a KMS call to every send and receive",
        )
        return queue

    def connect(self, functions: Functions) -> None:
        # The functions, or with SnapStart their "live" aliases (Functions.target)
        relay = functions.target(R.FUNCTIONS_BY_ID["WakeRelayFunction"])
        consumer = functions.target(R.FUNCTIONS_BY_ID["WakeConsumerFunction"])
        self._check_visibility()
        relay.add_event_source(
            sources.DynamoEventSource(
                self._storage.table(R.ROOM_TABLE),
                # TRIM_HORIZON: records written while the mapping is created or replaced are
                # still dispatched (LATEST would skip them); a repeat is harmless (design §3).
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=STREAM_BATCH_SIZE,
                bisect_batch_on_error=True,
                retry_attempts=STREAM_RETRY_ATTEMPTS,
                max_record_age=STREAM_MAX_RECORD_AGE,
                report_batch_item_failures=True,
                on_failure=sources.SqsDlq(self.failed_events),
                # Only inserts that carry wakes invoke the relay (docs/design.md §3): a reply,
                # a member or a run's final write without wakes costs no invocation.
                filters=[lambda_.FilterCriteria.filter(R.ROOM_STREAM_FILTER)],
            )
        )
        # A plain mapping, not sources.SqsEventSource: that one also grants the queue's whole
        # consume set (GetQueueUrl, ChangeMessageVisibility); the consumer's "queue:consume"
        # touch grants what the mapping uses (ReceiveMessage, DeleteMessage, GetQueueAttributes).
        lambda_.EventSourceMapping(
            self,
            "WakeConsumerMapping",
            target=consumer,
            event_source_arn=self.wake_queue.queue_arn,
            batch_size=WAKE_BATCH_SIZE,
            max_batching_window=WAKE_BATCHING_WINDOW,
            report_batch_item_failures=True,
            max_concurrency=WAKE_CONSUMER_MAX_CONCURRENCY,
        )

    @staticmethod
    def _check_visibility() -> None:
        fdef = R.FUNCTIONS_BY_ID["WakeConsumerFunction"]
        if R.WAKE_QUEUE.visibility_timeout_s < VISIBILITY_TO_TIMEOUT * fdef.timeout_s:
            raise ValueError(
                f"the wake queue's visibility timeout ({R.WAKE_QUEUE.visibility_timeout_s} s) must "
                f"be at least {VISIBILITY_TO_TIMEOUT}x the WakeConsumer's timeout "
                f"({fdef.timeout_s} s), as AWS asks for SQS event sources"
            )
