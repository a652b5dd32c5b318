"""The lines of a run's ledger entry as `quay ledger RUN` prints them (and the demo's ledger:
:mod:`quaylocal.transcript`): its model requests and declared actions, untrusted parts made visible."""

from __future__ import annotations

from typing import Any

from quaycli.terminal import visible


def action_line(a: dict[str, Any]) -> str:
    """One declared action of a run's ledger entry (``quay ledger RUN`` and the demo alike): kind
    and target, the decision, the approval's answer when it was held, the outcome, and why (the
    decision's reason, the outcome's note); untrusted parts made visible."""
    approval = f" → {a['approval']}" if a.get("approval") else ""
    why = "; ".join(x for x in (a.get("reason"), a.get("outcome_note")) if x)
    return visible(
        f"action {a['index']} {a['kind']} → {a.get('target') or '?'}: {a['decision']}{approval} → "
        f"{a['outcome']}" + (f" ({why})" if why else "")
    )


def request_line(q: dict[str, Any]) -> str:
    """One model request of the ledger on one line: number, time sent, provider, HTTP status,
    the provider's request id, its error type/code, the classification, the wait chosen and why,
    and the provider's own error message (as stored, at most 1,000 characters).

    ``request 1  10:42:07  anthropic  HTTP 429  id req_01H…  rate_limit_error  → rate_limit,
    retryable, wait 2 s  why: retry-after: 1.5 -> wait 2 s before request 2``
    """
    outcome = q.get("outcome")
    if q.get("status") is not None:
        status = f"HTTP {q['status']}"
    else:
        status = {"error": "no response", "lost": "unknown", "pending": "in flight"}.get(str(outcome), "-")
    head = (
        f"request {q['n']}  {(q.get('sent_at') or '')[11:19]}  {q.get('provider') or '?'}  {status}  "
        f"id {q.get('request_id') or '-'}"
    )
    if outcome == "ok":
        return visible(f"{head}  → reply")
    if outcome == "pending":
        return visible(f"{head}  → no outcome recorded yet")
    marker = "/".join(dict.fromkeys(str(x) for x in (q.get("error_type"), q.get("error_code")) if x)) or "-"
    kind = "retryable" if q.get("retryable") else "final"
    wait = f"wait {q['wait_s']} s" if q.get("wait_s") is not None else "no wait"
    why = f"  why: {q['decision']}" if q.get("decision") else ""
    # the provider's own words: its message, else the error body it sent (as stored)
    told = q.get("message") or q.get("body")
    said = f"  provider said: {' '.join(str(told).split())[:1000]}" if told else ""
    return visible(f"{head}  {marker}  → {q.get('category') or outcome}, {kind}, {wait}{why}{said}")


def _duration(ms: int | None) -> str:
    if ms is None:
        return "-"
    return f"{ms} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def timeline_lines(timeline: dict[str, Any], cost_text: str = "") -> list[str]:
    """A run's timeline (``GET /runs/{run}``'s ``timeline``, docs/design.md §2.8) as ``quay ledger
    RUN`` prints it: each phase's span and duration, a bar scaled to the longest, the model
    retries' waits with their reason between them, the time parked on approvals, the cost in words.

    ``ClaimAndRead   16:42:07.120  +   85 ms  ████``
    """
    phases = timeline.get("phases") or []
    if not phases:
        lines = ["timeline: no phase spans recorded (a run recorded before spans, or one that failed early)"]
    else:
        longest = max((p.get("duration_ms") or 0) for p in phases) or 1
        lines = [f"timeline ({_duration(timeline.get('duration_ms'))} in all):"]
        waits = [q for q in timeline.get("requests") or [] if q.get("wait_s") is not None]
        calls = 0
        for p in phases:
            bar = "█" * max(1, round(20 * (p.get("duration_ms") or 0) / longest))
            lines.append(
                f"  {p['phase']:<15} {(p.get('start') or '')[11:23]}  {_duration(p.get('duration_ms')):>9}  {bar}"
            )
            if p["phase"] == "CallModel":
                if calls < len(waits):
                    q = waits[calls]
                    lines.append(f"  {'Wait':<15} {'':12}  {q['wait_s']:>7} s  {q.get('decision') or ''}")
                calls += 1
    if timeline.get("parked_s"):
        lines.append(f"  parked on approvals {timeline['parked_s']:.1f} s")
    if cost_text:
        lines.append(f"  cost {cost_text}")
    return [visible(line) for line in lines]
