"""Room files through the API (design §8): declare an upload (presigned POST, 25 MB cap, refused
at once above it), list, read (presigned download), delete by the uploader's company only;
membership as every room route."""

from __future__ import annotations

import base64
import json

import pytest

from quayutec import resources as R
from quayutec.dal.files import upload_key
from quayutec.deps import default_deps


def test_upload_flow_and_rules(stack_env, light_world) -> None:
    w = light_world
    api = w.api
    big = api.call(
        "POST",
        "/rooms/r1/files",
        w.tokens["ann"],
        {"name": "huge.txt", "content_type": "text/plain", "size": 30 * 1024 * 1024},
    )
    assert big.status == 413 and "25 MB" in big.body["message"]
    assert (
        api.call(
            "POST", "/rooms/r1/files", w.tokens["carl"], {"name": "a.md", "content_type": "text/markdown", "size": 10}
        ).status
        == 404
    )
    bad = api.call(
        "POST", "/rooms/r1/files", w.tokens["ann"], {"name": "a.exe", "content_type": "application/x", "size": 3}
    )
    assert bad.status == 400
    out = api.ok(
        "POST",
        "/rooms/r1/files",
        w.tokens["ann"],
        {"name": "brief.md", "content_type": "text/markdown", "size": 40},
        key="upload-1",
    )
    again = api.ok(
        "POST",
        "/rooms/r1/files",
        w.tokens["ann"],
        {"name": "brief.md", "content_type": "text/markdown", "size": 40},
        key="upload-1",
    )
    assert again["file"]["id"] == out["file"]["id"]  # Idempotency-Key: one file
    f = out["file"]
    assert f["status"] == "uploading" and f["kind"] == "markdown" and f["uploader"]["company"] == "acme"
    policy = json.loads(base64.b64decode(out["upload"]["fields"]["policy"]))
    assert ["content-length-range", 1, R.MAX_UPLOAD_BYTES] in policy["conditions"]
    assert out["upload"]["fields"]["key"] == upload_key("r1", f["id"])
    # the upload lands (as S3 would take the POST), the ingest makes it ready
    stack, _ = stack_env
    stack.client("s3").put_object(
        Bucket=default_deps().files.bucket, Key=upload_key("r1", f["id"]), Body=b"# Brief\nThe quay opens at nine.\n"
    )
    stack.wait_quiet(60)
    listed = api.ok("GET", "/rooms/r1/files", w.tokens["bob"])["files"]
    assert [(x["name"], x["status"], x["chunks"]) for x in listed] == [("brief.md", "ready", 1)]
    one = api.ok("GET", f"/rooms/r1/files/{f['id']}", w.tokens["bob"])
    assert one["download_url"] and f["id"] in one["download_url"]
    # SigV4 (moto takes any signature; S3 refuses SigV2 on buckets made since 2020), and signed as a
    # download (S3 applies the response-* override): never rendered where it opens
    assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in one["download_url"] and "AWSAccessKeyId=" not in one["download_url"]
    assert out["upload"]["fields"]["x-amz-algorithm"] == "AWS4-HMAC-SHA256"
    assert "response-content-disposition=attachment%3B%20filename%3D%22brief.md%22" in one["download_url"]
    assert api.call("GET", f"/rooms/r1/files/{f['id']}", w.tokens["carl"]).status == 404
    assert api.call("DELETE", f"/rooms/r1/files/{f['id']}", w.tokens["bob"]).status == 403
    api.ok("DELETE", f"/rooms/r1/files/{f['id']}", w.tokens["amy"])
    stack.wait_quiet(60)
    assert api.ok("GET", "/rooms/r1/files", w.tokens["ann"])["files"] == []
    assert api.call("GET", f"/rooms/r1/files/{f['id']}", w.tokens["ann"]).status == 404


@pytest.mark.unit
def test_the_deployed_signer_presigns_sigv4_for_the_regional_virtual_host(monkeypatch) -> None:
    """What the deployed API hands out (no AWS call: presigning is local). botocore presigns
    with SigV2 when given an endpoint URL unless told s3v4; S3 refuses SigV2 for buckets created
    since June 2020, and a SigV2 URL signed with a Lambda role's credentials dies with the session."""
    from quayutec.dal.files import regional_s3

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example-secret")
    s3 = regional_s3("eu-west-1")
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": "quayutec-files-x1", "Key": "uploads/r/f"}, ExpiresIn=900
    )
    assert url.startswith("https://quayutec-files-x1.s3.eu-west-1.amazonaws.com/uploads/r/f?"), url
    assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in url and "X-Amz-Expires=900" in url and "Signature=" in url
    post = s3.generate_presigned_post("quayutec-files-x1", "uploads/r/f", ExpiresIn=900)
    assert post["url"] == "https://quayutec-files-x1.s3.eu-west-1.amazonaws.com/"
    assert post["fields"]["x-amz-algorithm"] == "AWS4-HMAC-SHA256" and "signature" not in post["fields"]


def test_a_delete_that_stopped_midway_is_finished_by_its_retry(stack_env, light_world, monkeypatch) -> None:
    """Design §8: a DELETE whose record went but whose upload versions did not (S3 failed after
    the transaction) is not a 404 on its retry: the retry finds the file's tombstone, deletes every
    version left and answers the same file; another company still may not, and learns nothing."""
    from quayutec.dal.files import FileStore
    from quayutec.errors import TransientError

    stack, _ = stack_env
    w, api = light_world, light_world.api
    f = api.ok(
        "POST", "/rooms/r1/files", w.tokens["ann"], {"name": "half.md", "content_type": "text/markdown", "size": 9}
    )["file"]
    s3 = stack.client("s3")
    bucket = default_deps().files.bucket
    s3.put_object(Bucket=bucket, Key=upload_key("r1", f["id"]), Body=b"# half\nx\n")
    stack.wait_quiet(60)
    real = FileStore.delete_upload

    def fails_once(self: FileStore, room_id: str, file_id: str) -> int:
        monkeypatch.setattr(FileStore, "delete_upload", real)
        raise TransientError("S3 throttled the delete")

    monkeypatch.setattr(FileStore, "delete_upload", fails_once)
    first = api.call("DELETE", f"/rooms/r1/files/{f['id']}", w.tokens["ann"])
    assert first.status == 503, first.body
    versions = s3.list_object_versions(Bucket=bucket, Prefix=upload_key("r1", f["id"])).get("Versions", [])
    assert versions, "the failed delete left the upload (the situation under test)"
    assert api.call("DELETE", f"/rooms/r1/files/{f['id']}", w.tokens["bob"]).status == 404  # bolt: not its file
    again = api.ok("DELETE", f"/rooms/r1/files/{f['id']}", w.tokens["amy"])
    assert again["file"]["id"] == f["id"] and again["file"]["name"] == "half.md"
    left = s3.list_object_versions(Bucket=bucket, Prefix=upload_key("r1", f["id"]))
    assert left.get("Versions", []) == [] and left.get("DeleteMarkers", []) == []
    stack.wait_quiet(60)
    assert f["id"] not in [x["id"] for x in api.ok("GET", "/rooms/r1/files", w.tokens["ann"])["files"]]
    assert api.call("GET", f"/rooms/r1/files/{f['id']}", w.tokens["ann"]).status == 404
