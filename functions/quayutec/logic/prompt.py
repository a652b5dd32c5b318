"""The model's input for one run: a system prompt and one user turn rendering the room context
that ClaimAndRead assembled (design §2.2). Only what the agent's company may read is in the context
(its own company-only memory lines and notices, none of another company's: design §5, §12.5), so only
that reaches the model.

The prompt fits the agent's context budget (:func:`fit`, design §2.2): the instructions and the
wake's cause always go in, the room's roster is bounded, and the recent messages, open tasks,
memory lines and passages fill what is left, newest (best) first, each section within its own
share; what is left out is left out whole, oldest first, and the prompt says how many."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from quayutec.tokens import REPLY_MAX_TOKENS, estimate_tokens
from quayutec.words import count

#: The roster in the system prompt names at most this many other agents, and as many companies
#: ("and 40 more agents").
ROSTER_MAX = 20
#: The sections that fill what the instructions and the cause leave, in this order, each first
#: within its own share of it; what a section leaves of its share goes to the next ones.
SECTIONS: tuple[tuple[str, float], ...] = (("messages", 0.5), ("open_tasks", 0.2), ("memory", 0.15), ("passages", 0.15))
#: Tokens kept free beside the prompt and the reply: the provider's framing of the turns and of
#: the tools (its own tool-use preamble), on top of the tool definitions' own estimate.
FRAMING_TOKENS = 1000


@cache
def margin_tokens() -> int:
    """What a request takes beside the prompt and the reply: the tool definitions and framing."""
    from quayutec.tools import TOOL_SPECS

    return estimate_tokens(json.dumps(TOOL_SPECS)) + FRAMING_TOKENS


def prompt_budget(max_context_tokens: int) -> int:
    """The tokens an agent's prompt may take: its budget less the reply's cap and the margin."""
    return max_context_tokens - REPLY_MAX_TOKENS - margin_tokens()


def _plural(n: int, one: str, many: str) -> str:
    return count(n, one, many)


def _bounded(names: list[str], what: tuple[str, str]) -> str:
    shown = ", ".join(names[:ROSTER_MAX])
    more = len(names) - ROSTER_MAX
    return f"{shown} and {_plural(more, 'more ' + what[0], 'more ' + what[1])}" if more > 0 else shown


def roster(ctx: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The room's companies and its other agents as the system prompt names them, in order: the
    agent's own company (and its agents) first, then by id; the first :data:`ROSTER_MAX` of each
    are named, the rest counted."""
    agent = ctx["agent"]
    mine = agent["company"]
    companies = sorted(ctx["room"]["members"], key=lambda c: (c != mine, c))
    others = sorted(
        (a for a in ctx["room"]["agents"] if a["id"] != agent["id"]), key=lambda a: (a["company"] != mine, a["id"])
    )
    return companies, [f"{a['id']} ({a['company']})" for a in others]


def system_prompt(ctx: dict[str, Any]) -> str:
    agent = ctx["agent"]
    companies, others = roster(ctx)
    return (
        f"You are {agent['id']}, an always-on agent of {agent['company']} in the shared room "
        f"{ctx['room']['id']} (companies: {_bounded(companies, ('company', 'companies'))}; "
        f"other agents: {_bounded(others, ('agent', 'agents')) or 'none'}).\n"
        "You keep nothing between wakes: everything you know is in the room context below.\n"
        "Reply with a short message for the room. To act, call the tools (remember, create_task, "
        "update_task, close_task); they are decided by your company's rights policy, not by you. "
        "Mention an agent as @agent-id to wake it.\n\n"
        f"Instructions from {agent['company']}:\n{agent['instructions']}"
    )


def _author(a: dict[str, Any]) -> str:
    """Who wrote something, with the company: a person's id is only unique within a company, so
    ``ann`` of another company must not read as this company's ``ann`` (design §5: typed authors)."""
    if a.get("kind") == "system":
        return "[system]"
    return f"{a['id']} ({a['company']})" if a.get("company") else a["id"]


