"""The context windows of the models we know (design §2.2: the context budget), beside the price
table (:mod:`quayutec.cost.prices`): an agent's ``max_context_tokens`` may not exceed its model's
window. Model id → (provider kind, window in tokens, source, date read). A window applies to its
own provider's API only, as a price does (an ``openai-compatible`` server's ``gpt-4.1`` is not
OpenAI's); a model not here is bounded only by :data:`quayutec.models.MAX_CONTEXT_TOKENS_LIMIT`.
Windows are those without opt-in betas (Sonnet 4.5's 1M window needs a beta header we do not
send). Models whose window was not confirmed on a page when this was written (the Claude 5 rows
but Fable 5.1 and Opus 5.5; gpt-5.2, gpt-5.4) are left out rather than guessed."""

from __future__ import annotations

import re

_ANTHROPIC = "platform.claude.com/docs/en/about-claude/models/overview"
_OPENAI = "platform.openai.com/docs/models/"
_BEDROCK = "docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-claude.html"
CONTEXT_WINDOWS: dict[str, tuple[str, int, str, str]] = {
    "claude-fable-5-1": ("anthropic", 1_000_000, _ANTHROPIC, "2026-12-02"),
    "claude-opus-5-5": ("anthropic", 1_000_000, _ANTHROPIC, "2026-12-02"),
    "claude-opus-4-5": ("anthropic", 200_000, _ANTHROPIC, "2026-12-02"),
    "claude-sonnet-4-5": ("anthropic", 200_000, _ANTHROPIC, "2026-12-02"),
    "claude-haiku-4-5": ("anthropic", 200_000, _ANTHROPIC, "2026-12-02"),
    "claude-opus-4-1": ("anthropic", 200_000, _ANTHROPIC, "2026-12-02"),
    "claude-sonnet-4-0": ("anthropic", 200_000, _ANTHROPIC, "2026-12-02"),
    "claude-3-5-haiku-latest": ("anthropic", 200_000, _ANTHROPIC, "2026-12-02"),
    "gpt-5": ("openai", 400_000, _OPENAI + "gpt-5", "2026-12-02"),
    "gpt-5-mini": ("openai", 400_000, _OPENAI + "gpt-5-mini", "2026-12-02"),
    "gpt-5-nano": ("openai", 400_000, _OPENAI + "gpt-5-nano", "2026-12-02"),
    "gpt-4.1": ("openai", 1_047_576, _OPENAI + "gpt-4.1", "2026-12-02"),
    "gpt-4.1-mini": ("openai", 1_047_576, _OPENAI + "gpt-4.1-mini", "2026-12-02"),
    "gpt-4.1-nano": ("openai", 1_047_576, _OPENAI + "gpt-4.1-nano", "2026-12-02"),
    "gpt-4o": ("openai", 128_000, _OPENAI + "gpt-4o", "2026-12-02"),
    "gpt-4o-mini": ("openai", 128_000, _OPENAI + "gpt-4o-mini", "2026-12-02"),
    "anthropic.claude-haiku-4-5-20251001-v1:0": ("bedrock", 200_000, _BEDROCK, "2026-12-02"),
    "anthropic.claude-sonnet-4-5-20250929-v1:0": ("bedrock", 200_000, _BEDROCK, "2026-12-02"),
}

_DATED = re.compile(r"^(claude-[a-z0-9-]+?)-\d{8}$")


def context_window(model: str, provider: str) -> int | None:
    """The model's context window in tokens on ``provider``'s API, ``None`` when not known here
    (a dated Claude id, ``claude-haiku-4-5-20251001``, is its alias's)."""
    known = CONTEXT_WINDOWS.get(model)
    if known is None and (dated := _DATED.match(model)):
        known = CONTEXT_WINDOWS.get(dated.group(1))
    return known[1] if known is not None and known[0] == provider else None
