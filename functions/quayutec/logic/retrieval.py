"""Passages of the room's files relevant to a wake: BM25 (Okapi, ``rank_bm25``) over the
pre-chunked file text (SPEC §2.2). Chunking happens when a file enters the room."""

from __future__ import annotations

import re

from rank_bm25 import BM25Okapi

from quayutec.models import FileChunk

_TOKEN = re.compile(r"[A-Za-z0-9]+")
CHUNK_CHARS = 800


def tokenize(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def chunk_text(room_id: str, name: str, text: str, size: int = CHUNK_CHARS) -> list[FileChunk]:
    """Split a file into chunks of at most ``size`` characters, on paragraph/line breaks when
    possible."""
    chunks: list[str] = []
    current = ""
    for line in text.splitlines(keepends=True):
        while len(line) > size:
            if current:
                chunks.append(current)
                current = ""
            chunks.append(line[:size])
            line = line[size:]
        if len(current) + len(line) > size and current:
            chunks.append(current)
            current = ""
        current += line
    if current.strip():
        chunks.append(current)
    return [FileChunk(room_id=room_id, name=name, index=i, text=c) for i, c in enumerate(chunks)]


def top_passages(chunks: list[FileChunk], query: str, k: int) -> list[FileChunk]:
    """The ``k`` chunks ranked highest by BM25 for ``query`` (ties keep file order); chunks
    with no query term are left out unless there are fewer than ``k`` chunks in all."""
    if not chunks or k <= 0:
        return []
    corpus = [tokenize(c.text) or ["_"] for c in chunks]
    scores = BM25Okapi(corpus).get_scores(tokenize(query) or ["_"])
    ranked = sorted(range(len(chunks)), key=lambda i: (-scores[i], i))
    if len(chunks) <= k:
        return [chunks[i] for i in ranked]
    return [chunks[i] for i in ranked[:k] if scores[i] > 0] or [chunks[i] for i in ranked[:k]]
