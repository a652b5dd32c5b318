"""Room files at scale (design §8): ClaimAndRead's warm index cache is bounded in bytes, not in
a count of indexes (8 big rooms' indexes were GBs against the function's 512 MB)."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from quayutec.logic import retrieval


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
        text = "\n".join(" ".join(rnd.choices([f"w{i}" for i in range(30000)], k=12)) for _ in range(20000))
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
