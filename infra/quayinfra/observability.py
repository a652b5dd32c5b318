"""Observability: CloudWatch alarms on what needs a person, an SNS topic they publish to, and
one dashboard.

Alarms (:data:`quayinfra.alarms.ALARMS`, docs/design.md §13): runs failed by our own fault
(``RunFailed_fault``), a message in a dead-letter / failed-events queue and the age of its
oldest, the room stream's ``IteratorAge``, Lambda throttles, the reconciler's errors. Failed runs
of other causes, budget refusals, refused claims and wakes are information on the dashboard.

Every alarm publishes to ``self.topic`` (subscribe people or a pager to it; the context value
``alarmEmail`` subscribes one address). The topic is encrypted with a customer-managed key
whose policy lets CloudWatch use it: with the SNS-managed key (alias/aws/sns) CloudWatch cannot
publish and alarm notifications are dropped silently. ``enforce_ssl`` gives the topic a policy of
its own, which replaces SNS's default one: so that policy allows ``cloudwatch.amazonaws.com`` to
publish, for this account's alarms only (``aws:SourceAccount``, ``aws:SourceArn``: the
confused-deputy conditions of the SNS developer guide; docs/deploy.md, step 4).

The dashboard shows runs by final status, model requests by outcome, pending approvals (metrics
the runtime emits with Powertools, namespace POWERTOOLS_METRICS_NAMESPACE, dimension
``service``), wake DLQ depth and the phase functions' errors and durations.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from quayutec import resources as R

from .alarms import ALARMS, INFORMATION_METRICS, RUN_FAILED_FAULT, AlarmDef
from .config import Settings

PERIOD = Duration.minutes(5)

# Final statuses of a run (quayutec.models.FINAL_STATUSES) -> the metric the runtime emits
# (quayutec.logic.phases: "RunCompleted", f"Run_{status}" from close_failed_run).
RUN_STATUS_METRICS = {
    "completed": "RunCompleted",
    "failed_before_reply": "Run_failed_before_reply",
    "failed_after_reply": "Run_failed_after_reply",
    "timed_out": "Run_timed_out",
    "stopped": "Run_stopped",
}
# Model request outcomes (ModelRequestRecord.outcome): f"ModelRequest_{outcome}".
MODEL_REQUEST_OUTCOMES = ("ok", "error", "lost")
APPROVAL_REQUESTED = "ApprovalRequested"
APPROVAL_CLOSED = "ApprovalClosed"


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        queues: dict[str, sqs.IQueue],
        state_machine: sfn.StateMachine,
        functions: Mapping[str, lambda_.IFunction],
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: dict[str, cw.Alarm] = {}
        self._settings = settings

        # ------------------------------------------------------------------ the alarm topic
        self.key = kms.Key(
            self,
            "AlarmTopicKey",
            description=f"quayutec {settings.stage}: alarm topic encryption",
            enable_key_rotation=True,
            removal_policy=(
                RemovalPolicy.RETAIN if settings.removal_policy == RemovalPolicy.RETAIN else RemovalPolicy.DESTROY
            ),
        )
        # CloudWatch publishes alarm notifications to the encrypted topic. No aws:SourceAccount /
        # aws:SourceArn here: the SNS guide's key statement for AWS-service publishers has none, a
        # condition the KMS request does not carry would drop every notification silently, and the
        # topic's policy already lets only this account's alarms publish.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" is this key
            )
        )
        self.topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name=f"Quayutec {settings.stage} alarms",
            master_key=self.key,
            enforce_ssl=True,
        )
        # enforce_ssl's policy replaces the topic's default one: without this Allow, CloudWatch
        # may not publish and no alarm reaches anyone (SNS developer guide, "Example cases for
        # Amazon SNS access control": CloudWatch alarms, with the confused-deputy conditions).
        stack = Stack.of(self)
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(
                            service="cloudwatch",
                            resource="alarm",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    },
                },
            )
        )
        if settings.alarm_email:
            self.topic.add_subscription(subs.EmailSubscription(settings.alarm_email))
        self._action = cw_actions.SnsAction(self.topic)

        # ------------------------------------------------------------------ alarms
        # docs/design.md §13: each alarm watches a fault (quayinfra.alarms.ALARMS); what moves in
        # normal operation (a customer's bad key, a budget reached, a duplicate) is on the dashboard.
        for spec in ALARMS:
            self._alarm(spec, self._metric_of(spec, queues, functions))

        # ------------------------------------------------------------------ dashboard
        self.dashboard = self._dashboard(queues, state_machine, functions)

    # ---------------------------------------------------------------------- helpers
    def _metric_of(
        self, spec: AlarmDef, queues: dict[str, sqs.IQueue], functions: Mapping[str, lambda_.IFunction]
    ) -> cw.IMetric:
        period = Duration.seconds(spec.period_s)
        if spec.source == "app":
            return self._app_metric(spec.metric, None, statistic=spec.statistic, period=period)
        target = queues[spec.target] if spec.source == "queue" else functions[spec.target]  # type: ignore[index]
        return target.metric(spec.metric, statistic=spec.statistic, period=period)

    def _alarm(self, spec: AlarmDef, metric: cw.IMetric) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            spec.name,
            metric=metric,
            threshold=spec.threshold,
            evaluation_periods=spec.evaluation_periods,
            datapoints_to_alarm=spec.datapoints,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=spec.meaning,
        )
        alarm.add_alarm_action(self._action)
        self.alarms[spec.name] = alarm
        return alarm

    def _app_metric(
        self, name: str, label: str | None, *, statistic: str = cw.Stats.SUM, period: Duration = PERIOD
    ) -> cw.Metric:
        """A metric the runtime emits through Powertools Metrics (EMF)."""
        runtime = self._settings.runtime
        return cw.Metric(
            namespace=runtime["POWERTOOLS_METRICS_NAMESPACE"],
            metric_name=name,
            dimensions_map={"service": runtime["POWERTOOLS_SERVICE_NAME"]},
            statistic=statistic,
            period=period,
            label=label,
        )

    def _dashboard(
        self, queues: dict[str, sqs.IQueue], state_machine: sfn.StateMachine, functions: Mapping[str, lambda_.IFunction]
    ) -> cw.Dashboard:
        phases = [f.logical_id for f in R.FUNCTIONS if f.asl_placeholder]
        dashboard = cw.Dashboard(self, "Dashboard", default_interval=Duration.days(1))
        requested = self._app_metric(APPROVAL_REQUESTED, "requested")
        closed = self._app_metric(APPROVAL_CLOSED, "closed")
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Runs by final status",
                width=12,
                stacked=True,
                left=[self._app_metric(m, status) for status, m in RUN_STATUS_METRICS.items()],
            ),
            cw.GraphWidget(
                title="Model requests by outcome",
                width=12,
                stacked=True,
                left=[self._app_metric(f"ModelRequest_{o}", o) for o in MODEL_REQUEST_OUTCOMES],
            ),
        )
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Pending approvals (requested - closed, summed over the shown range)",
                width=12,
                left=[
                    cw.MathExpression(
                        expression="RUNNING_SUM(FILL(requested, 0) - FILL(closed, 0))",
                        using_metrics={"requested": requested, "closed": closed},
                        label="pending",
                        period=PERIOD,
                    )
                ],
                right=[requested, closed],
            ),
            cw.GraphWidget(
                title="Wake DLQ and failed-events depth",
                width=12,
                left=[
                    q.metric_approximate_number_of_messages_visible(
                        period=PERIOD, statistic=cw.Stats.MAXIMUM, label=name
                    )
                    for name, q in queues.items()
                ],
            ),
        )
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Failed runs by cause (only 'fault' is an alarm)",
                width=12,
                stacked=True,
                left=[self._app_metric(RUN_FAILED_FAULT, "fault")]
                + [self._app_metric(m, m.removeprefix("RunFailed_")) for m in INFORMATION_METRICS[:4]],
            ),
            cw.GraphWidget(
                title="Refusals and duplicates (information)",
                width=12,
                left=[self._app_metric(m, m) for m in INFORMATION_METRICS[4:]],
            ),
        )
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Phase errors (a customer's final provider error counts here too)",
                width=12,
                left=[functions[p].metric_errors(period=PERIOD, statistic=cw.Stats.SUM, label=p) for p in phases],
            ),
            cw.GraphWidget(
                title="Phase durations (p90)",
                width=12,
                left=[functions[p].metric_duration(period=PERIOD, statistic="p90", label=p) for p in phases],
            ),
        )
        dashboard.add_widgets(
            cw.GraphWidget(
                title="Agent-run executions",
                width=24,
                left=[
                    state_machine.metric_started(period=PERIOD, label="started"),
                    state_machine.metric_succeeded(period=PERIOD, label="succeeded"),
                    state_machine.metric_failed(period=PERIOD, label="failed"),
                    state_machine.metric_timed_out(period=PERIOD, label="timed out"),
                ],
            ),
        )
        return dashboard
