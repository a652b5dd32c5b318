"""The alarms of the stack, as data (docs/design.md §13): what each watches, its statistic,
threshold and periods, and what it means. :mod:`quayinfra.observability` builds the CloudWatch
alarms from :data:`ALARMS`; the local stack reads the same metrics (``LocalStack.alarm_metrics``)
and the tests drive each alarm's situation through it. No CDK here: plain data.

An alarm watches a fault, never a number that moves in normal operation: a customer's rejected
key, a budget reached, a duplicate delivery or a refused claim are information (the dashboard),
not alarms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from quayutec import resources as R

#: Where the metric comes from: the runtime's Powertools metrics (namespace
#: POWERTOOLS_METRICS_NAMESPACE, dimension ``service``), a queue (AWS/SQS, ``QueueName``), a
#: function (AWS/Lambda, ``FunctionName``).
Source = Literal["app", "queue", "function"]


@dataclass(frozen=True)
class AlarmDef:
    """One alarm: metric ``metric`` of ``source`` (``target``: the queue's or function's logical
    id), ``statistic`` over ``period_s`` seconds; in alarm when ``datapoints`` of the last
    ``evaluation_periods`` periods are ``>= threshold`` (missing data: not breaching).
    ``meaning``: the alarm's description (its runbook line is in docs/deploy.md)."""

    name: str
    source: Source
    metric: str
    target: str | None
    statistic: Literal["Sum", "Maximum"]
    threshold: float
    period_s: int
    evaluation_periods: int
    datapoints: int
    meaning: str


FIVE_MINUTES = 300
#: A run that failed by our own fault (docs/design.md §13: ``RunFailed_<cause>``).
RUN_FAILED_FAULT = "RunFailed_fault"
#: A message this old in a dead-letter queue was not looked at for a day (SQS keeps 14 days).
DLQ_OLDEST_AGE_S = 24 * 3600
#: The outbox relay (WakeRelayFunction) this far behind (ms) for 5 minutes in a row: wakes are late.
ITERATOR_AGE_MS = 60_000
#: Throttles of one function in 5 minutes: more than a burst the retries absorb.
THROTTLES = 5

_DLQS = (*(q for q in R.QUEUES if any(o.dead_letter == q.logical_id for o in R.QUEUES)), R.FAILED_EVENTS_QUEUE)
DEAD_LETTER_QUEUES: tuple[str, ...] = tuple(q.logical_id for q in _DLQS)

ALARMS: tuple[AlarmDef, ...] = (
    AlarmDef(
        "RunsFailedByFault",
        "app",
        RUN_FAILED_FAULT,
        None,
        "Sum",
        1,
        FIVE_MINUTES,
        1,
        1,
        "A run failed by the runtime's own fault (a phase raised, an unclassified provider error, a lost "
        "request, the execution failed outside the Catch): read its ledger entry and the phase's log",
    ),
    *(
        AlarmDef(
            f"{q}Depth",
            "queue",
            "ApproximateNumberOfMessagesVisible",
            q,
            "Maximum",
            1,
            FIVE_MINUTES,
            1,
            1,
            f"{q} holds a message: an event that could not be handled (docs/deploy.md runbook: inspect, redrive)",
        )
        for q in DEAD_LETTER_QUEUES
    ),
    *(
        AlarmDef(
            f"{q}OldestAge",
            "queue",
            "ApproximateAgeOfOldestMessage",
            q,
            "Maximum",
            DLQ_OLDEST_AGE_S,
            FIVE_MINUTES,
            1,
            1,
            f"A message has waited in {q} for a day: redrive or delete it before SQS drops it (14 days)",
        )
        for q in DEAD_LETTER_QUEUES
    ),
    AlarmDef(
        "StreamIteratorAge",
        "function",
        "IteratorAge",
        "WakeRelayFunction",
        "Maximum",
        ITERATOR_AGE_MS,
        60,
        5,
        5,
        "The room stream's relay is over a minute behind for 5 minutes: wakes are late (a batch keeps "
        "failing or the function is throttled)",
    ),
    *(
        AlarmDef(
            f"{f.logical_id}Throttles",
            "function",
            "Throttles",
            f.logical_id,
            "Sum",
            THROTTLES,
            FIVE_MINUTES,
            1,
            1,
            f"{f.logical_id} was throttled {THROTTLES}+ times in 5 minutes: the account's concurrency is used up",
        )
        for f in R.FUNCTIONS
    ),
    AlarmDef(
        "ReconcilerErrors",
        "function",
        "Errors",
        "ReconcilerFunction",
        "Sum",
        1,
        FIVE_MINUTES,
        1,
        1,
        "The reconciler raised: an execution that ended outside the Catch may keep a run 'running' "
        "(its event goes to FailedEventsQueue after EventBridge's retries)",
    ),
)
ALARMS_BY_NAME = {a.name: a for a in ALARMS}

#: The runtime's metrics that are information, not alarms (docs/design.md §13).
INFORMATION_METRICS = (
    "RunFailed_customer",
    "RunFailed_provider",
    "RunFailed_budget",
    "RunFailed_time_limit",
    "BudgetRefused",
    "WakeNotStarted",
    "DuplicateClaimRefused",
    "DuplicateWakeDelivery",
)
