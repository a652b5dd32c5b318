"""Human output of a played scenario (``quay demo``): the room transcript, tasks, memory lines and
the ledger."""

from __future__ import annotations

from typing import Any

from quaycli.render import action_line, request_line
from quaycli.terminal import visible
from quaylocal.scenario import PlayResult


def _who(author: dict[str, Any]) -> str:
    if author["kind"] == "system":
        return "[system]"
    return f"{author['id']} ({author.get('company') or '?'})"


def render(result: PlayResult) -> str:
    out: list[str] = []
    add = out.append
    add(f"== Room {result.scenario.room.id} ==")  # the scenario's name for the room
    events = [(m["created_at"], "msg", m) for m in result.transcript]
    events += [(a["created_at"], "approval", a) for a in result.approvals]
    ordinal: dict[str, int] = {}
    for _, kind, item in sorted(events, key=lambda e: e[0]):
        if kind == "msg":
            to = f" → {', '.join(item['to'])}" if item.get("to") else ""
            tag = {"reply": "reply", "notice": "notice", "message": "says"}[item["kind"]]
            if item.get("visible_to"):  # a company-only notice: the operator's transcript shows it all
                tag += f" (visible to {item['visible_to']} only)"
            add(f"[{item['created_at'][11:19]}] {_who(item['author'])} {tag}{to}:")
            for line in item["text"].rstrip().splitlines():
                add(f"    {line}")
        else:
            ordinal[item["agent_id"]] = ordinal.get(item["agent_id"], 0) + 1
            # AGENT:N is the scenario's name for it (docs/scenarios.md, `approve`); the API's id follows
            add(
                f"[{item['created_at'][11:19]}] approval request {item['agent_id']}:{ordinal[item['agent_id']]} "
                f"(id {item['id']}, visible to {item['company']} only): {item['summary']} → {item['status']}"
                + (f" by {item['decided_by']}" if item.get("decided_by") else "")
            )
    if result.events:
        add("")
        add("== What the player did ==")
        for e in result.events:
            add(f"- {e}")
    add("")
    add("== Tasks ==")
    for t in result.tasks or []:
        add(
            f'- {t["id"]} [{t["status"]}] "{t["title"]}" for {t["to"]} from {t["created_by"]["id"]}'
            + (f" — result: {t['result']}" if t.get("result") else "")
        )
        for e in t.get("events", []):
            add(f"    · {e['kind']} by {e['by']['id']}: {e['text']}")
    if not result.tasks:
        add("- none")
    add("")
    add("== Memory ==")
    for m in result.memory or []:
        scope = "room" if m["visibility"] == "room" else f"{m['company']} only"
        add(f"- ({scope}) {m['text']}  — {m['author']['id']}")
    if not result.memory:
        add("- none")
    add("")
    add("== Ledger ==")
    if not result.runs:
        add("- none")
    for run in result.runs:
        add(
            f"- run {run['run_id']}: {run['status']}  agent {run['agent_id']}, wake {run['wake_id']} "
            f"(hop {run['hop']}, chain {run.get('chain_id') or '-'})"
        )
        for q in run["requests"]:
            add("    " + request_line(q))
        for a in run["actions"]:
            add("    " + action_line(a))
        if run.get("reply_message_id"):
            add(f"    reply: {run['reply_message_id']}")
        if run.get("error_class"):
            add(f"    error: {run['error_class']}: {run.get('error_message') or ''}")
        for nd in run.get("not_done") or []:
            add(f"    not done: {nd}")
    add("")
    add("== Summary ==")
    s = result.summary()
    add(f"replies {s['replies']}  model requests {s['model_requests']}")
    add(f"open tasks {s['open_tasks']}  memory lines {s['memory_lines']}  runs {s['runs']}")
    add("expect: OK" if result.expect_ok else "expect: FAILED")
    for f in [] if result.expect_ok else result.failures:
        add(f"  - {f}")
    # every line may hold untrusted text (messages, names, model output): shown, never obeyed
    return "\n".join(visible(line) for line in out)
