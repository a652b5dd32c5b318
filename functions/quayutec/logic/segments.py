"""Index segments: the room's retrieval index as a few immutable, size-tiered segments that share
the room's BM25 statistics (design §8, "Ingest memory").

A *segment* holds some whole files' chunks, columnar (the chunks' text as one UTF-8 blob with
offsets; file, line, page and index as integer arrays) and their posting lists: a sorted
vocabulary and, per term, the chunks that hold it and how often (CSR: ``indptr``, ``docs``,
``tfs``), with each chunk's length in tokens. It holds *term frequencies*, not scores: scores
are computed at query time with the statistics of the whole room (the number of chunks, their
average length and each query term's document frequency, summed over the segments), so a
ranking over segments is the ranking of one BM25 index over every chunk of the room, whatever
the segmentation (Lucene's variant, ``k1`` = 1.5, ``b`` = 0.75: what ``bm25s`` computes).

The *manifest* (:class:`Manifest`) is the small object the index pointer names: the room's
segments, each with its chunk count and the file ids (and chunk counts) it holds. An ingest
writes one new segment of its file's chunks and merges a size tier when it overflows
(:func:`plan`): its memory is bounded by the file and by the largest merge
(:data:`MERGE_MAX_CHUNKS`), never by the room; a run reads the manifest and at most
:data:`MAX_SEGMENTS` segments, however many files the room holds.

Stored as ``numpy`` ``.npz`` (``allow_pickle=False``: arrays and a JSON header only, no
pickle). ``numpy`` is imported inside the functions, never at module import (cold starts).
"""

from __future__ import annotations

import io
import json
import math
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from quayutec.models import FileChunk

if TYPE_CHECKING:
    import numpy as np

#: The format of a segment object and of a manifest (an index object of format 1 is one bm25s
#: index over the whole room: read, converted at the next ingest).
SEGMENT_FORMAT = 2
#: BM25 parameters (Lucene's variant, bm25s's defaults: what the single index used).
K1 = 1.5
B = 0.75
#: Size tiers (chunks): tier 0 below :data:`TIER_BASE`, then ×4 per tier; a segment of at least
#: :data:`FINAL_CHUNKS` is never merged again (only rewritten to take a file out).
TIER_BASE = 128
TIER_FACTOR = 4
FINAL_CHUNKS = 8192
#: A tier that holds this many segments is merged into one.
TIER_SEGMENTS = 4
#: The largest merge's output: 4 segments just under :data:`FINAL_CHUNKS`. A merge's memory
#: (its inputs and output as arrays) is bounded by it, not by the room.
MERGE_MAX_CHUNKS = TIER_SEGMENTS * FINAL_CHUNKS
#: Tiers below final: [0, 128), [128, 512), [512, 2048), [2048, 8192).
MERGED_TIERS = 1 + round(math.log(FINAL_CHUNKS / TIER_BASE, TIER_FACTOR))


def max_segments(max_chunks: int) -> int:
    """The most segments a manifest can name in a room of at most ``max_chunks`` chunks: at most
    ``TIER_SEGMENTS - 1`` per merged tier, and final ones of at least :data:`FINAL_CHUNKS` each
    (plus one a file's own segment may add before its tier is merged)."""
    return (TIER_SEGMENTS - 1) * MERGED_TIERS + max_chunks // FINAL_CHUNKS + 1


#: At the default room cap (100,000 chunks): 12 + 12 + 1 = 25 segments at most.
MAX_SEGMENTS = max_segments(100_000)


def tier(chunks: int) -> int | None:
    """The size tier of a segment of ``chunks`` chunks; None: final (never merged)."""
    if chunks >= FINAL_CHUNKS:
        return None
    t = 0
    bound = TIER_BASE
    while chunks >= bound:
        t += 1
        bound *= TIER_FACTOR
    return t


