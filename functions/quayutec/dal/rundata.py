"""Run data too large or too private for the Step Functions state (design §5): the assembled
context and the model reply, stored in S3 under ``runs/{run_id}/``."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from quayutec.dal.aws import error_code, s3, transient_errors
from quayutec.resources import RUN_DATA_PREFIX


def run_data_key(run_id: str, name: str) -> str:
    """The S3 key of the run's document ``name``: ``runs/{run_id}/{name}.json``."""
    return f"{RUN_DATA_PREFIX}{run_id}/{name}.json"


class RunDataStore:
    def __init__(self, bucket: str, client: Any | None = None) -> None:
        self.bucket = bucket
        self._client = client

    @property
    def s3(self) -> Any:
        return self._client or s3()

    def put(self, run_id: str, name: str, data: dict[str, Any]) -> None:
        with transient_errors():
            self.s3.put_object(
                Bucket=self.bucket,
                Key=run_data_key(run_id, name),
                Body=json.dumps(data).encode(),
                ContentType="application/json",
            )

    def get(self, run_id: str, name: str) -> dict[str, Any] | None:
        """The stored document, or ``None`` when it does not exist."""
        try:
            with transient_errors():
                body = self.s3.get_object(Bucket=self.bucket, Key=run_data_key(run_id, name))["Body"].read()
        except ClientError as exc:
            if error_code(exc) in {"NoSuchKey", "404"}:
                return None
            raise
        return json.loads(body)
