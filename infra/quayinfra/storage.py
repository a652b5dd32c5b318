"""Storage: the DynamoDB tables of ``resources.TABLES`` and the run-data bucket."""

from __future__ import annotations

from typing import cast

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from quayutec import resources as R

from . import checkov, nag
from .config import Settings

# Objects of a run live under <RUN_DATA_PREFIX><run_id>/...; the runtime roles may touch only
# those. (Proposed to move to resources.BucketDef; see the infra report.)
RUN_DATA_PREFIX = R.RUN_DATA_PREFIX

_ATTR_TYPES = {
    "S": dynamodb.AttributeType.STRING,
    "N": dynamodb.AttributeType.NUMBER,
    "B": dynamodb.AttributeType.BINARY,
}


def _attr(key: R.KeyAttr) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=key.name, type=_ATTR_TYPES[key.type])


class Storage(Construct):
    """Tables (by TableDef.logical_id) and buckets (by BucketDef.logical_id)."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings) -> None:
        super().__init__(scope, construct_id)
        self.tables: dict[str, dynamodb.Table] = {}
        for tdef in R.TABLES:
            self.tables[tdef.logical_id] = self._table(tdef, settings.removal_policy)
        self.buckets: dict[str, s3.Bucket] = {bdef.logical_id: self._bucket(bdef, settings) for bdef in R.BUCKETS}

    def table(self, tdef: R.TableDef) -> dynamodb.Table:
        return self.tables[tdef.logical_id]

    def bucket(self, bdef: R.BucketDef) -> s3.Bucket:
        return self.buckets[bdef.logical_id]

    def _table(self, tdef: R.TableDef, removal: RemovalPolicy) -> dynamodb.Table:
        table = dynamodb.Table(
            self,
            tdef.logical_id,
            partition_key=_attr(tdef.partition_key),
            sort_key=_attr(tdef.sort_key) if tdef.sort_key else None,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            stream=dynamodb.StreamViewType(tdef.stream) if tdef.stream else None,
            time_to_live_attribute=tdef.ttl_attribute,
            deletion_protection=removal == RemovalPolicy.RETAIN,
            removal_policy=removal,
        )
        for index in tdef.indexes:  # global only: no table has an LSI (design §14)
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_attr(index.partition_key),
                sort_key=_attr(index.sort_key),
                projection_type=dynamodb.ProjectionType.ALL
                if index.include is None
                else dynamodb.ProjectionType.INCLUDE,
                non_key_attributes=list(index.include) if index.include is not None else None,
            )
        # Template logical id = the shared definition's id (the local stack finds it by that).
        cast(dynamodb.CfnTable, table.node.default_child).override_logical_id(tdef.logical_id)
        checkov.acknowledge(
            table,
            "CKV_AWS_119",
            "Encrypted at rest with the AWS managed key (SSE-KMS, aws/dynamodb); a customer key would add its "
            "key policy and grants on every role and KMS cost per request, for no access boundary IAM lacks",
        )
        return table

    @staticmethod
    def _lifecycle(bdef: R.BucketDef, settings: Settings) -> list[s3.LifecycleRule]:
        rules = [
            s3.LifecycleRule(id="abort-incomplete-uploads", abort_incomplete_multipart_upload_after=Duration.days(1))
        ]
        if bdef is R.RUN_DATA_BUCKET:
            # Run data is per-run working state (context, model replies): the ledger keeps
            # the record, the objects expire (context value runDataExpiryDays).
            rules.append(
                s3.LifecycleRule(
                    id="expire-run-data",
                    prefix=RUN_DATA_PREFIX,
                    expiration=Duration.days(settings.run_data_expiry_days),
                )
            )
        if bdef is R.FILES_BUCKET:
            # Versioned (design §8): a download names the version that was ingested. What the
            # runtime deletes it deletes by version; what a later upload replaced, and a
            # superseded index version (retired with a delete marker), go a day on: longer than
            # any run holds the pointer that names it.
            rules.append(
                s3.LifecycleRule(
                    id="expire-replaced-versions",
                    noncurrent_version_expiration=Duration.days(1),
                    expired_object_delete_marker=True,
                )
            )
        return rules

    def _bucket(self, bdef: R.BucketDef, settings: Settings) -> s3.Bucket:
        removal = settings.removal_policy
        bucket = s3.Bucket(
            self,
            bdef.logical_id,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=bdef is R.FILES_BUCKET,  # design §8: a download names its version
            lifecycle_rules=self._lifecycle(bdef, settings),
            # Room files are uploaded from browsers with a presigned POST (design §8) and
            # downloaded with a presigned GET: only the files bucket answers cross-origin.
            cors=[
                s3.CorsRule(
                    allowed_methods=[s3.HttpMethods.POST, s3.HttpMethods.GET],
                    allowed_origins=["*"],
                    allowed_headers=["*"],
                    max_age=3000,
                )
            ]
            if bdef is R.FILES_BUCKET
            else None,
            # No auto_delete_objects: it is a custom resource (a Node Lambda outside the
            # package). With "destroy", empty the bucket before `cdk destroy`.
            removal_policy=removal,
        )
        cast(s3.CfnBucket, bucket.node.default_child).override_logical_id(bdef.logical_id)
        checkov.acknowledge(
            bucket,
            "CKV_AWS_18",
            "No access-log bucket: object access is audited through CloudTrail data events when the account "
            "enables them (the cdk-nag S1 acknowledgment below)",
        )
        if bdef is not R.FILES_BUCKET:
            checkov.acknowledge(
                bucket,
                "CKV_AWS_21",
                "Unversioned on purpose: a lifecycle rule expires run data; versions would keep it past its retention",
            )
        if bdef is R.FILES_BUCKET:
            nag.acknowledge(
                bucket,
                "S1",
                "Room files are written only through presigned POSTs the API signs for members "
                "and read by the runtime's own roles; object access is audited through "
                "CloudTrail data events when the account enables them, not a second log bucket.",
            )
            return bucket
        nag.acknowledge(
            bucket,
            "S1",
            "Run data is transient per-run working state written and read only by the runtime's "
            "own Lambda roles (scoped to the run prefix); object access is audited through "
            "CloudTrail data events when the account enables them, not a second log bucket.",
        )
        return bucket
