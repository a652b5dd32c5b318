"""Room files at scale (design §8): ClaimAndRead's warm index cache is bounded in bytes, not in
a count of indexes (8 big rooms' indexes were GBs against the function's 512 MB); the index as
segments: a tier merge retires what it superseded, a lost write leaves nothing, a warm run reads
only new segments, a format-1 index is converted, and ingest memory is flat in the room."""

from __future__ import annotations

import random
import threading
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from quaylocal.stack import LocalStack
from quayutec import deps as quay_deps
from quayutec import resources as R
from quayutec import seams
from quayutec.dal.files import FileStore, index_ref, split_index_ref
from quayutec.logic import files as rf
from quayutec.logic import retrieval
from quayutec.logic import segments as seg


def _index(n_lines: int, seed: int) -> retrieval.RoomIndex:
    rnd = random.Random(seed)
    words = [f"w{i}" for i in range(20000)]
    text = "\n".join(" ".join(rnd.choices(words, k=12)) for _ in range(n_lines))
    return retrieval.load_index(retrieval.build_index(retrieval.chunk_text("r", "a.txt", text)))


@pytest.mark.parametrize("kind", ["repetitive", "varied"])
def test_the_size_estimate_does_not_fall_short_of_what_a_loaded_index_holds(kind: str) -> None:
    if kind == "repetitive":
        text = "harbour quay crane log\n" * 40000
    else:
        rnd = random.Random(7)
        words = [f"w{i}" for i in range(30000)]
        text = "\n".join(" ".join(rnd.choices(words, k=12)) for _ in range(20000))
    blob = retrieval.build_index(retrieval.chunk_text("r", "a.txt", text))
    tracemalloc.start()
    try:
        index = retrieval.load_index(blob)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert 0.9 * held <= retrieval.index_nbytes(index) <= 2 * held, (retrieval.index_nbytes(index), held)


@pytest.mark.unit
def test_the_index_cache_is_bounded_in_bytes() -> None:
    small = [_index(500, seed) for seed in range(12)]
    size = retrieval.index_nbytes(small[0])
    cache = retrieval.IndexCache(max_bytes=int(size * 3.5))
    for i, index in enumerate(small):  # 12 indexes: before, the first 8 stayed whatever their size
        assert cache.put("room", f"k{i}", index)
        assert cache.nbytes <= cache.max_bytes
    assert [cache.get("room", f"k{i}") is not None for i in range(12)] == [False] * 9 + [True] * 3
    assert cache.get("room", "k9") is small[9]  # most recently used: kept when the next one comes
    assert cache.put("room", "k12", small[0])
    assert cache.get("room", "k10") is None and cache.get("room", "k9") is not None
    big = _index(4000, 99)
    assert not cache.put("room", "big", big)  # over the bound alone: used by its run, not kept
    assert cache.get("room", "big") is None and cache.nbytes <= cache.max_bytes
    assert retrieval.CACHE.max_bytes == retrieval.INDEX_CACHE_BYTES == 128 * 2**20


# ----------------------------------------------------------------------------- on the local stack
def _add(d: Any, room: str, file_id: str, text: str) -> int:
    chunks = retrieval.chunk_text(room, f"{file_id}.txt", text, size=40, file_id=file_id)
    return rf.update_index(d, room, add=chunks, remove=file_id, limit=10**6)


def _current_objects(stack: LocalStack, room: str) -> set[str]:
    """The room's index keys that are current (not hidden by a delete marker)."""
    got = stack.client("s3").list_object_versions(Bucket=stack.files_bucket, Prefix=f"{R.INDEX_PREFIX}{room}/")
    return {v["Key"] for v in got.get("Versions", []) if v["IsLatest"]}


def _named(d: Any, room: str) -> set[str]:
    ref = d.files.index_pointer(room)[1]
    return {split_index_ref(r)[0] for r in rf.version_objects(d.files, ref)} if ref else set()


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(time_scale=0.01) as s:
        s.client("s3").put_bucket_notification_configuration(Bucket=s.files_bucket, NotificationConfiguration={})
        yield s


