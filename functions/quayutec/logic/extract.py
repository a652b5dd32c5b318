"""Text of an uploaded room file (design §8): plain text, Markdown, CSV and JSON as text, HTML
through a parser (the standard library's ``html.parser``: text nodes, not regexes; script and
style dropped), PDF through ``pypdf`` with bounds on pages and time.

:func:`extract` returns ``[(page or None, text)]`` or raises :class:`Unreadable` with the reason
the file's status shows (``encrypted PDF``, ``unreadable: ...``, ``no text``).
"""

from __future__ import annotations

import io
import json
import time
from html.parser import HTMLParser

KINDS = ("text", "markdown", "csv", "json", "html", "pdf")
_BY_SUFFIX = {
    ".txt": "text",
    ".text": "text",
    ".log": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".csv": "csv",
    ".json": "json",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
_BY_TYPE = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/csv": "csv",
    "application/json": "json",
    "text/html": "html",
    "application/pdf": "pdf",
}

#: PDF bounds: pages read, and seconds spent extracting (the ingest function's timeout is 300 s).
PDF_MAX_PAGES = 2000
PDF_MAX_SECONDS = 120.0


class Unreadable(Exception):
    """The file cannot be ingested; ``str(exc)`` is the reason recorded on it."""


def kind_of(name: str, content_type: str) -> str | None:
    """The file's kind from its declared content type, else its name; None: not accepted."""
    base = content_type.split(";", 1)[0].strip().lower()
    if base in _BY_TYPE:
        return _BY_TYPE[base]
    dot = name.rfind(".")
    return _BY_SUFFIX.get(name[dot:].lower()) if dot >= 0 else None


def extract(kind: str, data: bytes) -> list[tuple[int | None, str]]:
    """The text of a file of ``kind`` (:data:`KINDS`). Raises :class:`Unreadable`, and only that:
    whatever else a hostile file makes a parser raise (nesting past the recursion limit, a pypdf
    limit such as a decompression bomb's ``LimitReachedError``) fails the file with its reason,
    never the ingest (which would redeliver it to the dead-letter queue and leave it
    ``uploading`` for good, design §8)."""
    parts: list[tuple[int | None, str]]
    try:
        parts = _pdf(data) if kind == "pdf" else [(None, _text(kind, data))]
    except Unreadable:
        raise
    except Exception as exc:
        raise Unreadable(f"unreadable: {type(exc).__name__}: {exc}"[:300]) from exc
    if not any(t.strip() for _, t in parts):
        raise Unreadable("no text")
    return parts


def _text(kind: str, data: bytes) -> str:
    text = _decode(data)
    if kind == "html":
        return _html(text)
    if kind == "json":
        try:
            json.loads(text)
        except RecursionError as exc:
            raise Unreadable("unreadable: not valid JSON (nested too deep)") from exc
        except ValueError as exc:
            raise Unreadable(f"unreadable: not valid JSON ({exc})") from exc
    return text


def _decode(data: bytes) -> str:
    for encoding in ("utf-8-sig", "utf-16"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if "\x00" not in text:
            return text
    raise Unreadable("unreadable: not UTF-8 text")


class _Text(HTMLParser):
    _SKIP = frozenset({"script", "style", "noscript", "template"})
    _BLOCK = frozenset(
        {
            "p",
            "div",
            "br",
            "li",
            "tr",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "section",
            "article",
            "table",
            "ul",
            "ol",
            "pre",
            "blockquote",
            "title",
        }
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in self._SKIP:
            self._skipping += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skipping:
            self._skipping -= 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def _html(text: str) -> str:
    parser = _Text()
    parser.feed(text)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)


def _pdf(data: bytes) -> list[tuple[int | None, str]]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:  # an owner password only (empty user password) still opens
                opened = reader.decrypt("")
            except (DependencyError, NotImplementedError) as exc:
                raise Unreadable(f"encrypted PDF ({exc})") from exc
            if not opened:
                raise Unreadable("encrypted PDF")
        out: list[tuple[int | None, str]] = []
        started = time.monotonic()
        for n, page in enumerate(reader.pages, start=1):
            if n > PDF_MAX_PAGES or time.monotonic() - started > PDF_MAX_SECONDS:
                break  # bounded: the pages read so far are the file's text
            out.append((n, page.extract_text() or ""))
        return out
    except Unreadable:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise Unreadable(f"unreadable: {type(exc).__name__}: {exc}"[:300]) from exc
