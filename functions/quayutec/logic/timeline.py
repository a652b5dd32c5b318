"""A run's timeline (design §2.8): its phases' spans, its model requests (with each retry's
wait and reason), its actions and the time parked on approvals, and its cost line in words
(design §10). Built from the ledger entries ``GET /runs/{run}`` reads: no execution history."""

from __future__ import annotations

from typing import Any

from quayutec.models import ActionRecord, ModelRequestRecord, RunCost, RunRecord, parse_iso

#: Services as the cost line's ``aws_requests`` keys name them → words.
_SERVICES = {
    "dynamodb": "DynamoDB",
    "sfn": "Step Functions",
    "stepfunctions": "Step Functions",
    "s3": "S3",
    "sqs": "SQS",
    "secrets-manager": "Secrets Manager",
    "secretsmanager": "Secrets Manager",
    "lambda": "Lambda",
    "events": "EventBridge",
    "bedrock-runtime": "Bedrock",
}


def _ms(start: str | None, end: str | None) -> int | None:
    if not start or not end:
        return None
    try:
        return max(0, round((parse_iso(end) - parse_iso(start)).total_seconds() * 1000))
    except ValueError:
        return None


def cost_text(cost: RunCost | None) -> str:
    """The cost line in words: ``"$0.00025 · 1,234 tokens in, 56 out · 15 AWS calls (DynamoDB 9,
    Step Functions 3, ...)"``; ``"cost not recorded"`` without one. USD is an estimate."""
    if cost is None:
        return "cost not recorded"
    tin = sum(t.input for t in cost.tokens.values())
    tout = sum(t.output for t in cost.tokens.values())
    by: dict[str, int] = {}
    for op, n in cost.aws_requests.items():
        name = _SERVICES.get(op.split(".", 1)[0], op.split(".", 1)[0])
        by[name] = by.get(name, 0) + int(n)
    calls = sum(by.values())
    services = ", ".join(f"{s} {n}" for s, n in sorted(by.items(), key=lambda kv: (-kv[1], kv[0])))
    usd = f"${cost.usd:.6f}".rstrip("0").rstrip(".") if cost.usd else "$0"
    return f"{usd} · {tin:,} tokens in, {tout:,} out · {calls:,} AWS call{'s' if calls != 1 else ''}" + (
        f" ({services})" if services else ""
    )


def timeline(run: RunRecord, requests: list[ModelRequestRecord], actions: list[ActionRecord]) -> dict[str, Any]:
    """``{"phases": [{phase, start, end, duration_ms}], "requests": [{n, sent_at, finished_at,
    duration_ms, status, outcome, input_tokens, output_tokens, wait_s, decision, message}],
    "actions": [{index, kind, target, decision, approval, outcome}], "parked_s", "duration_ms",
    "reply_message_id"}``; times ISO-8601 UTC. ``phases`` is empty for a run recorded before
    spans (design §2.8)."""
    return {
        "phases": [
            {"phase": s.phase, "start": s.start, "end": s.end, "duration_ms": _ms(s.start, s.end)}
            for s in run.spans or []
        ],
        "requests": [
            {
                "n": r.n,
                "sent_at": r.sent_at,
                "finished_at": r.finished_at,
                "duration_ms": _ms(r.sent_at, r.finished_at),
                "status": r.status,
                "outcome": r.outcome,
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
                "wait_s": r.wait_s,
                "decision": r.decision,
                "message": r.message,
            }
            for r in sorted(requests, key=lambda r: r.n)
        ],
        "actions": [
            {
                "index": a.index,
                "kind": a.kind,
                "target": a.target,
                "decision": a.decision,
                "approval": a.approval,
                "outcome": a.outcome,
            }
            for a in sorted(actions, key=lambda a: a.index)
        ],
        "parked_s": run.parked_s,
        "duration_ms": _ms(run.started_at, run.ended_at),
        "reply_message_id": run.reply_message_id,
    }
