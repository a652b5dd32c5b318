"""Ingest memory is bounded by the file, not by the room (design §8, "Ingest memory"): the
bench's measure at a small size (its own local stack: a module of its own)."""

from __future__ import annotations

import pytest

from quayutec.logic import segments as seg


def test_ingest_peak_memory_is_flat_in_the_room(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's measure (real ingests on the local stack, tracemalloc) at a small size: four
    files into one room, the 4th ingest's peak within 1.3x the 1st's and 2nd's (before: linear
    in the room, 118, 210 and 406 MiB for the 1st, 2nd and 4th 5 MiB file). The files are
    final segments here as 25 MB files are at the default tiers (FINAL_CHUNKS lowered to this
    size), so no merge runs: what each ingest holds is its file, never the room."""
    from quaylab import ingest_memory

    monkeypatch.setattr(seg, "FINAL_CHUNKS", 256)
    got = ingest_memory.measure(mib=0.5, files=4, room="r-flat")
    peaks = got["ingest_peak_mib"]
    assert got["results"] == ["ready"] * 4 and min(got["chunks"]) >= 256
    assert peaks[3] <= 1.3 * min(peaks[0], peaks[1]), peaks
