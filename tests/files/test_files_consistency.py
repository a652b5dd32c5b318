"""What agents read is what people download, at every moment (design §8): a re-upload through
one form racing the first ingest, a form used after the file's DELETE, a download URL issued
before either, an ingest that loses its conditional write; the "never arrived" grace derived
from the ingest queue; a missing upload told apart from a denied one."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from quaylocal.dev import DevServer
from quayutec import deps as quay_deps
from quayutec import resources as R
from quayutec.dal.files import FileStore, UploadDenied, split_index_ref, upload_key
from quayutec.logic import files as rf
from quayutec.logic import retrieval


def _call(url: str, method: str, path: str, token: str, body: dict | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(
        url + path,
        method=method,
        data=json.dumps(body).encode() if body else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _post_form(url: str, fields: dict[str, str], data: bytes) -> int:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\n'.encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    req = urllib.request.Request(
        url, method="POST", data=b"".join(parts), headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _download(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


@pytest.fixture(scope="module")
def dev():
    with DevServer(port=0, time_scale=0.01) as d:
        adm = d.admin_token
        _call(d.url, "POST", "/companies", adm, {"id": "acme", "people": ["ann"]})
        d.tok = _call(d.url, "POST", "/companies/acme/tokens", adm, {"member": "ann"})[1]["token"]  # type: ignore[attr-defined]
        yield d


def _room(dev: DevServer) -> str:
    return _call(dev.url, "POST", "/rooms", dev.tok, {"name": "quay"})[1]["id"]  # type: ignore[attr-defined]


def _declare(dev: DevServer, room: str, size: int) -> dict:
    status, out = _call(
        dev.url,
        "POST",
        f"/rooms/{room}/files",
        dev.tok,  # type: ignore[attr-defined]
        {"name": "budget.txt", "content_type": "text/plain", "size": size},
    )
    assert status == 201, out
    return out


def _settle(dev: DevServer) -> None:
    assert dev.stack is not None
    dev.stack.wait_quiet(120)


def _agents_see(room: str, query: str) -> set[str]:
    """The texts a run's retrieval reads from the room's index (ClaimAndRead's read)."""
    retrieval.CACHE.clear()
    return {c.text for c in rf.passages(quay_deps.default_deps(), room, query, 5)[1]}


def _people_see(dev: DevServer, room: str, file_id: str) -> set[str]:
    """The text a member downloads (GET the file, then its download URL); none once it is gone."""
    status, out = _call(dev.url, "GET", f"/rooms/{room}/files/{file_id}", dev.tok)  # type: ignore[attr-defined]
    if status == 404 or not out["download_url"] or out["file"]["status"] != "ready":
        return set()
    code, body = _download(out["download_url"])
    return {body.decode()} if code == 200 else set()


def _index_objects(dev: DevServer, room: str) -> list[str]:
    assert dev.stack is not None
    s3 = dev.stack.client("s3")
    got = s3.list_object_versions(Bucket=dev.stack.files_bucket, Prefix=f"{R.INDEX_PREFIX}{room}/")
    return [v["Key"] for v in got.get("Versions", [])]


def test_a_re_upload_racing_the_first_ingest_leaves_agents_and_people_on_one_file(
    dev: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two uploads through one form: the second lands (and is ingested) while the first ingest
    writes its index version. The first loses its conditional write; before, it merged its text
    back in, so agents read the first upload while people downloaded the second, and its lost
    index objects stayed. Now it deletes what it wrote and stops: both see the second upload, and
    the room's index holds only committed versions."""
    room = _room(dev)
    first, second = b"Budget is 40k for the stage.\n", b"Budget is 999k, wire it now.\n"
    out = _declare(dev, room, len(first))
    fid, form = out["file"]["id"], out["upload"]
    real_put = FileStore.put_index
    raced: list[str] = []

    def put_then_race(self: FileStore, key: str, blob: bytes) -> Any:
        written = real_put(self, key, blob)
        if not raced and key.startswith(f"{R.INDEX_PREFIX}{room}/"):
            raced.append(key)  # the second POST of the form lands and is ingested first
            assert _post_form(form["url"], form["fields"], second) == 204
            assert rf.ingest(quay_deps.default_deps(), room, fid, "2026-12-03T00:00:00Z") == "ready"
        return written

    monkeypatch.setattr(FileStore, "put_index", put_then_race)
    assert _post_form(form["url"], form["fields"], first) == 204
    _settle(dev)
    assert raced
    agents, people = _agents_see(room, "budget stage wire"), _people_see(dev, room, fid)
    assert agents == people == {second.decode()}
    pointer = quay_deps.default_deps().files.index_pointer(room)
    named = sorted(split_index_ref(r)[0] for r in rf.version_objects(quay_deps.default_deps().files, pointer[1] or ""))
    assert pointer[1] and sorted(_index_objects(dev, room)) == named, (
        "an ingest that lost its write left its index objects"
    )


def test_a_superseded_index_version_is_retired_and_stays_readable_by_its_version(dev: DevServer) -> None:
    """Each ingest wrote a full new index object and none was ever deleted. Now the superseded
    one is retired when the pointer moves on: a delete marker hides its key, and its version,
    which a run holding the old pointer reads, expires a day later (the bucket's lifecycle)."""
    room = _room(dev)
    d = quay_deps.default_deps()
    for text in (b"Alpha harbour opens at six.\n", b"Bravo harbour opens at nine.\n"):
        out = _declare(dev, room, len(text))
        assert _post_form(out["upload"]["url"], out["upload"]["fields"], text) == 204
        _settle(dev)
        if text.startswith(b"Alpha"):
            old_ref = d.files.index_pointer(room)[1]
    assert old_ref and d.files.index_pointer(room)[1] != old_ref
    assert rf.version_chunks(d.files, old_ref)[0].text.startswith("Alpha")  # a run holding it
    assert dev.stack is not None
    s3 = dev.stack.client("s3")
    old_key = split_index_ref(old_ref)[0]
    with pytest.raises(ClientError):
        s3.get_object(Bucket=dev.stack.files_bucket, Key=old_key)  # retired: hidden by a delete marker
    markers = s3.list_object_versions(Bucket=dev.stack.files_bucket, Prefix=old_key).get("DeleteMarkers", [])
    assert [m["IsLatest"] for m in markers] == [True]


def test_the_files_bucket_expires_what_nobody_names_after_a_day(iam_roles: Any) -> None:
    rules = iam_roles.resources[R.FILES_BUCKET.logical_id]["Properties"]["LifecycleConfiguration"]["Rules"]
    [rule] = [r for r in rules if r.get("NoncurrentVersionExpiration")]
    assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1} and "Prefix" not in rule
    assert rule["ExpiredObjectDeleteMarker"] is True


def test_a_form_used_after_delete_stores_nothing_anyone_reads(dev: DevServer) -> None:
    """After DELETE, the file's form (valid 15 minutes) still stores bytes: before, they stayed
    readable, through the download URL issued before the delete too. Now the delete removes every
    version, the download URL names the ingested version, and ingest deletes an object whose file
    is gone: nobody reads it, neither agents nor people."""
    room = _room(dev)
    text = b"The vault code is PELICAN-4242.\n"
    out = _declare(dev, room, len(text))
    fid, form = out["file"]["id"], out["upload"]
    assert _post_form(form["url"], form["fields"], text) == 204
    _settle(dev)
    assert _agents_see(room, "vault code") == _people_see(dev, room, fid) == {text.decode()}
    url = _call(dev.url, "GET", f"/rooms/{room}/files/{fid}", dev.tok)[1]["download_url"]  # type: ignore[attr-defined]
    status, _ = _call(dev.url, "DELETE", f"/rooms/{room}/files/{fid}", dev.tok)  # type: ignore[attr-defined]
    assert status == 200
    _settle(dev)
    assert _download(url)[0] == 404
    assert _post_form(form["url"], form["fields"], b"The vault code is now OSPREY-1.\n") == 204
    _settle(dev)
    assert _agents_see(room, "vault code") == _people_see(dev, room, fid) == set()
    assert _download(url)[0] == 404  # the URL issued before the delete serves nothing later
    assert "versionId=" in url  # it names the version agents read
    assert dev.stack is not None
    left = dev.stack.client("s3").list_object_versions(Bucket=dev.stack.files_bucket, Prefix=upload_key(room, fid))
    assert not left.get("Versions") and not left.get("DeleteMarkers"), left


@pytest.mark.unit
def test_the_never_arrived_grace_outlasts_every_ingest_delivery() -> None:
    """The grace is derived from the ingest queue (one source: resources): a failing ingest's
    last redelivery returns after ``visibility x max receives``; before, the grace was 30 minutes
    against a first retry at 30 minutes (1,800 s visibility)."""
    q = R.INGEST_QUEUE
    last_delivery_done = R.UPLOAD_URL_EXPIRES_S + q.visibility_timeout_s * (q.max_receive_count - 1)
    last_delivery_done += R.FUNCTIONS_BY_ID["IngestFunction"].timeout_s
    assert rf.UPLOAD_GRACE_S == R.UPLOAD_GRACE_S > last_delivery_done
    derived = R.UPLOAD_URL_EXPIRES_S + q.visibility_timeout_s * q.max_receive_count + R.UPLOAD_GRACE_MARGIN_S
    assert derived == R.UPLOAD_GRACE_S
    assert rf.URL_EXPIRES_S == R.UPLOAD_URL_EXPIRES_S


class _S3:
    def __init__(self, code: str, status: int) -> None:
        self.error = ClientError(
            {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "HeadObject"
        )

    def head_object(self, **_: Any) -> dict:
        raise self.error


@pytest.mark.unit
def test_a_missing_upload_is_skipped_and_a_denied_one_is_a_fault() -> None:
    """With s3:ListBucket on uploads/, a missing object answers 404 and ingest skips it; a 403 is
    never read as missing (before, it escaped as a bare ClientError the skip path did not name)."""
    missing = FileStore("t", "b", db=object(), client=_S3("404", 404))
    assert missing.head_upload("r", "f") is None

    class Deps:
        files = missing

    assert rf.ingest(Deps(), "r", "f", "2026-12-03T00:00:00Z") == "skipped"
    denied = FileStore("t", "b", db=object(), client=_S3("403", 403))
    Deps.files = denied
    with pytest.raises(UploadDenied, match="ListBucket"):
        rf.ingest(Deps(), "r", "f", "2026-12-03T00:00:00Z")


def test_the_files_bucket_is_versioned_and_ingest_may_list_uploads(iam_roles: Any) -> None:
    res = iam_roles.resources
    bucket = res[R.FILES_BUCKET.logical_id]["Properties"]
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    assert "VersioningConfiguration" not in res[R.RUN_DATA_BUCKET.logical_id]["Properties"]
    role = iam_roles.role_of["function:IngestFunction"]
    on_bucket = {
        (action, json.dumps(st.raw.get("Condition"), sort_keys=True))
        for st in iam_roles.statements[role]
        if f"arn:aws:s3:::{R.FILES_BUCKET.logical_id}" in st.resources
        for action in st.actions
    }
    uploads_only = json.dumps({"StringLike": {"s3:prefix": "uploads/*"}})
    assert on_bucket == {("s3:ListBucket", uploads_only), ("s3:ListBucketVersions", uploads_only)}


def test_agents_stop_reading_a_deleted_file_the_moment_people_do(
    dev: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the chunks of a deleted file stayed in what agents read until its S3 event's
    ingest wrote an index version without them (seconds; half an hour and more when that ingest
    failed and waited for its redelivery). Now the DELETE hides the file in the index pointer in
    the record's own transaction: retrieval skips its chunks at once, whatever the ingest does."""
    room = _room(dev)
    text = b"The crane key is under the harbour bell.\n"
    out = _declare(dev, room, len(text))
    fid = out["file"]["id"]
    assert _post_form(out["upload"]["url"], out["upload"]["fields"], text) == 204
    _settle(dev)
    assert _agents_see(room, "crane key harbour") == {text.decode()}
    d = quay_deps.default_deps()
    version = d.files.index_pointer(room)[0]
    monkeypatch.setattr(rf, "remove", lambda *a, **k: None)  # the removal ingest stalls
    assert _call(dev.url, "DELETE", f"/rooms/{room}/files/{fid}", dev.tok)[0] == 200  # type: ignore[attr-defined]
    _settle(dev)
    assert d.files.index_pointer(room)[0] == version  # the version still holds its chunks
    assert _agents_see(room, "crane key harbour") == _people_see(dev, room, fid) == set()
    monkeypatch.undo()
    rf.remove(d, room, fid)  # the ingest's removal, once it runs: a version without them, unhidden
    assert d.files.index_view(room)[0] == version + 1 and d.files.index_view(room)[2] == frozenset()
