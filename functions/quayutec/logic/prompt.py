"""The model's input for one run: a system prompt and one user turn rendering the room context
that ClaimAndRead assembled (SPEC §2.2). Only what the agent's company may read is in the context,
so only that reaches the model."""

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
    return a["id"] if a.get("kind") != "system" else "[system]"


def user_text(ctx: dict[str, Any]) -> str:
    lines: list[str] = []
    lines.append("## Recent messages (oldest first)")
    for m in ctx["messages"]:
        lines.append(f"- [{m['created_at'][:19]}] {_author(m['author'])}: {m['text']}")
    lines.append("\n## Open tasks sent to you")
    for t in ctx["open_tasks"] or []:
        lines.append(f"- {t['id']} \"{t['title']}\" from {_author(t['created_by'])}: {t['body']}")
    if not ctx["open_tasks"]:
        lines.append("- none")
    lines.append("\n## Memory")
    for m in ctx["memory"]:
        lines.append(f"- ({m['visibility']}) {m['text']}")
    if ctx["passages"]:
        lines.append("\n## From the room's files")
        for p in ctx["passages"]:
            where = [f"part {p['index'] + 1}"] + ([f"page {p['page']}"] if p.get("page") else []) + (
                [f"line {p['line']}"] if p.get("line") else [])
            lines.append(f"### {p['name']} ({', '.join(where)})\n{p['text']}")
    cause = ctx["cause"]
    lines.append("\n## Why you woke")
    if cause["kind"] == "message":
        m = cause["message"]
        lines.append(f"Message from {_author(m['author'])}: {m['text']}")
    else:
        t, e = cause["task"], cause["event"]
        lines.append(f"Task {t['id']} ({t['status']}) \"{t['title']}\" for {t['to']} by {_author(t['created_by'])}: "
                     f"event '{e['kind']}' by {_author(e['by'])}: {e['text']}")
        if e["kind"] == "created":
            lines.append(f"Task body: {t['body']}")
    return "\n".join(lines)