# ----------------------------------------------------------------------------- segments
@dataclass
class Segment:
    """One segment in memory (arrays: numpy). ``files``: the file ids of its chunks
    (``file_idx`` indexes it), ``names`` their names."""

    room_id: str
    files: list[str]
    names: list[str]
    file_idx: np.ndarray  # int32 [n]
    index: np.ndarray  # int32 [n]: the chunk's index in its file
    line: np.ndarray  # int32 [n], -1: none
    page: np.ndarray  # int32 [n], -1: none
    text: np.ndarray  # uint8: the chunks' text, UTF-8, one after the other
    text_off: np.ndarray  # int64 [n + 1]
    doc_len: np.ndarray  # int32 [n]: tokens (at least 1)
    terms: list[str]  # sorted
    indptr: np.ndarray  # int64 [len(terms) + 1]
    docs: np.ndarray  # int32 [postings]
    tfs: np.ndarray  # uint16 [postings]
    _term_ids: dict[str, int] | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        return len(self.doc_len)

    def term_id(self, term: str) -> int | None:
        if self._term_ids is None:
            self._term_ids = {t: i for i, t in enumerate(self.terms)}
        return self._term_ids.get(term)

    def chunk(self, i: int) -> FileChunk:
        """Chunk ``i`` as the model a run reads (made on demand: a loaded segment holds text,
        not models)."""
        start, end = int(self.text_off[i]), int(self.text_off[i + 1])
        page, line = int(self.page[i]), int(self.line[i])
        f = int(self.file_idx[i])
        return FileChunk(
            room_id=self.room_id,
            name=self.names[f],
            index=int(self.index[i]),
            text=self.text[start:end].tobytes().decode(),
            file_id=self.files[f],
            line=None if line < 0 else line,
            page=None if page < 0 else page,
        )

    def chunks(self) -> list[FileChunk]:
        return [self.chunk(i) for i in range(self.n)]

    def file_chunks(self) -> dict[str, int]:
        """How many chunks each file id has here."""
        import numpy as np

        counts = np.bincount(self.file_idx, minlength=len(self.files))
        return {f: int(c) for f, c in zip(self.files, counts, strict=True) if c}

    @property
    def nbytes(self) -> int:
        """An estimate of the memory this segment holds (bytes): its arrays, vocabulary and file
        lists (counted for the warm cache's bound, design §8)."""
        arrays = (self.file_idx, self.index, self.line, self.page, self.text, self.text_off, self.doc_len)
        total = sum(int(a.nbytes) for a in (*arrays, self.indptr, self.docs, self.tfs))
        total += sum(len(t) + TERM_OVERHEAD_BYTES for t in self.terms)
        total += sum(len(f) + len(nm) + 2 * 60 for f, nm in zip(self.files, self.names, strict=True))
        return total


#: What a vocabulary entry costs beyond its characters: the str in the list and, once a query
#: looked it up, its dict entry.
TERM_OVERHEAD_BYTES = 160


def build(chunks: list[FileChunk], tokenize: Any) -> Segment:
    """The segment of ``chunks`` (whole files, in the order given): tokenized one chunk at a
    time into compact arrays (memory: the chunks' text and postings, no token lists kept)."""
    import numpy as np

    room = chunks[0].room_id if chunks else ""
    files: list[str] = []
    names: list[str] = []
    fidx: dict[str, int] = {}
    vocab: dict[str, int] = {}
    p_doc, p_term, p_tf = array("i"), array("i"), array("i")
    doc_len, file_idx, index, line, page = array("i"), array("i"), array("i"), array("i"), array("i")
    text = bytearray()
    text_off = array("q", [0])
    for d, c in enumerate(chunks):
        if c.file_id not in fidx:
            fidx[c.file_id] = len(files)
            files.append(c.file_id)
            names.append(c.name)
        file_idx.append(fidx[c.file_id])
        index.append(c.index)
        line.append(-1 if c.line is None else c.line)
        page.append(-1 if c.page is None else c.page)
        text += c.text.encode()
        text_off.append(len(text))
        tokens = tokenize(c.text) or [""]  # an empty chunk is one empty token, as bm25s indexes it
        doc_len.append(len(tokens))
        for term, tf in Counter(tokens).items():
            p_doc.append(d)
            p_term.append(vocab.setdefault(term, len(vocab)))
            p_tf.append(tf)
    terms = sorted(vocab)
    rank = np.empty(len(vocab), dtype=np.int64)  # first-seen id -> sorted id
    for new, t in enumerate(terms):
        rank[vocab[t]] = new
    del vocab
    term = rank[np.frombuffer(p_term, dtype=np.int32)] if p_term else np.zeros(0, dtype=np.int64)
    order = np.argsort(term, kind="stable")  # by term; docs stay ascending within a term
    counts = np.bincount(term, minlength=len(terms))
    return Segment(
        room_id=room,
        files=files,
        names=names,
        file_idx=np.array(file_idx, dtype=np.int32),
        index=np.array(index, dtype=np.int32),
        line=np.array(line, dtype=np.int32),
        page=np.array(page, dtype=np.int32),
        text=np.frombuffer(bytes(text), dtype=np.uint8),
        text_off=np.array(text_off, dtype=np.int64),
        doc_len=np.array(doc_len, dtype=np.int32),
        terms=terms,
        indptr=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
        docs=np.frombuffer(p_doc, dtype=np.int32)[order].astype(np.int32),
        tfs=np.minimum(np.frombuffer(p_tf, dtype=np.int32)[order], 65535).astype(np.uint16),
    )


