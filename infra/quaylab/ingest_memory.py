"""Ingest peak memory for the 1st, 2nd, ... file of a room (design §8, "Ingest memory"): the
figure the big-room bench reports (``make bench`` with ``--big-room-ingest``).

Runs the real ingest (:func:`quayutec.logic.files.ingest`) on the local stack (moto, in this
process), one text file after the other into one room, and takes each ingest's peak with
``tracemalloc`` (Python allocations, numpy's included; what moto keeps of the objects the ingest
writes is counted too, so the figure is an upper bound of the function's own). The bucket's
event notification is switched off so that the measured call is the only ingest.

    PYTHONPATH=functions:infra python -m quaylab.ingest_memory --mib 25 --files 4 --json

Slow at 25 MB (each ingest extracts, chunks and indexes its 25 MB: a few minutes per file on 2
cores under tracemalloc); ``--mib 2`` for a quick look (its 4th file merges a size tier, design
§8: files of 6 MB or more are final segments and never merge).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tracemalloc
from typing import Any

#: The ingests whose peaks the bench reports (1-based): the 1st, 2nd and 4th file of a room.
REPORTED = (1, 2, 4)


def text_of(size_bytes: int, seed: int) -> bytes:
    """A plain text file of about ``size_bytes``: lines of words from a 50,000-word vocabulary
    (a room's files share most terms, as real documents do)."""
    rnd = random.Random(seed)
    words = [f"w{i}" for i in range(50_000)]
    out: list[str] = []
    size = 0
    while size < size_bytes:
        line = " ".join(rnd.choices(words, k=12)) + "\n"
        out.append(line)
        size += len(line)
    return "".join(out).encode()[:size_bytes]


def measure(mib: float = 25.0, files: int = 4, room: str = "big-room") -> dict[str, Any]:
    """``{"ingest_peak_mib": [per file], "results": [...], "chunks": [...]}`` for ``files``
    files of ``mib`` MiB ingested one after the other into ``room``."""
    from quaylocal.stack import LocalStack
    from quayutec import deps as quay_deps
    from quayutec import resources as R
    from quayutec.dal.files import upload_key
    from quayutec.logic import files as rf
    from quayutec.models import Author

    peaks: list[float] = []
    results: list[str] = []
    chunks: list[int] = []
    settings = {"MAX_FILE_CHUNKS": str(10**7)}
    with LocalStack(settings=settings) as stack:
        s3 = stack.client("s3")
        s3.put_bucket_notification_configuration(Bucket=stack.files_bucket, NotificationConfiguration={})
        d = quay_deps.default_deps()
        who = Author(kind="person", id="ann", company="acme")
        for i in range(files):
            data = text_of(int(mib * 2**20), seed=i)
            f = rf.declare_upload(
                d, room, name=f"big-{i}.txt", content_type="text/plain", size=min(len(data), R.MAX_UPLOAD_BYTES),
                uploader=who, at="2026-12-03T00:00:00Z",
            )  # fmt: skip
            s3.put_object(Bucket=stack.files_bucket, Key=upload_key(room, f.id), Body=data)
            del data
            tracemalloc.start()
            try:
                results.append(rf.ingest(d, room, f.id, "2026-12-03T00:00:00Z"))
                peaks.append(round(tracemalloc.get_traced_memory()[1] / 2**20, 1))
            finally:
                tracemalloc.stop()
            got = d.files.get_file(room, f.id)
            chunks.append(got.chunks if got else 0)
            print(f"file {i + 1}: {results[-1]}, {chunks[-1]} chunks, peak {peaks[-1]} MiB", file=sys.stderr)
    return {"ingest_peak_mib": peaks, "results": results, "chunks": chunks}


def big_room_figures(mib: float = 25.0) -> dict[str, Any]:
    """The bench's ``big_room`` keys of this measure: the peaks of the 1st, 2nd and 4th file and
    the ingest function's memory (MiB)."""
    from quayutec import resources as R

    got = measure(mib=mib, files=max(REPORTED))
    return {
        "ingest_peak_mib": [got["ingest_peak_mib"][n - 1] for n in REPORTED],
        "ingest_memory_mib": R.FUNCTIONS_BY_ID["IngestFunction"].memory_mb,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=float, default=25.0, help="size of each file (MiB)")
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="print the bench's big_room keys as JSON")
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps(big_room_figures(args.mib)))
    else:
        print(json.dumps(measure(args.mib, args.files)))


if __name__ == "__main__":
    main()