def test_a_tier_merge_retires_what_it_superseded_and_a_lost_write_leaves_nothing(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four small files fill tier 0; the fourth ingest merges them into one segment. Its first
    attempt loses the pointer to another ingest: every object it wrote (its segment, the merge,
    its manifest) is deleted. The attempt that wins retires the old manifest and the merged
    segments (a delete marker each: a run holding the old pointer still reads them by version)."""
    d = quay_deps.default_deps()
    room = "r-merge"
    for i in range(3):
        _add(d, room, f"f{i}", f"crane {i} lifts at dawn\n")
    assert len(seg.load_manifest(d.files.get_index(d.files.index_pointer(room)[1])).segments) == 3
    old_ref = d.files.index_pointer(room)[1]
    assert old_ref is not None
    real_put = FileStore.put_index
    raced: list[str] = []

    def put_then_race(self: FileStore, key: str, blob: bytes) -> Any:
        written = real_put(self, key, blob)
        if not raced:  # another ingest moves the pointer between this one's read and its commit
            raced.append(key)
            _add(d, room, "other", "a ferry at noon\n")
        return written

    monkeypatch.setattr(FileStore, "put_index", put_then_race)
    assert _add(d, room, "f3", "crane three lifts at dusk\n") == 5
    monkeypatch.undo()
    manifest = seg.load_manifest(d.files.get_index(d.files.index_pointer(room)[1]))
    # "other" made tier 0 hold 4: merged; then f3 alone
    assert [sorted(s.files) for s in manifest.segments] == [["f0", "f1", "f2", "other"], ["f3"]]
    assert _current_objects(stack, room) == _named(d, room), "lost or superseded objects left current"
    assert {c.file_id for c in rf.version_chunks(d.files, old_ref)} == {"f0", "f1", "f2"}  # a run holding it
    top = rf.passages(d, room, "crane dusk", 2)[1]
    assert top[0].file_id == "f3"


def test_a_warm_run_reads_only_the_segments_it_does_not_hold(stack: LocalStack) -> None:
    """A segment is immutable and a new version still names it: after another file's ingest, a
    warm ClaimAndRead reads the pointer, the new manifest and the new segment, never the room's
    other segments again."""
    d = quay_deps.default_deps()
    room = "r-warm"
    for i in range(2):
        _add(d, room, f"f{i}", "".join(f"harbour line {j} of file {i}\n" for j in range(40)))
    reads: list[str] = []
    me = threading.get_ident()

    def count(service: str, operation: str, params: dict) -> None:
        if threading.get_ident() == me:  # not the local stack's pollers
            reads.append(f"{service}.{operation}:{params.get('Key', '')}")

    counting = seams.Instruments("test reads", call=count)
    retrieval.CACHE.clear()
    with seams.installed(counting):
        assert rf.passages(d, room, "harbour file", 3)[1]
    assert len(reads) == 1 + 1 + 2  # pointer, manifest, two segments
    _add(d, room, "f2", "harbour line of the new file\n")
    new = {split_index_ref(r)[0] for r in rf.version_objects(d.files, d.files.index_pointer(room)[1] or "")}
    reads.clear()
    with seams.installed(counting):
        assert rf.passages(d, room, "new file", 3)[1][0].file_id == "f2"
    got = [r for r in reads if r.startswith("s3.")]
    assert len(reads) == 3 and {r.split(":", 1)[1] for r in got} <= new  # the manifest and f2's segment


def test_a_format_1_index_is_read_and_converted_at_the_next_ingest(stack: LocalStack) -> None:
    """A room indexed before segments (one bm25s index object over the room): runs still read
    it; the next ingest converts its files to segments and retires it."""
    d = quay_deps.default_deps()
    room = "r-legacy"
    old = retrieval.chunk_text(room, "old.txt", "the old quay log\nthe pelican code\n", file_id="old")
    key = d.files.new_index_key(room, 1)
    ref = index_ref(key, d.files.put_index(key, retrieval.build_index(old)))
    assert d.files.advance_index(room, 0, ref, len(old))
    assert rf.passages(d, room, "pelican", 1)[1][0].file_id == "old"
    assert _add(d, room, "new", "a new pelican\n") == 2
    assert {c.file_id for c in rf.version_chunks(d.files, d.files.index_pointer(room)[1] or "")} == {"old", "new"}
    assert _current_objects(stack, room) == _named(d, room) and key not in _current_objects(stack, room)
    assert {c.file_id for c in rf.passages(d, room, "pelican", 5)[1]} == {"old", "new"}
