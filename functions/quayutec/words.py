"""Counted words, one rule for every text the runtime, the CLI and the room page write: ``1
passage``, ``2 passages``, ``1,000 tokens``. The room page's script has the same rule (its
``plural``, functions/quayutec/api/static/app/app.js). Pure: importing this touches no AWS API."""

from __future__ import annotations

#: Plurals that are not the word and an ``s``.
IRREGULAR = {"reply": "replies", "company": "companies", "entry": "entries", "summary": "summaries"}


def plural(word: str) -> str:
    """``passage`` -> ``passages``, ``reply`` -> ``replies`` (the last word of a phrase: ``memory
    line`` -> ``memory lines``)."""
    head, _, last = word.rpartition(" ")
    many = IRREGULAR.get(last, last + "s")
    return f"{head} {many}" if head else many


def count(n: int, one: str, many: str | None = None) -> str:
    """``n`` and the word in the number it takes, ``n`` with thousands separators: ``count(1,
    "passage")`` is ``1 passage``, ``count(1200, "token")`` is ``1,200 tokens``; ``many``: the
    plural when :func:`plural` does not make it (``count(2, "agent of the roster", "agents of the
    roster")``)."""
    return f"{n:,} {one if n == 1 else (many or plural(one))}"
