"""The room's index as size-tiered segments (design §8, "Ingest memory"): scores are BM25 over the
room whatever the segmentation (the same ranking as one ``bm25s`` index over every chunk), tiers
merge when they overflow and keep the segment count bounded, a merge or a rewrite keeps every
chunk but the dropped file's, and segment objects load without pickle."""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest

from quayutec.logic import retrieval
from quayutec.logic import segments as seg
from quayutec.models import FileChunk

pytestmark = pytest.mark.unit


def _corpus(seed: int, files: int, vocab: int = 400) -> list[list[FileChunk]]:
    """``files`` files of random lines (some empty chunks' worth of punctuation included)."""
    rnd = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    out = []
    for f in range(files):
        lines = []
        for _ in range(rnd.randint(1, 120)):
            lines.append(" ".join(rnd.choices(words, k=rnd.randint(0, 14))) if rnd.random() > 0.05 else "-- ..")
        text = "\n".join(lines) + "\n"
        out.append(retrieval.chunk_text("r", f"f{f}.txt", text, size=rnd.choice([60, 120, 300]), file_id=f"f{f}"))
    return out


def _bm25s_scores(chunks: list[FileChunk], query: str) -> np.ndarray:
    import bm25s

    r = bm25s.BM25(method="lucene", backend="numpy", csc_backend="numpy")
    r.index([retrieval.tokenize(c.text) or [""] for c in chunks], show_progress=False)
    ids = r.get_tokens_ids(retrieval.tokenize(query))
    return r.get_scores_from_ids(ids) if ids else np.zeros(len(chunks))


def _segmentations(files: list[list[FileChunk]], rnd: random.Random) -> list[list[seg.Segment]]:
    """The same files as one segment, one per file, and random groupings (some merged)."""
    per_file = [seg.load(seg.dump(retrieval.build_segment(cs))) for cs in files]
    ways = [[seg.merge(per_file)], per_file]
    for _ in range(3):
        cuts = sorted(rnd.sample(range(1, len(files)), k=min(3, len(files) - 1)))
        groups = [per_file[a:b] for a, b in zip([0, *cuts], [*cuts, len(files)], strict=True)]
        ways.append([seg.merge(g) if len(g) > 1 else g[0] for g in groups])
    return ways


@pytest.mark.parametrize("seed", range(6))
def test_a_segmented_index_ranks_as_one_bm25_index_over_the_whole_room(seed: int) -> None:
    """The property that makes scores "BM25 over the room": for any segmentation, every chunk's
    score is the one bm25s gives it in a single index over all chunks (the room's N, average
    length and document frequencies, not a segment's), so the top k are the same up to ties."""
    rnd = random.Random(seed)
    files = _corpus(seed, files=rnd.randint(2, 9))
    chunks = [c for cs in files for c in cs]
    vocab = sorted({t for c in chunks for t in retrieval.tokenize(c.text)})
    queries = [" ".join(rnd.choices(vocab, k=rnd.randint(1, 5))) for _ in range(8)] + ["w1 w1 w2", "nothing here"]
    for segments in _segmentations(files, rnd):
        index = retrieval.SegmentedIndex(segments)
        assert [c.text for c in index.chunks] == [c.text for c in chunks]
        for query in queries:
            want = _bm25s_scores(chunks, query)
            got = np.concatenate(seg.scores(segments, retrieval.tokenize(query)))
            assert np.allclose(got, want, rtol=1e-5, atol=1e-6), (query, float(np.abs(got - want).max()))
            k = 7
            top = index.top(query, k)
            by_text = {(c.file_id, c.index): i for i, c in enumerate(chunks)}
            ranked = [want[by_text[(c.file_id, c.index)]] for c in top]
            best = np.sort(want)[::-1][: len(ranked)]
            assert np.allclose(ranked, best, rtol=1e-5, atol=1e-6), query  # the same top k, up to ties
            if want.max() > 0:
                assert all(s > 0 for s in ranked)


def test_hidden_files_are_never_returned() -> None:
    files = _corpus(3, files=4)
    index = retrieval.SegmentedIndex([retrieval.build_segment(cs) for cs in files])
    q = " ".join(retrieval.tokenize(files[1][0].text)[:3]) or "w1"
    assert all(c.file_id != "f1" for c in index.top(q, 50, hidden=frozenset({"f1"})))
    assert any(c.file_id == "f1" for c in index.top(q, 50))


