"""The one price table of a run's cost line (SPEC §10, issue 13 item 2): USD, us-east-1, each
price with its source and the date it was read. Model tokens are priced per model by the
provider and are not in it (the cost line does not count tokens yet)."""

from __future__ import annotations

import math
from typing import Any

#: (price in USD per unit, unit, source, date read)
PRICES: dict[str, tuple[float, str, str, str]] = {
    "transition": (0.025 / 1000, "state transition (Standard)", "aws.amazon.com/step-functions/pricing/", "2026-11-30"),
    "lambda_request": (0.20 / 1_000_000, "request", "aws.amazon.com/lambda/pricing/", "2026-11-30"),
    "lambda_gb_second": (0.0000133334, "GB-second (arm64)", "aws.amazon.com/lambda/pricing/", "2026-11-30"),
    "ddb_write": (0.625 / 1_000_000, "write request unit (on-demand)", "aws.amazon.com/dynamodb/pricing/on-demand/",
                  "2026-11-30"),
    "ddb_read": (0.125 / 1_000_000, "read request unit (on-demand)", "aws.amazon.com/dynamodb/pricing/on-demand/",
                 "2026-11-30"),
    "s3_put": (0.005 / 1000, "PUT request (S3 Standard)", "aws.amazon.com/s3/pricing/", "2026-11-30"),
    "s3_get": (0.0004 / 1000, "GET request (S3 Standard)", "aws.amazon.com/s3/pricing/", "2026-11-30"),
    "sqs_request": (0.40 / 1_000_000, "request (standard queue)", "aws.amazon.com/sqs/pricing/", "2026-11-30"),
    "secret_call": (0.05 / 10_000, "API call", "aws.amazon.com/secrets-manager/pricing/", "2026-11-30"),
    "sfn_request": (0.0, "API call (not billed apart from transitions)", "aws.amazon.com/step-functions/pricing/",
                    "2026-11-30"),
}

_DDB_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")
_DDB_READS = ("GetItem", "Query", "BatchGetItem", "Scan", "TransactGetItems")


def price(name: str) -> float:
    return PRICES[name][0]


def estimate_usd(*, transitions: int, lambda_invocations: int, billed_ms: int, memory_mb: int,
                 aws_requests: dict[str, int]) -> float:
    """The estimated cost of counted operations. Each DynamoDB request is priced as one request
    unit: an estimate (a unit covers 4 KB read or 1 KB written; a transaction bills two units per
    item)."""
    usd = transitions * price("transition") + lambda_invocations * price("lambda_request")
    usd += price("lambda_gb_second") * (memory_mb / 1024) * (billed_ms / 1000)
    for key, n in aws_requests.items():
        service, _, op = key.partition(".")
        if service == "dynamodb":
            usd += n * (price("ddb_write") if op in _DDB_WRITES else price("ddb_read") if op in _DDB_READS else 0)
        elif service == "s3":
            usd += n * (price("s3_put") if op in ("PutObject", "DeleteObject") else price("s3_get"))
        elif service == "sqs":
            usd += n * price("sqs_request")
        elif service == "secrets-manager":
            usd += n * price("secret_call")
    return usd


def ceil_ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def table() -> list[dict[str, Any]]:
    """The price table as data (for ``quay ledger`` and the docs)."""
    return [{"name": k, "usd": v[0], "unit": v[1], "source": v[2], "date": v[3]} for k, v in PRICES.items()]
