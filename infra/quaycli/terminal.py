"""Untrusted text (messages, names, model output, provider error text) shown in a terminal
(design §5, issue 10 finding 7): control and escape characters are made visible, never sent raw.
``ESC ] 0 ; title BEL``, ``ESC [ 2 J`` or an OSC 52 clipboard write in a message would otherwise
retitle, clear or write to the reader's terminal and clipboard.

* C0 and C1 control characters (ESC, BEL, CR, NUL, CSI ``\\x9b`` ...) and DEL become ``\\x1b``-style
  escapes; a newline does too in a one-line field (it could fake a line of output);
* format characters (bidirectional overrides such as U+202E, zero-width characters) and line or
  paragraph separators become ``\\u202e``-style escapes;
* a backslash stays as it is: what is shown is for reading, not for parsing back.
"""

from __future__ import annotations

import unicodedata
from typing import Any

_SAFE = {"\t"}


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: Any, *, newlines: bool = False) -> str:
    """``text`` with its control, escape and format characters made visible; ``newlines``: keep
    ``\\n`` as a line break (multi-line blocks), else it is shown as ``\\x0a``."""
    s = "" if text is None else str(text)
    out = []
    for ch in s:
        if ch in _SAFE or (newlines and ch == "\n"):
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn") and ch != " ":
            out.append(_escape(ch))
        else:
            out.append(ch)
    return "".join(out)