def test_a_merge_keeps_every_chunk_and_a_rewrite_drops_only_its_file() -> None:
    files = _corpus(11, files=5)
    segments = [retrieval.build_segment(cs) for cs in files]
    merged = seg.merge(segments)
    assert [c.model_dump() for c in merged.chunks()] == [c.model_dump() for cs in files for c in cs]
    assert merged.file_chunks() == {f"f{i}": len(cs) for i, cs in enumerate(files)}
    without = seg.merge([merged], drop=frozenset({"f2"}))
    assert [c.model_dump() for c in without.chunks()] == [
        c.model_dump() for cs in files for c in cs if c.file_id != "f2"
    ]
    # its postings are those of an index built from the remaining chunks
    rebuilt = retrieval.build_segment([c for cs in files for c in cs if c.file_id != "f2"])
    assert without.terms == rebuilt.terms
    for name in ("indptr", "docs", "tfs", "doc_len", "text_off", "text"):
        assert np.array_equal(getattr(without, name), getattr(rebuilt, name)), name


def test_a_segment_object_round_trips_without_pickle() -> None:
    [chunks] = _corpus(5, files=1)
    chunks[0] = chunks[0].model_copy(update={"page": 3})
    blob = seg.dump(retrieval.build_segment(chunks))
    assert blob[:2] == b"PK" and not seg.is_manifest(blob)  # a zip of .npy arrays
    assert [c.model_dump() for c in seg.load(blob).chunks()] == [c.model_dump() for c in chunks]
    with np.load(__import__("io").BytesIO(blob), allow_pickle=False) as z:
        assert all(z[k].dtype != object for k in z.files)


class _Store:
    """Segment objects in memory, counting what the plan reads and writes."""

    def __init__(self) -> None:
        self.objects: dict[str, seg.Segment] = {}
        self.reads: list[int] = []  # chunks of each segment read
        self.n = 0

    def read(self, ref: str) -> seg.Segment:
        self.reads.append(self.objects[ref].n)
        return self.objects[ref]

    def write(self, s: seg.Segment) -> str:
        self.n += 1
        self.objects[f"s{self.n}"] = s
        return f"s{self.n}"


def _file(i: int, lines: int) -> seg.Segment:
    text = "".join(f"line {j} of file {i} about cranes\n" for j in range(lines))
    return retrieval.build_segment(retrieval.chunk_text("r", f"f{i}.txt", text, size=40, file_id=f"f{i}"))


def test_tiers_merge_when_they_overflow_and_the_segment_count_stays_bounded() -> None:
    """80 small files one after the other: each ingest adds its own segment; a tier holding 4
    merges into one, so the manifest never names more than a few segments per tier, a merge never
    outputs more than MERGE_MAX_CHUNKS chunks, and every file is in exactly one segment."""
    store = _Store()
    manifest = seg.Manifest()
    rnd = random.Random(2)
    most = 0
    for i in range(80):
        nxt = seg.next_version(manifest, [_file(i, rnd.randint(1, 120))], None, store.read, store.write)
        assert set(nxt.superseded) <= {s.ref for s in manifest.segments}
        manifest = nxt.manifest
        most = max(most, len(manifest.segments))
        tiers = [seg.tier(s.chunks) for s in manifest.segments]
        assert all(tiers.count(t) < seg.TIER_SEGMENTS for t in set(tiers) if t is not None)
        held = [f for s in manifest.segments for f in s.files]
        assert sorted(held) == sorted(f"f{j}" for j in range(i + 1))
    assert most <= seg.MAX_SEGMENTS and len(manifest.segments) < 10
    assert max(store.reads) < seg.FINAL_CHUNKS and all(s.n <= seg.MERGE_MAX_CHUNKS for s in store.objects.values())
    # dropping a file rewrites only its segment
    victim = manifest.segments[0]
    f = next(iter(victim.files))
    store.reads.clear()
    nxt = seg.next_version(manifest, [], f, store.read, store.write)
    assert store.reads[0] == victim.chunks and victim.ref in nxt.superseded
    assert nxt.manifest.holding(f) is None and nxt.manifest.chunks == manifest.chunks - victim.files[f]


def test_a_large_file_is_a_final_segment_never_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seg, "FINAL_CHUNKS", 200)  # tiers [0, 128), [128, 200): final from 200
    store = _Store()
    manifest = seg.Manifest()
    for i in range(5):
        big = _file(i, 300)  # 300 chunks: final
        assert seg.tier(big.n) is None
        manifest = seg.next_version(manifest, [big], None, store.read, store.write).manifest
    assert store.reads == [] and len(manifest.segments) == 5  # an ingest never reads the room's big segments


def test_the_segment_size_estimate_does_not_fall_short_of_what_a_loaded_segment_holds() -> None:
    rnd = random.Random(7)
    words = [f"w{i}" for i in range(30000)]
    text = "\n".join(" ".join(rnd.choices(words, k=12)) for _ in range(20000))
    blob = seg.dump(retrieval.build_segment(retrieval.chunk_text("r", "a.txt", text)))
    tracemalloc.start()
    try:
        loaded = seg.load(blob)
        loaded.term_id("w1")  # a query builds the vocabulary's lookup
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert 0.9 * held <= retrieval.index_nbytes(loaded) <= 2 * held, (retrieval.index_nbytes(loaded), held)