def merge(segments: list[Segment], drop: frozenset[str] = frozenset()) -> Segment:
    """One segment of ``segments``' chunks in order, without the files in ``drop`` (a merge, or
    a rewrite that takes a file out): array work over their posting lists, never re-tokenized;
    memory: the inputs and the output."""
    import numpy as np

    files: list[str] = []
    names: list[str] = []
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("file_idx", "index", "line", "page", "doc_len")}
    texts: list[np.ndarray] = []
    offs: list[np.ndarray] = []
    vocab = sorted(set().union(*(s.terms for s in segments)))
    where = {t: i for i, t in enumerate(vocab)}
    p_term: list[np.ndarray] = []
    p_doc: list[np.ndarray] = []
    p_tf: list[np.ndarray] = []
    base_doc, base_text = 0, 0
    for s in segments:
        keep_file = np.array([f not in drop for f in s.files], dtype=bool)
        keep = keep_file[s.file_idx] if s.n else np.zeros(0, dtype=bool)
        kept = np.flatnonzero(keep)
        new_doc = np.full(s.n, -1, dtype=np.int32)
        new_doc[kept] = base_doc + np.arange(len(kept), dtype=np.int32)
        remap_file = np.full(len(s.files), -1, dtype=np.int32)
        for i, f in enumerate(s.files):
            if keep_file[i]:
                remap_file[i] = len(files)
                files.append(f)
                names.append(s.names[i])
        parts["file_idx"].append(remap_file[s.file_idx[kept]])
        for k in ("index", "line", "page", "doc_len"):
            parts[k].append(getattr(s, k)[kept])
        starts, ends = s.text_off[:-1][kept], s.text_off[1:][kept]
        if len(kept) == s.n:
            texts.append(s.text)
        else:
            texts.append(np.concatenate([s.text[a:b] for a, b in zip(starts, ends, strict=True)] or [s.text[:0]]))
        lens = ends - starts
        offs.append(base_text + np.cumsum(lens))
        base_text += int(lens.sum())
        base_doc += len(kept)
        term_map = np.array([where[t] for t in s.terms], dtype=np.int32)
        t = np.repeat(term_map, np.diff(s.indptr))
        d = new_doc[s.docs] if len(s.docs) else np.zeros(0, dtype=np.int32)
        if len(kept) == s.n:
            p_term.append(t)
            p_doc.append(d)
            p_tf.append(s.tfs)
        else:
            live = d >= 0
            p_term.append(t[live])
            p_doc.append(d[live])
            p_tf.append(s.tfs[live])
        del t, d, new_doc
    del where
    term = np.concatenate(p_term)
    p_term.clear()
    order = np.argsort(term, kind="stable")  # segments in order: docs ascending within a term
    counts = np.bincount(term, minlength=len(vocab))
    del term
    used = counts > 0  # a dropped file's only terms go
    cat = np.concatenate
    return Segment(
        room_id=segments[0].room_id if segments else "",
        files=files,
        names=names,
        file_idx=cat(parts["file_idx"]).astype(np.int32),
        index=cat(parts["index"]).astype(np.int32),
        line=cat(parts["line"]).astype(np.int32),
        page=cat(parts["page"]).astype(np.int32),
        text=cat(texts).astype(np.uint8),
        text_off=cat([np.zeros(1, dtype=np.int64), *offs]).astype(np.int64),
        doc_len=cat(parts["doc_len"]).astype(np.int32),
        terms=[t for t, u in zip(vocab, used, strict=True) if u],
        indptr=np.concatenate(([0], np.cumsum(counts[used]))).astype(np.int64),
        docs=cat(p_doc)[order],
        tfs=cat(p_tf)[order],
    )


