"""Replay a finished run (design §5.1): decide its declared actions again from
what the run recorded — its stored model reply, the agents and tasks each decision read (kept
with each action in the ledger) — under today's code and the company's current policy. So a
difference means the code or the policy changed, not the room. It makes no model request and
writes nothing. The domain service behind ``GET /runs/{run}/replay`` and ``quay replay``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from quayutec.dal.ledger import REPLY_IN_RUN_DATA
from quayutec.deps import Deps
from quayutec.errors import Conflict, NotFound
from quayutec.logic import prompt, rights
from quayutec.logic.access import Principal
from quayutec.models import ActionRecord, Agent, RightsPolicy, RunRecord
from quayutec.tokens import estimate_tokens

#: Action kinds whose decision reads the room (an agent or a task): without recorded inputs they
#: cannot be decided again from the same facts.
_READS_ROOM = frozenset({"create_task", "update_task", "close_task"})


@dataclass(frozen=True)
class Decided:
    """One action's decision, then or now: its index in the reply, kind, target, decision
    (``allow`` / ``ask`` / ``deny``) and the rule or reason that gave it."""

    index: int
    kind: str
    target: str
    decision: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "target": self.target,
            "decision": self.decision,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Replay:
    """A run decided again: ``then`` (as recorded), ``now`` (today), ``same`` (every decision
    agrees), ``differ`` (the indexes that do not) and the prompt's sections as the run sent them
    (``{"section", "entries", "tokens"}``, tokens estimated as at the run)."""

    run_id: str
    then: list[Decided]
    now: list[Decided]
    differ: list[int] = field(default_factory=list)
    sections: list[dict[str, Any]] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.differ


def _decided(a: ActionRecord) -> Decided:
    return Decided(index=a.index, kind=a.kind, target=a.target, decision=a.decision, reason=a.reason)


def redecide(
    recorded: list[ActionRecord], tool_calls: list[dict[str, Any]], agent: Agent, policy: RightsPolicy | None
) -> tuple[list[Decided], list[Decided]]:
    """``(then, now)``: each recorded action as it was decided, and the same declared action
    (``tool_calls[index]``: ``{"name", "input"}``) decided again by today's
    :func:`quayutec.logic.rights.decide_action` on the room facts it recorded and ``policy``.
    Raises Conflict when an action that reads the room was recorded without its facts (decided
    before they were kept)."""
    then, now = [], []
    for a in sorted(recorded, key=lambda r: r.index):
        if a.inputs is None and a.kind in _READS_ROOM:
            raise Conflict(
                f"action {a.index} ({a.kind}) was decided before the room facts it read were recorded: "
                "this run cannot be replayed"
            )
        call = tool_calls[a.index] if 0 <= a.index < len(tool_calls) else {}
        again = rights.decide_action(
            a.index, str(call.get("name") or ""), call.get("input"), agent, policy, rights.view_of(a.inputs or {})
        )
        then.append(_decided(a))
        now.append(_decided(again))
    return then, now


def sections(ctx: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The prompt a stored context renders to, by section: the system prompt, each room section
    (entries and estimated tokens, as :mod:`quayutec.logic.prompt` renders them) and the whole."""
    if not ctx:
        return []
    out = [{"section": "system", "entries": 1, "tokens": estimate_tokens(prompt.system_prompt(ctx))}]
    for name, _share in prompt.SECTIONS:
        entries = list(ctx.get(name) or [])
        tokens = sum(estimate_tokens(prompt.RENDER[name](e)) + 1 for e in entries)
        out.append({"section": name, "entries": len(entries), "tokens": tokens})
    out.append({"section": "prompt", "entries": 1, "tokens": prompt.prompt_tokens(ctx)})
    return out


class Replays:
    """``deps``: the runtime's stores (the ledger, the run data, the company's policy)."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def replay(self, who: Principal, run_id: str) -> Replay:
        """Replay a run of the caller's company's agents. Raises Forbidden (an operator),
        NotFound (no such run of the company), Conflict (it has no model reply to decide from:
        it got none, or the one kept in run data expired; or its actions were recorded before
        their room facts were)."""
        company = who.require_company()
        run = self.deps.ledger.get_run(run_id)
        if run is None or run.company != company:
            raise NotFound(f"run {run_id!r} does not exist")
        reply = self._reply(run_id)
        if reply is None:
            raise self._no_reply(run)
        recorded = self.deps.ledger.actions(run_id)
        ctx = self.deps.rundata.get(run_id, "context")
        agent = self._agent(run, ctx)
        owner = self.deps.room.get_company(company)
        then, now = redecide(recorded, list(reply.get("tool_calls") or []), agent, owner.rights if owner else None)
        differ = [t.index for t, n in zip(then, now, strict=True) if t.decision != n.decision]
        return Replay(run_id=run_id, then=then, now=now, differ=differ, sections=sections(ctx))

    def _reply(self, run_id: str) -> dict[str, Any] | None:
        """The model reply the run decided from: its last request that brought one (the ledger
        keeps it, or says it is in run data)."""
        done = [r.n for r in self.deps.ledger.model_requests(run_id) if r.outcome == "ok"]
        if not done:
            return None
        reply = self.deps.ledger.request_reply(run_id, done[-1])
        if reply == REPLY_IN_RUN_DATA:
            reply = self.deps.rundata.get(run_id, "reply")
        return reply if isinstance(reply, dict) else None

    def _agent(self, run: RunRecord, ctx: dict[str, Any] | None) -> Agent:
        """The agent as the run's decision saw it: its id and company (its rights rest on no more)."""
        known = (ctx or {}).get("agent") or {}
        return Agent(
            id=run.agent_id,
            company=run.company,
            provider=known.get("provider") or "anthropic",
            model=known.get("model") or "unknown",
        )

    def _no_reply(self, run: RunRecord) -> Exception:
        """Why a run has no reply to decide from: it got none (it ended before, or is still
        calling its model), or the one it stored in run data expired."""
        return Conflict(
            f"run {run.run_id!r} has no model reply to decide from (status {run.status}; a reply stored in run "
            "data is kept runDataExpiryDays, 30 by default: docs/deploy.md)"
        )
