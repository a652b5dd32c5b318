"""Observability: CloudWatch alarms on what needs a person.

* a message in a dead-letter / failed-events queue (a poison wake, an undeliverable event);
* agent-run executions that failed or timed out (ExecutionsFailed / ExecutionsTimedOut);
* errors of any Lambda function.

Alarms have no action yet: ``self.alarms`` is the place to attach an SNS topic / pager.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

PERIOD = Duration.minutes(5)


class Observability(Construct):
    def __init__(self, scope: Construct, construct_id: str, *,
                 queues: dict[str, sqs.IQueue], state_machine: sfn.StateMachine,
                 functions: dict[str, lambda_.IFunction]) -> None:
        super().__init__(scope, construct_id)
        self.alarms: dict[str, cw.Alarm] = {}

        for name, queue in queues.items():
            self._alarm(
                f"{name}Depth",
                queue.metric_approximate_number_of_messages_visible(
                    period=PERIOD, statistic=cw.Stats.MAXIMUM),
                f"{name} holds messages: inspect them (SPEC §3: poison wakes go there)")

        self._alarm("ExecutionsFailed",
                    state_machine.metric_failed(period=PERIOD, statistic=cw.Stats.SUM),
                    "Agent-run executions failed (the reconciler finalises their ledger)")
        self._alarm("ExecutionsTimedOut",
                    state_machine.metric_timed_out(period=PERIOD, statistic=cw.Stats.SUM),
                    "Agent-run executions hit the execution TimeoutSeconds")

        for logical_id, fn in functions.items():
            self._alarm(f"{logical_id}Errors",
                        fn.metric_errors(period=PERIOD, statistic=cw.Stats.SUM),
                        f"{logical_id} raised errors")

    def _alarm(self, name: str, metric: cw.IMetric, description: str) -> cw.Alarm:
        alarm = cw.Alarm(
            self, name,
            metric=metric,
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        self.alarms[name] = alarm
        return alarm