def _sender(m: dict[str, Any]) -> str:
    """Who wrote a message, and, for a company-only notice (design §12.5), that only the agent's
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


def message_line(m: dict[str, Any]) -> str:
    return f"- [{m['created_at'][:19]}] {_sender(m)}: {_inline(m['text'])}"


def task_line(t: dict[str, Any]) -> str:
    return f'- {t["id"]} "{_inline(t["title"])}" from {_author(t["created_by"])}: {_inline(t["body"])}'


def memory_line(m: dict[str, Any]) -> str:
    return f"- ({m['visibility']}) {_inline(m['text'])}"


def passage_block(p: dict[str, Any]) -> str:
    where = (
        [f"part {p['index'] + 1}"]
        + ([f"page {p['page']}"] if p.get("page") else [])
        + ([f"line {p['line']}"] if p.get("line") else [])
    )
    return f"### {_inline(p['name'])} ({', '.join(where)})\n{_block(p['text'])}"


#: Each section's entries, rendered.
RENDER = {"messages": message_line, "open_tasks": task_line, "memory": memory_line, "passages": passage_block}


def _left_out(ctx: dict[str, Any], section: str, what: str) -> str:
    n = int((ctx.get("left_out") or {}).get(section, 0))
    return f" ({n} {what} left out to fit your context)" if n else ""


def user_text(ctx: dict[str, Any]) -> str:
    lines: list[str] = []
    lines.append("## Recent messages (oldest first)" + _left_out(ctx, "messages", "older"))
    lines += [message_line(m) for m in ctx["messages"]]
    lines.append("\n## Open tasks sent to you" + _left_out(ctx, "open_tasks", "older"))
    lines += [task_line(t) for t in ctx["open_tasks"] or []]
    if not ctx["open_tasks"]:
        lines.append("- none")
    lines.append("\n## Memory" + _left_out(ctx, "memory", "older"))
    lines += [memory_line(m) for m in ctx["memory"]]
    if ctx["passages"] or (ctx.get("left_out") or {}).get("passages"):
        lines.append("\n## From the room's files" + _left_out(ctx, "passages", "lower-ranked"))
        lines += [passage_block(p) for p in ctx["passages"]]
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


def prompt_tokens(ctx: dict[str, Any]) -> int:
    """The estimate of the prompt a context renders to (system prompt and user turn)."""
    return estimate_tokens(system_prompt(ctx)) + estimate_tokens(user_text(ctx))


def fit(ctx: dict[str, Any], max_context_tokens: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """``ctx`` fitted into an agent's ``max_context_tokens`` (design §2.2), and what the fitting
    did (a :class:`quayutec.models.ContextFit`'s fields).

    The instructions, the wake's cause and the bounded roster always go in. Then each section
    (:data:`SECTIONS`) takes its entries newest first (passages best first) while they fit in its
    share of what is left, and what the sections leave of their shares goes to them again in the
    same order. A section stops at the first entry that does not fit: what is left out is whole
    entries, the oldest (lowest-ranked) ones. ``ctx``'s sections are oldest first (passages best
    first), as ClaimAndRead reads them; so are the fitted ones."""
    budget = prompt_budget(max_context_tokens)
    companies, others = roster(ctx)
    left_out = {
        "agents": max(0, len(others) - ROSTER_MAX),
        "companies": max(0, len(companies) - ROSTER_MAX),
    }
    # The fixed part, with every entry left out (the notes then carry the largest counts: an
    # estimate that only falls as entries come back in).
    empty = {**ctx, **{s: [] for s, _ in SECTIONS}, "left_out": {s: len(ctx[s] or []) for s, _ in SECTIONS}}
    left = budget - prompt_tokens(empty)
    newest_first = {s: list(ctx[s] or []) if s == "passages" else list(reversed(ctx[s] or [])) for s, _ in SECTIONS}
    costs = {s: [estimate_tokens(RENDER[s](e)) + 1 for e in newest_first[s]] for s, _ in SECTIONS}  # + its line break
    taken = dict.fromkeys(costs, 0)
    if left > 0:
        used = 0
        for s, share in SECTIONS:  # first each within its own share
            room, spent = int(left * share), 0
            while taken[s] < len(costs[s]) and spent + costs[s][taken[s]] <= room:
                spent += costs[s][taken[s]]
                taken[s] += 1
            used += spent
        rest = left - used
        for s, _ in SECTIONS:  # then what the shares left, in the same order
            while taken[s] < len(costs[s]) and costs[s][taken[s]] <= rest:
                rest -= costs[s][taken[s]]
                taken[s] += 1
    fitted = dict(ctx)
    for s, _ in SECTIONS:
        kept = newest_first[s][: taken[s]]
        fitted[s] = kept if s == "passages" else kept[::-1]
        left_out[s] = len(newest_first[s]) - taken[s]
    fitted["left_out"] = {s: n for s, n in left_out.items() if n}
    tokens = prompt_tokens(fitted)
    return fitted, {
        "max_context_tokens": max_context_tokens,
        "budget": budget,
        "prompt_tokens": tokens,
        "left_out": fitted["left_out"],
        "over_budget": tokens > budget,
    }
