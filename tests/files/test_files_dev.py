"""`quay dev` serves the presigned upload itself (quaylocal.files_endpoint): a Markdown file
POSTed to the URL the API signed becomes ready; a body over the signed range is refused."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid

from quaylocal.dev import DevServer


def _call(url: str, method: str, path: str, token: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(
        url + path,
        method=method,
        data=json.dumps(body).encode() if body else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


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


def test_upload_through_quay_dev_becomes_ready() -> None:
    with DevServer(port=0, time_scale=0.01) as dev:
        url, adm = dev.url, dev.admin_token
        _call(url, "POST", "/companies", adm, {"id": "acme", "people": ["ann"]})
        tok = _call(url, "POST", "/companies/acme/tokens", adm, {"member": "ann"})["token"]
        room = _call(url, "POST", "/rooms", tok, {"name": "quay"})["id"]
        text = b"# Crane plan\nCrane seven lifts the festival stage at noon.\n"
        out = _call(
            url,
            "POST",
            f"/rooms/{room}/files",
            tok,
            {"name": "plan.md", "content_type": "text/markdown", "size": len(text)},
        )
        assert out["upload"]["url"].startswith(url + "/_s3/")
        assert _post_form(out["upload"]["url"], out["upload"]["fields"], text) == 204
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            files = _call(url, "GET", f"/rooms/{room}/files", tok)["files"]
            if files and files[0]["status"] != "uploading":
                break
            time.sleep(0.2)
        assert files[0]["status"] == "ready", files
        one = _call(url, "GET", f"/rooms/{room}/files/{files[0]['id']}", tok)
        with urllib.request.urlopen(one["download_url"], timeout=30) as resp:
            assert resp.read() == text
            # a download, never a page on quay dev's origin (an uploaded HTML file must not run)
            assert resp.headers["Content-Disposition"].startswith('attachment; filename="plan.md"')
            assert resp.headers["X-Content-Type-Options"] == "nosniff"
        # the endpoint serves signed downloads of uploads only: not the run data, not unsigned,
        # never inline; and, as S3 does, it ignores the form fields after `file`
        signed = one["download_url"]
        base = signed.split("?")[0]
        for refused in (
            url + "/_s3/quayutec-run-data/runs/x/context.json?" + signed.split("?")[1],
            base,
            url + "/_s3/quayutec-files/index/" + room + "/1.json?" + signed.split("?")[1],
        ):
            try:
                urllib.request.urlopen(refused, timeout=30)
                raise AssertionError(f"{refused} was served")
            except urllib.error.HTTPError as exc:
                assert exc.code == 403, (refused, exc.code)
        with urllib.request.urlopen(signed.replace("attachment", "inline"), timeout=30) as resp:
            assert resp.headers["Content-Disposition"] == "attachment"
        boundary = uuid.uuid4().hex  # `file` first: the signed fields after it are ignored, as on S3
        parts = [
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\n'.encode()
            + text
            + b"\r\n"
        ]
        parts += [
            f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
            for k, v in out["upload"]["fields"].items()
        ]
        req = urllib.request.Request(
            out["upload"]["url"],
            method="POST",
            data=b"".join(parts) + f"--{boundary}--\r\n".encode(),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        try:
            urllib.request.urlopen(req, timeout=30)
            raise AssertionError("a form with file first was taken")
        except urllib.error.HTTPError as exc:
            assert exc.code == 400 and b"file last" in exc.read()
        # a content type that is not a media type (it becomes a signed header) is refused first
        for bad_type in ("text/plain\r\nX-Injected: 1", "text/plain\nX: y", "plain", "text/plain; a=\x07"):
            req = urllib.request.Request(
                url + f"/rooms/{room}/files",
                method="POST",
                data=json.dumps({"name": "a.txt", "content_type": bad_type, "size": 3}).encode(),
                headers={"Authorization": f"Bearer {tok}", "Content-Type": "application/json"},
            )
            try:
                urllib.request.urlopen(req, timeout=30)
                raise AssertionError(f"{bad_type!r} was accepted")
            except urllib.error.HTTPError as exc:
                assert exc.code == 422 and "content_type" in exc.read().decode(), bad_type
        # the signed content type is enforced, like S3 does
        bad = dict(out["upload"]["fields"], **{"Content-Type": "text/html"})
        assert _post_form(out["upload"]["url"], bad, text) == 403
