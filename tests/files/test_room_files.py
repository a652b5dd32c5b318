"""Room files (issue 11, design §8): the index built at ingest, retrieval at a constant number of
reads, ingest once, concurrent ingests keep each other's chunks, extraction and failure reasons,
and a 3 MB file whose answer is in its last paragraph reaching the agent's model request."""

from __future__ import annotations

import io
import json
import sys
import threading

import pytest

from quaylocal.stack import LocalStack
from quayutec import deps as quay_deps
from quayutec import seams
from quayutec.dal.files import upload_key
from quayutec.logic import files as rf
from quayutec.logic import retrieval
from quayutec.logic.extract import Unreadable, extract
from quayutec.models import Author

ANN = Author(kind="person", id="ann", company="acme")
ANSWER = "The vault code is PELICAN-4242."


def big_text(answer: str = ANSWER) -> str:
    para = "Harbour log {i}: the ferries left quay three at dawn and came back before dusk.\n\n"
    body = "".join(para.format(i=i) for i in range(37000))
    return body + answer + "\n"


def _pdf(text: str | None) -> bytes:
    """A one-page PDF with ``text`` drawn (None: a blank page)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode() if text else b""
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = io.BytesIO(), []
    out.write(b"%PDF-1.4\n")
    for i, o in enumerate(objs, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % i + o + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref))
    return out.getvalue()


def _encrypted_pdf() -> bytes:
    from pypdf import PdfReader, PdfWriter

    w = PdfWriter(clone_from=PdfReader(io.BytesIO(_pdf("secret plan"))))
    w.encrypt(user_password="open-sesame", owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    w.write(out)
    return out.getvalue()


# ----------------------------------------------------------------------------- pure
@pytest.mark.unit
def test_extraction_kinds_and_reasons() -> None:
    assert extract(
        "html",
        b"<html><head><style>p{}</style><script>x=1</script></head>"
        b"<body><p>Quay &amp; crane</p><div>three</div></body></html>",
    ) == [(None, "Quay & crane\nthree")]
    assert "Quay 7 crane" in extract("pdf", _pdf("Quay 7 crane"))[0][1]
    with pytest.raises(Unreadable, match="no text"):
        extract("pdf", _pdf(None))
    with pytest.raises(Unreadable, match="encrypted PDF"):
        extract("pdf", _encrypted_pdf())
    with pytest.raises(Unreadable, match="unreadable"):
        extract("pdf", b"%PDF-1.4 garbage")
    with pytest.raises(Unreadable, match="JSON"):
        extract("json", b"{nope")


@pytest.mark.unit
def test_a_hostile_file_fails_with_its_reason_never_the_ingest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nesting past the recursion limit, a pypdf limit (a decompression bomb): ``Unreadable``
    with the reason, never another exception (which failed the ingest three times, sent the
    file's event to the dead-letter queue and left it ``uploading`` for good)."""
    from pypdf.errors import LimitReachedError

    from quayutec.logic import extract as ex

    with pytest.raises(Unreadable, match="nested too deep"):
        extract("json", b"[" * 100_000 + b"]" * 100_000)

    def bomb(_: object) -> None:
        raise LimitReachedError("Limit reached while decompressing: 75000001 bytes")

    for name in ("PdfReader", "_html"):
        target = ex if name == "_html" else __import__("pypdf")
        monkeypatch.setattr(target, name, bomb)
    with pytest.raises(Unreadable, match="LimitReachedError"):
        extract("pdf", _pdf("x"))
    with pytest.raises(Unreadable, match="LimitReachedError"):
        extract("html", b"<p>x</p>")


def test_chunks_read_lines_one_at_a_time_and_cut_long_lines_by_offsets() -> None:
    """Any line ending, line numbers kept; a long line cut into whole pieces; a file of a million
    short lines never held as a million strings at once (a 25 MB CSV of 12 million rows took
    0.9 GB of the ingest function's 1 GB)."""
    import tracemalloc

    def cut(text: str, size: int) -> list[tuple[int | None, str]]:
        return [(c.line, c.text) for c in retrieval.chunk_text("r", "f.txt", text, size)]

    assert cut("a\nbb\r\ncc\rdd", 4) == [(1, "a\n"), (2, "bb\n"), (3, "cc\n"), (4, "dd")]
    assert cut("x" * 10 + "\nyy", 4) == [(1, "xxxx"), (1, "xxxx"), (1, "xx\n"), (2, "yy")]
    assert cut("x" * 8, 4) == [(1, "xxxx"), (1, "xxxx")]
    rows = "1\n" * 1_000_000
    tracemalloc.start()
    try:
        chunks = retrieval.chunk_text("r", "rows.csv", rows)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sum(len(c.text) for c in chunks) == len(rows) and chunks[-1].line > 999_000
    assert peak < 24 * 2**20, peak  # the chunks (~2 MB of text) and their models; the lines list was ~60 MB