_ARRAYS = ("file_idx", "index", "line", "page", "text", "text_off", "doc_len", "indptr", "docs", "tfs")


def dump(s: Segment) -> bytes:
    """The segment object: an ``.npz`` of its arrays and a JSON header (format, room, files,
    names, vocabulary)."""
    import numpy as np

    head = {"format": SEGMENT_FORMAT, "room": s.room_id, "files": s.files, "names": s.names, "terms": s.terms}
    out = io.BytesIO()
    np.savez_compressed(
        out, head=np.frombuffer(json.dumps(head).encode(), dtype=np.uint8), **{k: getattr(s, k) for k in _ARRAYS}
    )
    return out.getvalue()


def load(blob: bytes) -> Segment:
    """A :class:`Segment` from its object (no pickle). Raises ValueError for another format."""
    import numpy as np

    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        head = json.loads(z["head"].tobytes())
        if head.get("format") != SEGMENT_FORMAT:
            raise ValueError(f"segment format {head.get('format')!r} is not {SEGMENT_FORMAT}")
        arrays = {k: z[k] for k in _ARRAYS}
    return Segment(room_id=head["room"], files=head["files"], names=head["names"], terms=head["terms"], **arrays)


# ----------------------------------------------------------------------------- the manifest
@dataclass(frozen=True)
class SegmentRef:
    """A segment as the manifest names it: its object reference, its chunks, and the chunks of
    each file it holds."""

    ref: str
    chunks: int
    files: dict[str, int]


@dataclass(frozen=True)
class Manifest:
    """An index version: its segments (in ranking order: ties keep this order)."""

    segments: tuple[SegmentRef, ...] = ()

    @property
    def chunks(self) -> int:
        return sum(s.chunks for s in self.segments)

    def holding(self, file_id: str) -> SegmentRef | None:
        return next((s for s in self.segments if file_id in s.files), None)

    def dump(self) -> bytes:
        body = {
            "format": SEGMENT_FORMAT,
            "segments": [{"ref": s.ref, "chunks": s.chunks, "files": s.files} for s in self.segments],
        }
        return json.dumps(body).encode()


def is_manifest(blob: bytes) -> bool:
    """Whether an index object is a manifest (else a format-1 index: a gzipped tar)."""
    return blob[:1] == b"{"


def load_manifest(blob: bytes) -> Manifest:
    body = json.loads(blob)
    if body.get("format") != SEGMENT_FORMAT:
        raise ValueError(f"manifest format {body.get('format')!r} is not {SEGMENT_FORMAT}")
    return Manifest(
        tuple(
            SegmentRef(s["ref"], int(s["chunks"]), {k: int(v) for k, v in s["files"].items()}) for s in body["segments"]
        )
    )


def tier_overflow(entries: list[SegmentRef]) -> list[int] | None:
    """The positions of the lowest merged tier's segments when it holds :data:`TIER_SEGMENTS`
    or more (None: no tier overflows)."""
    by_tier: dict[int, list[int]] = {}
    for i, e in enumerate(entries):
        t = tier(e.chunks)
        if t is not None:
            by_tier.setdefault(t, []).append(i)
    full = sorted(t for t, at in by_tier.items() if len(at) >= TIER_SEGMENTS)
    return by_tier[full[0]] if full else None


