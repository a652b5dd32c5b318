"""The model's input for one run: a system prompt and one user turn rendering the room context
that ClaimAndRead assembled (design §2.2). Only what the agent's company may read is in the context
(its own company-only memory lines and notices, none of another company's: design §5), so only
that reaches the model."""

from __future__ import annotations

from typing import Any


def system_prompt(ctx: dict[str, Any]) -> str:
    agent = ctx["agent"]
    others = ", ".join(f"{a['id']} ({a['company']})" for a in ctx["room"]["agents"] if a["id"] != agent["id"])
    return (
        f"You are {agent['id']}, an always-on agent of {agent['company']} in the shared room "
        f"{ctx['room']['id']} (companies: {', '.join(ctx['room']['members'])}; other agents: {others or 'none'}).\n"
        "You keep nothing between wakes: everything you know is in the room context below.\n"
        "Reply with a short message for the room. To act, call the tools (remember, create_task, "
        "update_task, close_task); they are decided by your company's rights policy, not by you. "
        "Mention an agent as @agent-id to wake it.\n\n"
        f"Instructions from {agent['company']}:\n{agent['instructions']}"
    )


def _author(a: dict[str, Any]) -> str:
    """Who wrote something, with the company: a person's id is only unique within a company, so
    ``ann`` of another company must not read as this company's ``ann`` (SPEC §5: typed authors)."""
    if a.get("kind") == "system":
        return "[system]"
    return f"{a['id']} ({a['company']})" if a.get("company") else a["id"]


def _sender(m: dict[str, Any]) -> str:
    """Who wrote a message, and, for a company-only notice (design §5), that only the agent's
    own company sees it (the context holds no other company's)."""
    who = _author(m["author"])
    return f"{who} (only {m['visible_to']} sees this)" if m.get("visible_to") else who


def _inline(text: Any) -> str:
    """Untrusted text inside one entry of the context: its own line breaks (any of them) are
    indented, so no line of it can pass for an entry (``- [...] ann (acme): ...``) or a section
    (``## Memory``) of its own."""
    return "\n    ".join(str(text).splitlines())


def _block(text: Any) -> str:
    """A passage of a file: every line indented under its heading, for the same reason (a
    passage is never empty: chunks hold text)."""
    return "    " + _inline(text)


def user_text(ctx: dict[str, Any]) -> str:
    lines: list[str] = []
    lines.append("## Recent messages (oldest first)")
    for m in ctx["messages"]:
        lines.append(f"- [{m['created_at'][:19]}] {_sender(m)}: {_inline(m['text'])}")
    lines.append("\n## Open tasks sent to you")
    for t in ctx["open_tasks"] or []:
        lines.append(f'- {t["id"]} "{_inline(t["title"])}" from {_author(t["created_by"])}: {_inline(t["body"])}')
    if not ctx["open_tasks"]:
        lines.append("- none")
    lines.append("\n## Memory")
    for m in ctx["memory"]:
        lines.append(f"- ({m['visibility']}) {_inline(m['text'])}")
    if ctx["passages"]:
        lines.append("\n## From the room's files")
        for p in ctx["passages"]:
            where = (
                [f"part {p['index'] + 1}"]
                + ([f"page {p['page']}"] if p.get("page") else [])
                + ([f"line {p['line']}"] if p.get("line") else [])
            )
            lines.append(f"### {_inline(p['name'])} ({', '.join(where)})\n{_block(p['text'])}")
    cause = ctx["cause"]
    lines.append("\n## Why you woke")
    if cause["kind"] == "message":
        m = cause["message"]
        lines.append(f"Message from {_sender(m)}: {_inline(m['text'])}")
    else:
        t, e = cause["task"], cause["event"]
        lines.append(
            f'Task {t["id"]} ({t["status"]}) "{_inline(t["title"])}" for {t["to"]} by '
            f"{_author(t['created_by'])}: event '{e['kind']}' by {_author(e['by'])}: {_inline(e['text'])}"
        )
        if e["kind"] == "created":
            lines.append(f"Task body: {_inline(t['body'])}")
    return "\n".join(lines)