@pytest.mark.unit
def test_an_upload_that_never_arrived_reads_failed_once_its_form_and_ingest_time_are_over() -> None:
    from datetime import UTC, datetime, timedelta

    from quayutec.models import RoomFile, iso

    declared = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    f = RoomFile(
        id="f1",
        room_id="r",
        name="a.txt",
        content_type="text/plain",
        size=3,
        kind="text",
        uploader=ANN,
        created_at=iso(declared),
    )
    assert rf.as_seen(f, declared + timedelta(seconds=rf.UPLOAD_GRACE_S)).status == "uploading"
    late = rf.as_seen(f, declared + timedelta(seconds=rf.UPLOAD_GRACE_S + 1))
    assert (late.status, late.reason) == ("failed", "the upload never arrived (its form expired)")
    ready = f.model_copy(update={"status": "ready"})
    assert rf.as_seen(ready, declared + timedelta(days=30)) is ready


def test_passages_carry_file_name_and_position() -> None:
    chunks = retrieval.chunk_text("r", "log.txt", big_text(), file_id="f1")
    top = retrieval.top_passages(chunks, "What is the vault code?", 5)
    assert top[0].text.strip().endswith(ANSWER) and top[0].name == "log.txt"
    assert top[0].index == len(chunks) - 1 and top[0].line and top[0].line > 70000


