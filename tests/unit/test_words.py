"""One rule for counted words (issue 24, item 5): ``1 passage``, never ``1 passages``, in the
runtime's texts, the CLI's and the room page's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from quaycli.cli import _count, _room_head
from quayutec.logic.budgets import Limit
from quayutec.logic.wakes import chain_notice
from quayutec.words import count

pytestmark = pytest.mark.unit

APP_JS = Path(__file__).resolve().parents[2] / "functions/quayutec/api/static/app/app.js"


def test_count_takes_the_number() -> None:
    assert count(1, "passage") == "1 passage" and count(2, "passage") == "2 passages"
    assert count(0, "reply") == "0 replies" and count(1200, "token") == "1,200 tokens"
    assert count(1, "memory line") == "1 memory line" and count(3, "memory line") == "3 memory lines"
    assert count(2, "agent of the roster", "agents of the roster") == "2 agents of the roster"


def test_the_runtime_and_the_cli_say_1_run_and_1_token() -> None:
    assert "after 1 run;" in chain_notice("room-1", "chain-1", 1).text
    assert "after 2 runs;" in chain_notice("room-1", "chain-1", 2).text
    assert Limit("company", "day", "tokens", 1).describe("acme") == "acme's daily budget of 1 token"
    assert "at most 1 run a chain" in _room_head({"id": "r", "max_runs_per_chain": 1})[0]
    assert _count(1, "reply", "replies") == "1 reply"


def test_the_page_counts_with_its_plural() -> None:
    js = APP_JS.read_text()
    bare = re.findall(r'\+ "\s*(?:passages|tokens|runs|replies|requests|messages|files)\b', js)
    assert bare == [], "a count the page writes without plural(): " + ", ".join(bare)
    assert 'plural(f.chunks, "passage")' in js
