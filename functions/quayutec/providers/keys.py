"""Provider keys as values (design §5, issue 10 finding 2): what a key may look like, and every
form in which one could show up in text that leaves an adapter.

A key is printable ASCII without whitespace (``0x21``-``0x7E``), 8 to 512 bytes. It is checked
when it is stored (the API refuses it with 422) and again before a request is sent (a stored key
that is not valid fails the call at once, final, with no request on the wire: a key holding
``\\n`` would otherwise make the HTTP client raise an error that quotes the header, and one
holding ``ü`` an ``UnicodeEncodeError`` that names the character and its position).
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, quote_plus

from .models import ModelReply, ProviderFailure, ToolCall

MIN_KEY_BYTES = 8
MAX_KEY_BYTES = 512

#: What replaces a key found in text.
REDACTED = "[redacted]"


def key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid provider key (never quoting it, nor any of its characters), or
    ``None``."""
    size = len(key.encode("utf-8", "surrogatepass"))
    if not MIN_KEY_BYTES <= size <= MAX_KEY_BYTES:
        return f"a key is {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes (this one is {size})"
    for i, ch in enumerate(key):
        if not "\x21" <= ch <= "\x7e":
            return f"a key is printable ASCII without whitespace or control characters (character {i + 1} is not)"
    return None


def _base64_cores(data: bytes) -> set[str]:
    """The base64 text that ``data`` yields wherever it sits in a longer byte string: for each of
    the three alignments, the characters that depend on ``data`` alone (so ``Bearer <key>``
    encoded whole still shows the key's core), standard and URL-safe alphabets."""
    cores = set()
    for offset in range(3):
        text = base64.b64encode(b"\0" * offset + data).decode("ascii").rstrip("=")
        start = -(-8 * offset // 6)  # characters that hold bits of the prefix
        end = len(text) - (1 if (offset + len(data)) % 3 else 0)  # the last one holds padding bits
        core = text[start:end]
        cores.update({core, core.replace("+", "-").replace("/", "_")})
    return cores


def encodings(secret: str) -> list[str]:
    """``secret`` as it may appear in text: raw, JSON-escaped (with and without ASCII escapes,
    once and twice), Python-escaped, URL-encoded (``%20`` and ``+``), HTML-escaped (named and
    numeric entities), hex and base64 (standard and URL-safe, at any alignment), longest first.
    Matching is case-insensitive (see :func:`scrubber`), which covers upper- and lower-case
    variants and hex in either case."""
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        secret.encode("unicode_escape").decode("ascii"),
        repr(secret)[1:-1],
        quote(secret, safe=""),
        quote_plus(secret, safe=""),
        quote(secret),
        html.escape(secret),
        html.escape(secret, quote=False),
        "".join(f"&#{ord(c)};" for c in secret),
        "".join(f"&#x{ord(c):x};" for c in secret),
    }
    forms.add(json.dumps(json.dumps(secret)[1:-1])[1:-1])  # escaped twice (a body quoted in JSON)
    stripped = secret.strip()
    if stripped and stripped != secret:
        forms.add(stripped)  # the part a client put into a header before it choked on the rest
    data = secret.encode("utf-8", "surrogatepass")
    forms.add(binascii.hexlify(data).decode("ascii"))
    forms |= _base64_cores(data)
    return sorted((f for f in forms if len(f) >= 4), key=len, reverse=True)


def scrubber(secret: str) -> Callable[[str], str]:
    """A function that replaces every form of ``secret`` (:func:`encodings`, any letter case) in a
    text by ``[redacted]``. Built once per reply; a secret shorter than 4 characters is not
    searched for (it would match ordinary text)."""
    if not secret or len(secret) < 4:
        return lambda text: text
    pattern = re.compile("|".join(re.escape(f) for f in encodings(secret)), re.IGNORECASE)

    def scrub(text: str) -> str:
        return pattern.sub(REDACTED, text) if text else text

    return scrub


def scrub_value(value: Any, scrub: Callable[[str], str]) -> Any:
    """``value`` (JSON-like: dicts, lists, strings, numbers) with every string in it scrubbed,
    dictionary keys included."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub_value(k, scrub): scrub_value(v, scrub) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_value(v, scrub) for v in value]
    return value


def scrub(text: str | None, secret: str) -> str:
    """``text`` with every occurrence of ``secret`` replaced, in every encoding it may take
    (raw, JSON-escaped, URL-encoded, HTML-escaped, hex, base64, any letter case:
    :func:`quayutec.providers.keys.encodings`), so a key never leaves an adapter. A second line of
    defence: no exception text that may echo request headers is used in the first place."""
    if not text:
        return text or ""
    return scrubber(secret)(text)


# --------------------------------------------------------------------------- scrubbing answers
#: A UTF-16 surrogate code point: in a Python string only when a JSON text escaped one alone
#: (``"\\ud800"``), which no UTF-8 store, the room or the ledger, can hold.
_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_reply(reply: ModelReply, secret: str) -> ModelReply:
    """``reply`` with every form of ``secret`` removed from its text, every string of its tool
    calls (name, id, arguments: keys and values, and the raw arguments) and its request id and
    stop reason. A model server the owner runs sees the key (it is sent the ``Authorization``
    header) and can echo it anywhere in its answer, which the run would post in the room and
    keep in the ledger (design §5). In the same strings, a lone surrogate becomes U+FFFD (the
    replacement character): stored as sent, it failed every write of the run (design §4: model
    output never crashes a run)."""
    scrub = scrubber(secret)

    def clean(text: str) -> str:
        return _SURROGATE.sub("\ufffd", scrub(text))

    return reply.model_copy(
        update={
            "text": clean(reply.text),
            "tool_calls": [
                ToolCall(
                    id=clean(c.id) if c.id else c.id,
                    name=clean(c.name),
                    input=scrub_value(c.input, clean) if c.input is not None else None,
                    raw_input=clean(c.raw_input),
                )
                for c in reply.tool_calls
            ],
            "request_id": clean(reply.request_id) if reply.request_id else reply.request_id,
            "stop_reason": clean(reply.stop_reason) if reply.stop_reason else reply.stop_reason,
        }
    )


def scrub_failure(failure: ProviderFailure, secret: str) -> ProviderFailure:
    """``failure`` with every form of ``secret`` removed from its text fields (the adapters build
    failures scrubbed already: this is the same rule applied where the failure is stored)."""
    clean = scrubber(secret)
    return failure.model_copy(
        update={
            name: clean(value)
            for name in ("error_type", "error_code", "message", "request_id", "body", "retry_after_header")
            if isinstance(value := getattr(failure, name), str)
        }
    )
