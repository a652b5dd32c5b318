"""Passages of the room's files relevant to a wake (design §2.2, §8).

The room's retrieval index is built when a file is ingested, never at a run: a few immutable,
size-tiered segments (:mod:`quayutec.logic.segments`: each some whole files' chunks and their
posting lists), named by a small manifest object that a conditional version pointer in the room
table names (:mod:`quayutec.dal.files`). A run reads the pointer, the manifest and the segments
this warm Lambda does not hold yet: at most :data:`quayutec.logic.segments.MAX_SEGMENTS` objects
however many and however large the room's files are, and every chunk of every ready file can be
found. Scores are BM25 over the whole room (Lucene's variant): the segments hold term
frequencies, and the room's statistics are summed over them at query time.

BM25: our own numpy scoring over the posting lists (:func:`quayutec.logic.segments.scores`),
the formula and parameters of ``bm25s``'s Lucene variant (k1 = 1.5, b = 0.75), which built the
single index before: ``bm25s`` precomputes a score matrix with one index's statistics, so it
cannot score segments with the room's; a test holds the two rankings equal on random corpora.
``bm25s`` is still read for an index version of format 1 (one ``bm25s`` index over the whole
room, before segments): runs read it, the next ingest converts it.

Only the phases that build or rank (ingest, ClaimAndRead) import ``numpy`` and ``bm25s``, inside
the functions below, never at module import.
"""

from __future__ import annotations

import io
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quayutec.logic import segments as seg
from quayutec.models import FileChunk

if TYPE_CHECKING:  # tarfile and tempfile only where an index is built or read
    import tarfile

_TOKEN = re.compile(r"[A-Za-z0-9]+")
CHUNK_CHARS = 800
INDEX_FORMAT = 1
_CHUNKS_MEMBER = "chunks.json"
#: Index files bm25s writes (``BM25.save``), the only members an index object may hold.
_BM25_MEMBERS = frozenset(
    {"data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy", "vocab.index.json", "params.index.json"}
)


