"""Reconciler (design §2.1): every claimed run's ledger entry reaches a final state, also when
the execution itself fails outside any Catch, times out or is aborted.

An EventBridge rule on "Step Functions Execution Status Change" events of THIS state machine
(FAILED, TIMED_OUT, ABORTED) invokes the ReconcilerFunction. Events that cannot be delivered,
and invocations that keep failing, land in the failed-events queue.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

RECONCILED_STATUSES = ("FAILED", "TIMED_OUT", "ABORTED")
EVENT_SOURCE = "aws.states"
EVENT_DETAIL_TYPE = "Step Functions Execution Status Change"


class Reconciler(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        state_machine: sfn.IStateMachine,
        function: lambda_.IFunction,
        failed_events: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        function.configure_async_invoke(
            retry_attempts=2,
            max_event_age=Duration.hours(6),
            on_failure=destinations.SqsDestination(failed_events),
        )
        self.rule = events.Rule(
            self,
            "ExecutionEndedRule",
            description="Agent-run executions that ended outside the state machine's own "
            "Catch: finalise their ledger entries",
            event_pattern=events.EventPattern(
                source=[EVENT_SOURCE],
                detail_type=[EVENT_DETAIL_TYPE],
                detail={
                    "status": list(RECONCILED_STATUSES),
                    "stateMachineArn": [state_machine.state_machine_arn],
                },
            ),
            targets=[
                targets.LambdaFunction(
                    function,
                    dead_letter_queue=failed_events,
                    retry_attempts=185,
                    max_event_age=Duration.hours(24),
                )
            ],
        )
