"""The one price table of a run's cost line (design §10, issue 13 item 2): USD, us-east-1, each
price with its source and the date it was read; model tokens priced per model
(:data:`MODEL_PRICES`, overridable by the ``MODEL_PRICES`` runtime setting). A model with no
price leaves the model's share out of the estimate, and the cost line says so."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from quayutec.models import RunCost

#: (price in USD per unit, unit, source, date read)
PRICES: dict[str, tuple[float, str, str, str]] = {
    "transition": (0.025 / 1000, "state transition (Standard)", "aws.amazon.com/step-functions/pricing/", "2026-11-30"),
    "lambda_request": (0.20 / 1_000_000, "request", "aws.amazon.com/lambda/pricing/", "2026-11-30"),
    "lambda_gb_second": (0.0000133334, "GB-second (arm64)", "aws.amazon.com/lambda/pricing/", "2026-11-30"),
    "ddb_write": (
        0.625 / 1_000_000,
        "write request unit (on-demand)",
        "aws.amazon.com/dynamodb/pricing/on-demand/",
        "2026-11-30",
    ),
    "ddb_read": (
        0.125 / 1_000_000,
        "read request unit (on-demand)",
        "aws.amazon.com/dynamodb/pricing/on-demand/",
        "2026-11-30",
    ),
    "s3_put": (0.005 / 1000, "PUT request (S3 Standard)", "aws.amazon.com/s3/pricing/", "2026-11-30"),
    "s3_get": (0.0004 / 1000, "GET request (S3 Standard)", "aws.amazon.com/s3/pricing/", "2026-11-30"),
    "sqs_request": (0.40 / 1_000_000, "request (standard queue)", "aws.amazon.com/sqs/pricing/", "2026-11-30"),
    "secret_call": (0.05 / 10_000, "API call", "aws.amazon.com/secrets-manager/pricing/", "2026-11-30"),
    "sfn_request": (
        0.0,
        "API call (not billed apart from transitions)",
        "aws.amazon.com/step-functions/pricing/",
        "2026-11-30",
    ),
}

#: Model prices, USD per million tokens: model id → (provider kind, input, output, source, date
#: read). A built-in price applies to that provider's own API only (an ``openai-compatible``
#: server's ``gpt-4.1`` is not OpenAI's): other models are priced by the ``MODEL_PRICES``
#: setting (``{"model-id": {"input": usd, "output": usd}}``, per million tokens) or not at all.
#: The Claude 5 rows, Opus 4.5 and Haiku 4.5 were read on Anthropic's official model pages
#: (platform.claude.com/docs/…/models/…); the older Claude rows and OpenAI's are what independent
#: copies of the official pages agreed on in November 2026 (OpenAI's page could not be reached
#: from where they were written): re-check them on the page named.
_ANTHROPIC = "platform.claude.com/docs/en/about-claude/pricing"
_OPENAI = "developers.openai.com/api/docs/pricing"
_BEDROCK = "aws.amazon.com/bedrock/pricing/"
MODEL_PRICES: dict[str, tuple[str, float, float, str, str]] = {
    "claude-fable-5-1": ("anthropic", 10.0, 50.0, _ANTHROPIC, "2026-11-30"),
    "claude-opus-5-5": ("anthropic", 4.0, 20.0, _ANTHROPIC, "2026-11-30"),
    "claude-opus-5": ("anthropic", 5.0, 25.0, _ANTHROPIC, "2026-11-30"),
    "claude-sonnet-5-5": ("anthropic", 2.0, 10.0, _ANTHROPIC, "2026-11-30"),
    "claude-sonnet-5": ("anthropic", 2.0, 10.0, _ANTHROPIC, "2026-11-30"),
    "claude-opus-4-5": ("anthropic", 5.0, 25.0, _ANTHROPIC, "2026-11-30"),
    "claude-sonnet-4-5": ("anthropic", 3.0, 15.0, _ANTHROPIC, "2026-11-30"),
    "claude-haiku-4-5": ("anthropic", 1.0, 5.0, _ANTHROPIC, "2026-11-30"),
    "claude-opus-4-1": ("anthropic", 15.0, 75.0, _ANTHROPIC, "2026-11-30"),
    "claude-sonnet-4-0": ("anthropic", 3.0, 15.0, _ANTHROPIC, "2026-11-30"),
    "claude-3-5-haiku-latest": ("anthropic", 0.8, 4.0, _ANTHROPIC, "2026-11-30"),
    "gpt-5.4": ("openai", 2.50, 15.0, _OPENAI, "2026-11-30"),
    "gpt-5.4-mini": ("openai", 0.75, 4.50, _OPENAI, "2026-11-30"),
    "gpt-5.2": ("openai", 1.75, 14.0, _OPENAI, "2026-11-30"),
    "gpt-5": ("openai", 1.25, 10.0, _OPENAI, "2026-11-30"),
    "gpt-5-mini": ("openai", 0.25, 2.0, _OPENAI, "2026-11-30"),
    "gpt-5-nano": ("openai", 0.05, 0.40, _OPENAI, "2026-11-30"),
    "gpt-4.1": ("openai", 2.0, 8.0, _OPENAI, "2026-11-30"),
    "gpt-4.1-mini": ("openai", 0.40, 1.60, _OPENAI, "2026-11-30"),
    "gpt-4.1-nano": ("openai", 0.10, 0.40, _OPENAI, "2026-11-30"),
    "gpt-4o": ("openai", 2.50, 10.0, _OPENAI, "2026-11-30"),
    "gpt-4o-mini": ("openai", 0.15, 0.60, _OPENAI, "2026-11-30"),
    "anthropic.claude-haiku-4-5-20251001-v1:0": ("bedrock", 1.0, 5.0, _BEDROCK, "2026-11-30"),
    "anthropic.claude-sonnet-4-5-20250929-v1:0": ("bedrock", 3.0, 15.0, _BEDROCK, "2026-11-30"),
    "amazon.nova-micro-v1:0": ("bedrock", 0.035, 0.14, _BEDROCK, "2026-11-30"),
    "amazon.nova-lite-v1:0": ("bedrock", 0.06, 0.24, _BEDROCK, "2026-11-30"),
    "amazon.nova-pro-v1:0": ("bedrock", 0.80, 3.20, _BEDROCK, "2026-11-30"),
}

_DDB_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")
_DDB_READS = ("GetItem", "Query", "BatchGetItem", "Scan", "TransactGetItems")


def price(name: str) -> float:
    return PRICES[name][0]


def ddb_kind(operation: str) -> str | None:
    """``"write"`` / ``"read"`` for a DynamoDB data operation, else ``None``."""
    return "write" if operation in _DDB_WRITES else "read" if operation in _DDB_READS else None


def estimate_usd(
    *,
    transitions: int,
    lambda_invocations: int,
    billed_ms: int,
    memory_mb: int,
    aws_requests: dict[str, int],
    capacity: Mapping[str, float] | None = None,
    capacity_unknown: Mapping[str, int] | None = None,
) -> float:
    """The estimated cost of counted operations, the model's tokens excluded. DynamoDB: the
    consumed capacity the responses reported (``capacity``: read and write units, on-demand
    request units) plus one request unit for each call whose response reported none
    (``capacity_unknown``, by ``"dynamodb.Operation"``); without ``capacity`` (counts with no
    capacity figures: ``scripts/bench.py``), one unit per DynamoDB request. Either way an
    estimate."""
    usd = transitions * price("transition") + lambda_invocations * price("lambda_request")
    usd += price("lambda_gb_second") * (memory_mb / 1024) * (billed_ms / 1000)
    if capacity is not None:
        usd += float(capacity.get("read_units", 0)) * price("ddb_read")
        usd += float(capacity.get("write_units", 0)) * price("ddb_write")
        for key, n in (capacity_unknown or {}).items():
            kind = ddb_kind(key.partition(".")[2])
            usd += n * (price("ddb_write") if kind == "write" else price("ddb_read") if kind == "read" else 0)
    for key, n in aws_requests.items():
        service, _, op = key.partition(".")
        if service == "dynamodb":
            if capacity is None:
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
    return [{"name": k, "usd": v[0], "unit": v[1], "source": v[2], "date": v[3]} for k, v in PRICES.items()] + [
        {
            "name": f"model:{m}",
            "provider": v[0],
            "usd_per_million_input": v[1],
            "usd_per_million_output": v[2],
            "source": v[3],
            "date": v[4],
        }
        for m, v in MODEL_PRICES.items()
    ]


_DATED = re.compile(r"^(claude-[a-z0-9-]+?)-\d{8}$")

#: ``MODEL_PRICES`` overrides: model id → (USD per million input tokens, per million output).
Overrides = Mapping[str, tuple[float, float]]


def model_price(model: str, provider: str, overrides: Overrides | None = None) -> tuple[float, float] | None:
    """USD per million (input, output) tokens of ``model`` reached through ``provider``: the
    override when one names the model, else the built-in price of that provider's model, else
    ``None`` (unknown)."""
    if overrides and model in overrides:
        return overrides[model]
    known = MODEL_PRICES.get(model)
    if known is None and provider == "anthropic" and (dated := _DATED.match(model)):
        known = MODEL_PRICES.get(dated.group(1))  # claude-haiku-4-5-20251001 → its alias
    return (known[1], known[2]) if known and known[0] == provider else None


def price_cost(cost: RunCost, *, memory_mb: int, overrides: Overrides | None = None) -> RunCost:
    """``cost`` with its USD figures: ``usd_model_excluded`` (the AWS side), ``model_usd`` (the
    tokens' cost, ``None`` when a model's price is unknown: ``model_price_unknown`` names it) and
    ``usd``, their sum (the AWS side alone when the model's price is unknown)."""
    aws_usd = estimate_usd(
        transitions=cost.transitions,
        lambda_invocations=cost.lambda_invocations,
        billed_ms=cost.billed_ms,
        memory_mb=memory_mb,
        aws_requests=cost.aws_requests,
        capacity=cost.capacity,
        capacity_unknown=cost.capacity_unknown,
    )
    model_usd: float | None = 0.0
    unknown: list[str] = []
    for model, t in sorted(cost.tokens.items()):
        p = model_price(model, t.provider, overrides)
        if p is None:
            unknown.append(model)
        elif t.input or t.output:
            model_usd = (model_usd or 0.0) + t.input * p[0] / 1e6 + t.output * p[1] / 1e6
    if unknown:
        model_usd = None
    return cost.model_copy(
        update={
            "usd_model_excluded": round(aws_usd, 8),
            "model_usd": None if model_usd is None else round(model_usd, 8),
            "model_price_unknown": unknown,
            "usd": round(aws_usd + (model_usd or 0.0), 8),
        }
    )


def total(costs: Iterable[RunCost]) -> RunCost:
    """The sum of several runs' cost lines (``quay cost``): counts added, USD figures added as
    each run recorded them (at the prices of its own time); ``model_usd`` is ``None`` when any
    run's model price was unknown (``model_price_unknown`` names those models)."""
    from quayutec.models import RunCost, TokenCount

    out = RunCost(model_usd=0.0)
    unknown: set[str] = set()
    estimated: set[str] = set()
    for c in costs:
        out.lambda_invocations += c.lambda_invocations
        out.billed_ms += c.billed_ms
        out.transitions += c.transitions
        for k, n in c.aws_requests.items():
            out.aws_requests[k] = out.aws_requests.get(k, 0) + n
        for k, u in c.capacity.items():
            out.capacity[k] = round(out.capacity.get(k, 0.0) + u, 4)
        for k, n in c.capacity_unknown.items():
            out.capacity_unknown[k] = out.capacity_unknown.get(k, 0) + n
        for m, t in c.tokens.items():
            out.tokens.setdefault(m, TokenCount(provider=t.provider)).add(t)
        out.usd = round(out.usd + c.usd, 8)
        out.usd_model_excluded = round(out.usd_model_excluded + c.usd_model_excluded, 8)
        if c.model_usd is None:  # a model's price was unknown (model_price_unknown names it)
            unknown.update(c.model_price_unknown)
        elif out.model_usd is not None:
            out.model_usd = round(out.model_usd + c.model_usd, 8)
        estimated.update(c.estimated)
    out.model_price_unknown = sorted(unknown)
    if unknown:
        out.model_usd = None
    out.estimated = sorted(estimated)
    return out
