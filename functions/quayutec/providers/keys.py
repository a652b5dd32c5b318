"""Provider keys as values (SPEC §5, issue 10 finding 2): what a key may look like, and every
form in which one could show up in text that leaves an adapter.

A key is printable text without whitespace or control characters, 8 to 512 bytes of UTF-8. It is
checked when it is stored (the API refuses it with 422) and again before a request is sent (a
stored key that is not valid fails the call at once, final, with no request on the wire: a key
holding ``\\n`` would otherwise make the HTTP client raise an error that quotes the header).
"""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus

MIN_KEY_BYTES = 8
MAX_KEY_BYTES = 512


def key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid provider key (never quoting it), or ``None``."""
    size = len(key.encode("utf-8", "surrogatepass"))
    if not MIN_KEY_BYTES <= size <= MAX_KEY_BYTES:
        return f"a key is {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes (this one is {size})"
    for i, ch in enumerate(key):
        if ch.isspace() or not ch.isprintable():
            return f"a key holds no whitespace or control characters (character {i + 1} is U+{ord(ch):04X})"
    return None


def encodings(secret: str) -> list[str]:
    """``secret`` as it may appear in text: raw, JSON-escaped (with and without ASCII escapes),
    Python-escaped, URL-encoded (``%20`` and ``+``), longest first."""
    forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
             secret.encode("unicode_escape").decode("ascii"), repr(secret)[1:-1],
             quote(secret, safe=""), quote_plus(secret, safe="")}
    forms.add(json.dumps(json.dumps(secret)[1:-1])[1:-1])  # escaped twice (a body quoted in JSON)
    stripped = secret.strip()
    if stripped and stripped != secret:
        forms.add(stripped)  # the part a client put into a header before it choked on the rest
    return sorted((f for f in forms if len(f) >= 4), key=len, reverse=True)