@dataclass
class NextVersion:
    """What an ingest makes of the current manifest: the next ``manifest``, the segment objects it
    ``wrote`` (refs; those not in the manifest were merged meanwhile and were never visible), and
    the current segments it ``superseded`` (retired once the new version is committed)."""

    manifest: Manifest
    wrote: list[str]
    superseded: list[str]

    def unnamed(self) -> list[str]:
        """Objects this ingest wrote that its manifest does not name (merged into another)."""
        named = {s.ref for s in self.manifest.segments}
        return [r for r in self.wrote if r not in named]


def next_version(current: Manifest, adds: list[Segment], drop: str | None, read: Any, write: Any) -> NextVersion:
    """The next index version: ``drop``'s file out of the segment that holds it (rewritten
    without it, or left out when it held nothing else), each of ``adds`` as a new segment, then each tier
    holding :data:`TIER_SEGMENTS` segments merged into one, until none does (a merge's output
    is at most :data:`MERGE_MAX_CHUNKS` chunks). ``read(ref) -> Segment`` and
    ``write(Segment) -> ref`` do the I/O; at most the segments of one merge are in memory at
    once, besides ``adds``."""
    entries = list(current.segments)
    wrote: list[str] = []
    superseded: list[str] = []
    fresh: dict[str, Segment] = {}  # written here and small enough to merge: not read back

    def put(segment: Segment) -> SegmentRef:
        ref = write(segment)
        wrote.append(ref)
        if tier(segment.n) is not None:
            fresh[ref] = segment
        return SegmentRef(ref, segment.n, segment.file_chunks())

    def gone(e: SegmentRef) -> None:
        fresh.pop(e.ref, None)
        if e.ref not in wrote:
            superseded.append(e.ref)

    def merge_tiers() -> None:
        nonlocal entries
        while (group := tier_overflow(entries)) is not None:
            members = [entries[i] for i in group]
            merged = merge([fresh.get(e.ref) or read(e.ref) for e in members])
            for e in members:
                gone(e)
            out = put(merged)
            del merged
            entries = [out if i == group[0] else e for i, e in enumerate(entries) if i == group[0] or i not in group]

    if drop is not None:
        holder = current.holding(drop)
        if holder is not None:
            at = entries.index(holder)
            gone(holder)
            if set(holder.files) == {drop}:
                del entries[at]
            else:
                entries[at] = put(merge([read(holder.ref)], drop=frozenset({drop})))
            merge_tiers()
    for add in adds:
        if add.n:
            entries.append(put(add))
            merge_tiers()
    return NextVersion(Manifest(tuple(entries)), wrote, superseded)


# ----------------------------------------------------------------------------- scoring
def idf(df: np.ndarray, n: int) -> np.ndarray:
    """Lucene's BM25 idf: ``ln(1 + (N - df + 0.5) / (df + 0.5))``."""
    import numpy as np

    return np.log(1 + (n - df + 0.5) / (df + 0.5))


def scores(segments: list[Segment], query_terms: list[str]) -> list[np.ndarray]:
    """BM25 scores (float64) of every chunk of ``segments`` for ``query_terms`` (a term given
    twice counts twice, as in bm25s), with the statistics of all of them together: the number of
    chunks, their average length, each term's document frequency summed over the segments.
    One array per segment."""
    import numpy as np

    n = sum(s.n for s in segments)
    out = [np.zeros(s.n, dtype=np.float64) for s in segments]
    if not n:
        return out
    avgdl = sum(int(s.doc_len.sum(dtype=np.int64)) for s in segments) / n
    weights = Counter(query_terms)
    ids = {t: [s.term_id(t) for s in segments] for t in weights}
    for term, w in weights.items():
        spans = [
            (int(s.indptr[i]), int(s.indptr[i + 1])) if i is not None else (0, 0)
            for s, i in zip(segments, ids[term], strict=True)
        ]
        df = sum(b - a for a, b in spans)
        if not df:
            continue
        weight = w * float(idf(np.array([df], dtype=np.float64), n)[0])
        for s, (a, b), acc in zip(segments, spans, out, strict=True):
            if a == b:
                continue
            docs = s.docs[a:b]
            tf = s.tfs[a:b].astype(np.float64)
            dl = s.doc_len[docs].astype(np.float64)
            acc[docs] += weight * tf / (K1 * ((1 - B) + B * dl / avgdl) + tf)
    return out
