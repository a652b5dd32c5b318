"""Room files (design §8): the files bucket's S3 events → the ingest queue → IngestFunction.

The notification is the bucket's own ``NotificationConfiguration`` (no CDK custom resource:
``Bucket.add_event_notification`` deploys a Lambda outside the package, which moto's
CloudFormation cannot run either; the local stack sets the same notification itself). S3
checks at bucket creation that it may send to the queue, so the queue policy must exist first
and cannot name the bucket's ARN (a cycle): it names the stack's account and the bucket name
CloudFormation generates (``<stack>-filesbucket-*``).
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from quayutec import resources as R

from .functions import Functions
from .storage import Storage

INGEST_BATCH_SIZE = 5
EVENTS = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]


class Files(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        storage: Storage,
        queues: dict[str, sqs.Queue],
        functions: Functions,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        bucket = storage.bucket(R.FILES_BUCKET)
        queue = queues[R.INGEST_QUEUE.logical_id]
        fdef = R.FUNCTIONS_BY_ID["IngestFunction"]
        if R.INGEST_QUEUE.visibility_timeout_s < 6 * fdef.timeout_s:
            raise ValueError("the ingest queue's visibility timeout must be at least 6x the IngestFunction's timeout")
        policy = queue.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["sqs:SendMessage"],
                resources=[queue.queue_arn],
                principals=[iam.ServicePrincipal("s3.amazonaws.com")],
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{stack.partition}:s3:::{stack.stack_name.lower()}-"
                        f"{R.FILES_BUCKET.logical_id.lower()}-*"
                    },
                },
            )
        )
        cfn_bucket: s3.CfnBucket = bucket.node.default_child  # type: ignore[assignment]
        cfn_bucket.notification_configuration = s3.CfnBucket.NotificationConfigurationProperty(
            queue_configurations=[
                s3.CfnBucket.QueueConfigurationProperty(
                    event=event,
                    queue=queue.queue_arn,
                    filter=s3.CfnBucket.NotificationFilterProperty(
                        s3_key=s3.CfnBucket.S3KeyFilterProperty(
                            rules=[s3.CfnBucket.FilterRuleProperty(name="prefix", value=R.UPLOADS_PREFIX)]
                        )
                    ),
                )
                for event in EVENTS
            ]
        )
        if policy.policy_dependable is not None:
            cfn_bucket.node.add_dependency(policy.policy_dependable)
        # A plain mapping (as the wake consumer's): the "ingest:consume" touch grants what it uses.
        lambda_.EventSourceMapping(
            self,
            "IngestMapping",
            target=functions.target(fdef),  # with SnapStart its "live" alias
            event_source_arn=queue.queue_arn,
            batch_size=INGEST_BATCH_SIZE,
            report_batch_item_failures=True,
        )