def tokenize(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


#: One line and its ``\n`` (the last line may have none).
_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def chunk_text(
    room_id: str,
    name: str,
    text: str,
    size: int = CHUNK_CHARS,
    *,
    file_id: str = "",
    page: int | None = None,
    start_index: int = 0,
) -> list[FileChunk]:
    """Split a file's text into chunks of at most ``size`` characters, on line breaks when
    possible; each chunk knows the first line it covers (1-based) and its ``page`` if given.

    Lines end at ``\n``, ``\r\n`` or ``\r`` and are read one at a time, and a line longer than
    ``size`` is cut by offsets: a 25 MB file of 12 million short lines no longer became 12
    million strings at once (~0.9 GB, the ingest function has 1 GB), nor a 25 MB single line 20,000
    ever shorter copies of itself (33 s)."""
    chunks: list[tuple[int, str]] = []
    current, current_line = "", 1
    lines = (m.group() for m in _LINE.finditer(text.replace("\r\n", "\n").replace("\r", "\n")))
    for lineno, line in enumerate(lines, start=1):
        if len(line) > size:
            if current.strip():
                chunks.append((current_line, current))
            current = ""
            cut = len(line) - (len(line) % size or size)  # whole pieces; the last one (<= size) goes on
            chunks.extend((lineno, line[i : i + size]) for i in range(0, cut, size))
            line = line[cut:]
        if len(current) + len(line) > size and current:
            if current.strip():
                chunks.append((current_line, current))
            current = ""
        if not current:
            current_line = lineno
        current += line
    if current.strip():
        chunks.append((current_line, current))
    return [
        FileChunk(room_id=room_id, name=name, index=start_index + i, text=c, file_id=file_id, line=ln, page=page)
        for i, (ln, c) in enumerate(chunks)
    ]


# ----------------------------------------------------------------------------- the index
@dataclass
class RoomIndex:
    """A loaded index version: the chunks and the BM25 retriever over them (None: no chunk)."""

    chunks: list[FileChunk]
    retriever: Any = None

    def top(self, query: str, k: int, hidden: frozenset[str] = frozenset()) -> list[FileChunk]:
        """The ``k`` chunks ranked highest by BM25 for ``query`` (ties keep index order); chunks
        with no query term are left out unless there are at most ``k`` chunks in all. Chunks of
        the ``hidden`` file ids (deleted, not yet taken out of this version) are never returned."""
        chunks = self.chunks
        if hidden:
            keep = [i for i, c in enumerate(chunks) if c.file_id not in hidden]
            if len(keep) == len(chunks):
                hidden = frozenset()
        if not chunks or k <= 0:
            return []
        if self.retriever is None:
            return [c for c in chunks if c.file_id not in hidden][:k]
        import numpy as np

        ids = self.retriever.get_tokens_ids(tokenize(query))
        scores = self.retriever.get_scores_from_ids(ids) if ids else np.zeros(len(chunks), dtype="float32")
        order = np.lexsort((np.arange(len(chunks)), -scores))  # score desc, then index
        if hidden:
            kept = np.zeros(len(chunks), dtype=bool)
            kept[keep] = True
            order = order[kept[order]]
        if len(order) <= k:
            return [chunks[int(i)] for i in order]
        top = [int(i) for i in order[:k]]
        return [chunks[i] for i in top if scores[i] > 0] or [chunks[i] for i in top]


@dataclass
class SegmentedIndex:
    """A loaded index version of segments (in the manifest's order): BM25 over all of them with
    the room's statistics (:func:`quayutec.logic.segments.scores`)."""

    segments: list[seg.Segment]

    @property
    def chunks(self) -> list[FileChunk]:
        """Every chunk, in ranking order (made on demand: tests and tools)."""
        return [c for s in self.segments for c in s.chunks()]

    def top(self, query: str, k: int, hidden: frozenset[str] = frozenset()) -> list[FileChunk]:
        """As :meth:`RoomIndex.top`: the ``k`` chunks ranked highest (ties keep the manifest's
        order), none of the ``hidden`` file ids; chunks with no query term left out unless
        there are at most ``k`` chunks in all."""
        import numpy as np

        segs = [s for s in self.segments if s.n]
        if not segs or k <= 0:
            return []
        scores = np.concatenate(seg.scores(segs, tokenize(query)))
        where = np.concatenate([np.full(s.n, i, dtype=np.int32) for i, s in enumerate(segs)])
        local = np.concatenate([np.arange(s.n, dtype=np.int64) for s in segs])
        order = np.lexsort((np.arange(len(scores)), -scores))  # score desc, then order
        if hidden:
            shown = np.concatenate([np.array([f not in hidden for f in s.files], dtype=bool)[s.file_idx] for s in segs])
            order = order[shown[order]]
        if len(order) > k:
            top = order[:k]
            hits = top[scores[top] > 0]
            order = hits if len(hits) else top
        return [segs[int(where[i])].chunk(int(local[i])) for i in order]


def build_index(chunks: list[FileChunk]) -> bytes:
    """The index object of ``chunks`` (in the order given): a gzipped tar of the chunks (JSON)
    and bm25s's saved index (``.npy`` arrays and JSON)."""
    import tarfile
    import tempfile

    import bm25s

    out = io.BytesIO()
    with tempfile.TemporaryDirectory(prefix="quay-index-") as tmp, tarfile.open(fileobj=out, mode="w:gz") as tar:
        meta = {"format": INDEX_FORMAT, "chunks": [c.model_dump(mode="json") for c in chunks]}
        _add(tar, _CHUNKS_MEMBER, json.dumps(meta).encode())
        if chunks:
            retriever = bm25s.BM25(method="lucene", backend="numpy", csc_backend="numpy")
            retriever.index([tokenize(c.text) or [""] for c in chunks], show_progress=False)
            retriever.save(tmp)
            for path in sorted(Path(tmp).iterdir()):
                if path.name in _BM25_MEMBERS:
                    _add(tar, path.name, path.read_bytes())
    return out.getvalue()


def chunks_of(blob: bytes) -> list[FileChunk]:
    """The chunks of an index object (ingest merges them into the next version)."""
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        return _chunks(tar)


def load_index(blob: bytes) -> RoomIndex:
    """A :class:`RoomIndex` from an index object (no pickle: ``allow_pickle=False``)."""
    import tarfile
    import tempfile

    import bm25s

    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        chunks = _chunks(tar)
        if not chunks:
            return RoomIndex(chunks=[])
        with tempfile.TemporaryDirectory(prefix="quay-index-") as tmp:
            for member in tar.getmembers():
                if member.isfile() and member.name in _BM25_MEMBERS:  # plain names only
                    data = tar.extractfile(member)
                    assert data is not None
                    (Path(tmp) / member.name).write_bytes(data.read())
            retriever = bm25s.BM25.load(tmp, load_corpus=False, mmap=False, allow_pickle=False)
    return RoomIndex(chunks=chunks, retriever=retriever)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    import tarfile

    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _chunks(tar: tarfile.TarFile) -> list[FileChunk]:
    member = tar.extractfile(_CHUNKS_MEMBER)
    if member is None:
        raise ValueError("index object without its chunks")
    meta = json.loads(member.read())
    if meta.get("format") != INDEX_FORMAT:
        raise ValueError(f"index format {meta.get('format')!r} is not {INDEX_FORMAT}")
    return [FileChunk.model_validate(c) for c in meta["chunks"]]


# ----------------------------------------------------------------------------- warm cache
#: The bytes of loaded indexes a warm ClaimAndRead keeps (design §8): a quarter of its 512 MB, so
#: a cache hit never costs the memory a run needs. A count (8 before) had no bound: 8 big rooms'
#: indexes are GBs.
INDEX_CACHE_BYTES = 128 * 2**20
#: What a chunk costs in memory beyond its text (its pydantic model and fields, its JSON on the
#: way in): fitted so the estimate does not fall short of tracemalloc's count of a loaded index
#: on CPython 3.11 (within 10% for varied text, over it for repetitive text: a safe bound;
#: tests/files/test_files_scale.py).
CHUNK_OVERHEAD_BYTES = 2560
#: A vocabulary entry of the BM25 index (a str key and an int in a dict).
TERM_OVERHEAD_BYTES = 120


def index_nbytes(index: Any) -> int:
    """An estimate of the memory ``index`` holds (bytes): a segment's arrays and vocabulary
    (:attr:`quayutec.logic.segments.Segment.nbytes`); a format-1 index's chunks' text and
    models, its BM25 score matrix's arrays and vocabulary. Counted once, at load."""
    if isinstance(index, seg.Segment):
        return index.nbytes
    if isinstance(index, SegmentedIndex):
        return sum(s.nbytes for s in index.segments)
    if isinstance(index, seg.Manifest):
        return 200 * (1 + len(index.segments)) + sum(40 * len(s.files) for s in index.segments)
    total = sum(len(c.text) + len(c.name) + CHUNK_OVERHEAD_BYTES for c in index.chunks)
    r = index.retriever
    if r is not None:
        for arr in (getattr(r, "scores", None) or {}).values():
            total += int(getattr(arr, "nbytes", 0))
        total += TERM_OVERHEAD_BYTES * len(getattr(r, "vocab_dict", None) or {})
    return total


class IndexCache:
    """Loaded index objects of this (warm) Lambda (manifests, segments, format-1 indexes), by
    ``(room, object reference)``, least recently used first out, bounded in bytes
    (:func:`index_nbytes`, at most ``max_bytes``); an object larger than the bound alone is used
    by its run and not kept. Objects are immutable, so a hit never needs a read, and a segment
    that a newer version still names stays a hit."""

    def __init__(self, max_bytes: int = INDEX_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str], tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """The bytes the cached indexes hold (estimated)."""
        return self._bytes

    def get(self, room_id: str, key: str) -> Any:
        with self._lock:
            hit = self._items.get((room_id, key))
            if hit is not None:
                self._items.move_to_end((room_id, key))
                return hit[0]
            return None

    def put(self, room_id: str, key: str, index: Any, nbytes: int | None = None) -> bool:
        """Keep ``index`` (``nbytes``: its size, :func:`index_nbytes` when None), dropping the
        least recently used ones past the bound; False when it alone is over the bound."""
        size = index_nbytes(index) if nbytes is None else nbytes
        with self._lock:
            old = self._items.pop((room_id, key), None)
            if old is not None:
                self._bytes -= old[1]
            if size > self.max_bytes:
                return False
            self._items[(room_id, key)] = (index, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped
            return True

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0


CACHE = IndexCache()


def top_passages(chunks: list[FileChunk], query: str, k: int) -> list[FileChunk]:
    """Rank ``chunks`` for ``query`` directly (tests and tools; runs read the stored index)."""
    return SegmentedIndex([seg.load(seg.dump(seg.build(chunks, tokenize)))]).top(query, k)


def build_segment(chunks: list[FileChunk]) -> seg.Segment:
    """The segment of ``chunks`` (whole files), tokenized as retrieval tokenizes."""
    return seg.build(chunks, tokenize)
