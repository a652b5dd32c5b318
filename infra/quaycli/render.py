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
    said = f"  provider said: {' '.join(str(q['message']).split())}" if q.get("message") else ""
    return visible(f"{head}  {marker}  → {q.get('category') or outcome}, {kind}, {wait}{why}{said}")
