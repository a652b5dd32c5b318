"""Fitting a run's context into its agent's budget (quayutec.logic.prompt.fit, design §2.2): the
instructions and the wake's cause always go in, the roster is bounded, each section leaves out
whole entries, oldest first, and the rendered prompt's estimate stays within the budget."""

from __future__ import annotations

from typing import Any

import pytest

from quayutec.logic.prompt import ROSTER_MAX, fit, prompt_budget, prompt_tokens, system_prompt, user_text
from quayutec.models import MIN_CONTEXT_TOKENS

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

PERSON = {"kind": "person", "id": "ann", "company": "acme"}


def _msg(i: int, size: int = 4000) -> dict[str, Any]:
    words = f"message-{i:03d} " + " ".join(f"word{i}x{j}" for j in range(size // 10))
    return {
        "id": f"m{i}",
        "created_at": f"2026-11-30T10:{i // 60:02d}:{i % 60:02d}.000000Z",
        "author": PERSON,
        "text": words,
    }


def _ctx(messages: int = 40, size: int = 4000, agents: int = 3, instructions: str = "Be brief.") -> dict[str, Any]:
    cause = {**_msg(999, 200), "text": "@a1 THE CAUSE please answer"}
    return {
        "agent": {"id": "acme.a1", "company": "acme", "instructions": instructions},
        "room": {
            "id": "r1",
            "members": ["acme", "bolt"],
            "agents": [{"id": "acme.a1", "company": "acme"}]
            + [{"id": f"bolt.b{i:03d}", "company": "bolt"} for i in range(agents)],
        },
        "cause": {"kind": "message", "message": cause},
        "messages": [_msg(i, size) for i in range(messages)],
        "open_tasks": [
            {"id": f"t{i}", "title": f"task {i}", "body": "do it " * 200, "created_by": PERSON} for i in range(30)
        ],
        "memory": [{"visibility": "room", "text": f"memory line {i} " * 30} for i in range(100)],
        "passages": [{"name": "notes.md", "index": i, "text": f"passage {i} " * 300} for i in range(5)],
    }


def test_everything_fits_in_a_large_budget() -> None:
    ctx = _ctx(messages=5, size=200)
    fitted, record = fit(ctx, 1_000_000)
    assert record["left_out"] == {} and not record["over_budget"]
    assert fitted["messages"] == ctx["messages"] and fitted["memory"] == ctx["memory"]
    assert record["prompt_tokens"] == prompt_tokens(fitted) <= record["budget"]


def test_the_oldest_are_left_out_whole_and_the_prompt_fits() -> None:
    ctx = _ctx()
    fitted, record = fit(ctx, 20_000)
    kept = fitted["messages"]
    n = record["left_out"]["messages"]
    assert n > 0 and len(kept) + n == 40
    assert kept == ctx["messages"][n:]  # the newest, in order, each whole
    assert record["prompt_tokens"] == prompt_tokens(fitted) <= record["budget"] == prompt_budget(20_000)
    text = user_text(fitted)
    assert f"({n} older left out to fit your context)" in text
    assert "THE CAUSE" in text and "message-039" in text and "message-000 " not in text
    for section in ("open_tasks", "memory"):  # each section keeps its newest, within its share
        kept_s, out = fitted[section], record["left_out"].get(section, 0)
        assert kept_s == ctx[section][out:]
    assert fitted["passages"] == ctx["passages"][: 5 - record["left_out"].get("passages", 0)]  # best first


def test_each_section_keeps_a_share_when_messages_could_take_it_all() -> None:
    fitted, record = fit(_ctx(messages=40, size=8000), 30_000)
    assert fitted["messages"] and fitted["open_tasks"] and fitted["memory"] and fitted["passages"]
    assert record["left_out"]["messages"] > 0


def test_a_section_left_its_share_unused_gives_it_to_the_others() -> None:
    ctx = {**_ctx(), "open_tasks": [], "memory": [], "passages": []}
    alone, _ = fit(ctx, 20_000)
    shared, _ = fit(_ctx(), 20_000)
    assert len(alone["messages"]) > len(shared["messages"])


def test_instructions_and_cause_always_go_in_even_over_budget() -> None:
    long = "Follow these rules. " * 1500  # ~30 KiB of instructions
    fitted, record = fit(_ctx(instructions=long), MIN_CONTEXT_TOKENS)
    assert record["over_budget"] is True
    assert fitted["messages"] == [] and record["left_out"]["messages"] == 40
    assert long.strip() in system_prompt(fitted) and "THE CAUSE" in user_text(fitted)


def test_the_roster_is_bounded() -> None:
    fitted, record = fit(_ctx(messages=1, size=100, agents=60), 60_000)
    prompt = system_prompt(fitted)
    named = [f"bolt.b{i:03d} (bolt)" for i in range(60)]
    assert all(a in prompt for a in named[:ROSTER_MAX]) and named[ROSTER_MAX] not in prompt
    assert f"and {60 - ROSTER_MAX} more agents" in prompt
    assert record["left_out"]["agents"] == 60 - ROSTER_MAX
    small, record = fit(_ctx(messages=1, size=100, agents=2), 60_000)
    assert "more agent" not in system_prompt(small) and "agents" not in record["left_out"]


def test_an_unfitted_context_still_renders() -> None:
    """A context stored before fitting existed (no ``left_out``) renders as it did."""
    ctx = _ctx(messages=2, size=100)
    assert "left out" not in user_text(ctx)