@pytest.mark.unit
def test_only_the_ranking_imports_bm25s() -> None:
    import subprocess

    code = (
        "import sys; import quayutec.logic.phases.claim_and_read, quayutec.logic.files, "
        "quayutec.handlers.claim_and_read, "
        "quayutec.handlers.ingest; print('bm25s' in sys.modules, 'scipy' in sys.modules, 'pypdf' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]


# ----------------------------------------------------------------------------- on the local stack
@pytest.fixture(scope="module")
def stack():
    with LocalStack(time_scale=0.01) as s:
        yield s


def _upload(stack: LocalStack, room: str, name: str, data: bytes, content_type: str = "text/plain") -> str:
    d = quay_deps.default_deps()
    f = rf.declare_upload(
        d, room, name=name, content_type=content_type, size=len(data), uploader=ANN, at="2026-11-30T00:00:00Z"
    )
    stack.client("s3").put_object(Bucket=d.files.bucket, Key=upload_key(room, f.id), Body=data)
    stack.wait_quiet(120)
    return f.id


def test_retrieval_reads_the_same_for_a_10_line_and_a_3_mb_file(stack: LocalStack) -> None:
    d = quay_deps.default_deps()
    _upload(stack, "small", "notes.txt", "".join(f"line {i} about the quay\n" for i in range(10)).encode())
    _upload(stack, "large", "log.txt", big_text().encode())
    reads: dict[str, list[str]] = {}

    me = threading.get_ident()

    def count(service: str, operation: str, params: dict) -> None:
        if threading.get_ident() == me:  # not the local stack's pollers
            reads.setdefault(room, []).append(f"{service}.{operation}")

    counting = seams.Instruments("test reads", call=count)
    with seams.installed(counting):
        for room in ("small", "large"):
            retrieval.CACHE.clear()  # a cold Lambda
            version, top = rf.passages(d, room, "What is the vault code?", 5)
            assert version == 1 and top
    # the pointer, the manifest, the one segment (design §8): the same for 10 lines and 3 MB
    assert reads["small"] == reads["large"] == ["dynamodb.GetItem", "s3.GetObject", "s3.GetObject"]
    assert rf.passages(d, "large", "vault code", 5)[1][0].text.strip().endswith(ANSWER)
    reads.clear()
    with seams.installed(counting):
        room = "large"
        rf.passages(d, "large", "vault code", 5)  # warm: the pointer only
    assert reads["large"] == ["dynamodb.GetItem"]


def test_statuses_redelivery_and_delete(stack: LocalStack) -> None:
    d = quay_deps.default_deps()
    ok = _upload(stack, "r-st", "plan.pdf", _pdf("Crane seven lifts at noon"), "application/pdf")
    enc = _upload(stack, "r-st", "locked.pdf", _encrypted_pdf(), "application/pdf")
    empty = _upload(stack, "r-st", "blank.pdf", _pdf(None), "application/pdf")
    got = {f.id: (f.status, f.reason) for f in d.files.list_files("r-st")}
    assert got[ok] == ("ready", None)
    assert got[enc][0] == "failed" and got[enc][1].startswith("encrypted PDF")
    assert got[empty] == ("failed", "no text")
    version = d.files.index_pointer("r-st")[0]
    # the same S3 event again: ingests once (no new index version)
    from quayutec.handlers.ingest import process

    event = {"Records": [{"eventName": "ObjectCreated:Put", "s3": {"object": {"key": upload_key("r-st", ok)}}}]}
    assert process(d, json.dumps(event)) == [f"{ok}: skipped"]
    assert d.files.index_pointer("r-st")[0] == version
    assert "Crane seven" in rf.passages(d, "r-st", "crane", 5)[1][0].text
    # delete: the S3 event takes the chunks out in a new version; the old version stays readable
    _, old_key = d.files.index_pointer("r-st")
    record = d.files.get_file("r-st", ok)
    assert record is not None
    d.files.delete_file(record)
    d.files.delete_upload("r-st", ok)
    stack.wait_quiet(60)
    assert d.files.index_pointer("r-st")[0] == version + 1
    assert rf.passages(d, "r-st", "crane", 5)[1] == []
    assert rf.version_chunks(d.files, old_key)[0].file_id == ok


def test_a_new_upload_to_a_finished_files_key_is_ingested_in_its_place(stack: LocalStack) -> None:
    """The upload form stays valid 15 minutes: a second POST to the key of a ready file swapped
    what people download while agents kept reading the first text. Now it is ingested in place
    of the first (its chunks replace them); one that is unreadable fails the file and takes its
    chunks out; a redelivered event of the same upload is still skipped."""
    d = quay_deps.default_deps()
    fid = _upload(stack, "r-swap", "budget.txt", b"Budget is 40k for the stage.\n")
    assert rf.passages(d, "r-swap", "budget stage", 5)[1][0].text.startswith("Budget is 40k")
    first = d.files.get_file("r-swap", fid)
    assert first is not None and first.status == "ready" and first.etag
    s3 = stack.client("s3")
    s3.put_object(Bucket=d.files.bucket, Key=upload_key("r-swap", fid), Body=b"Budget is 999k, wire it now.\n")
    stack.wait_quiet(120)
    again = d.files.get_file("r-swap", fid)
    assert again is not None and again.status == "ready" and again.etag != first.etag and again.size == 29
    [passage] = rf.passages(d, "r-swap", "budget wire", 5)[1]
    assert passage.text.startswith("Budget is 999k")  # the old chunks are gone
    from quayutec.handlers.ingest import process

    event = {"Records": [{"eventName": "ObjectCreated:Post", "s3": {"object": {"key": upload_key("r-swap", fid)}}}]}
    assert process(d, json.dumps(event)) == [f"{fid}: skipped"]  # the same upload again
    s3.put_object(Bucket=d.files.bucket, Key=upload_key("r-swap", fid), Body=b"   \n")
    stack.wait_quiet(120)
    failed = d.files.get_file("r-swap", fid)
    assert failed is not None and (failed.status, failed.reason, failed.chunks) == ("failed", "no text", 0)
    assert rf.passages(d, "r-swap", "budget", 5)[1] == []


def test_two_ingests_in_one_room_keep_each_others_chunks(stack: LocalStack, monkeypatch) -> None:
    d = quay_deps.default_deps()
    first = retrieval.chunk_text("r-race", "a.txt", "alpha harbour\n", file_id="fa")
    second = retrieval.chunk_text("r-race", "b.txt", "bravo harbour\n", file_id="fb")
    real_put = d.files.put_index
    raced = []

    def put_then_lose(key: str, blob: bytes) -> None:
        real_put(key, blob)
        if not raced:  # another ingest moves the pointer between this one's read and its update
            raced.append(key)
            rf.update_index(d, "r-race", add=second, remove="fb", limit=1000)

    monkeypatch.setattr(d.files, "put_index", put_then_lose)
    assert rf.update_index(d, "r-race", add=first, remove="fa", limit=1000) == 2
    version, key = d.files.index_pointer("r-race")
    assert version == 2 and key and {c.file_id for c in rf.version_chunks(d.files, key)} == {"fa", "fb"}
