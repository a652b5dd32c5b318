"""``quay dev``'s stand-in for the files bucket's own endpoint: the presigned URLs the API hands
out (FILES_ENDPOINT_URL = ``<dev server>/_s3``) are served here and forwarded to moto's S3 in
this process, so an upload's S3 event reaches the ingest queue as on AWS.

Only the files bucket's uploads are served (never the run data, nor the room indexes).

* ``POST /_s3/<bucket>``: a presigned POST (multipart form: the signed fields, then ``file``;
  as S3 does, fields after ``file`` are ignored). What S3 enforces is checked from the signed
  policy: not expired, the bucket and key, the Content-Type, the ``content-length-range``
  (25 MB).
* ``GET /_s3/<bucket>/<key>``: a presigned download: it must carry a SigV4 query signature that
  has not expired, and it is always served as an attachment (the API signs only those), with
  ``nosniff``; the ``versionId`` it names (the files bucket is versioned), or 404 once that
  version is deleted.

Neither signature is verified (moto's test credentials; locally only): a request with a forged
one for an upload's key is served.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from quaylocal import calls
from quayutec import resources as r

PREFIX = "/_s3/"
#: The largest request body the endpoint reads: the upload limit and room for the form fields.
MAX_BODY = 25 * 1024 * 1024 + 64 * 1024


def _result(status: int, body: bytes, content_type: str = "application/xml") -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": content_type}, body


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    return _result(status, f"<Error><Code>{code}</Code><Message>{message}</Message></Error>".encode())


def _form(content_type: str, body: bytes) -> dict[str, bytes]:
    """The form's fields up to and including ``file``: S3 ignores the fields after it."""
    msg = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    out: dict[str, bytes] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            payload = part.get_payload(decode=True)  # bytes, or None (a multipart part)
            out[str(name)] = payload if isinstance(payload, bytes) else b""
        if name == "file":
            break
    return out


def _signed_query_problem(query: dict[str, str]) -> str | None:
    """Why a download's query string is not a live SigV4 presigned one (None: it is)."""
    if not all(query.get(k) for k in ("X-Amz-Signature", "X-Amz-Date", "X-Amz-Expires", "X-Amz-Credential")):
        return (
            "Query-string authentication requires the X-Amz-Credential, X-Amz-Signature, X-Amz-Date and "
            "X-Amz-Expires parameters"
        )
    try:
        signed = datetime.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        expires = int(query["X-Amz-Expires"])
    except ValueError:
        return "X-Amz-Date or X-Amz-Expires is malformed"
    if (datetime.now(UTC) - signed).total_seconds() > expires:
        return "Request has expired"
    return None


def handle(
    stack: Any, method: str, path: str, headers: dict[str, str], body: bytes
) -> tuple[int, dict[str, str], bytes]:
    url = urlsplit(path)
    rest = unquote(url.path)[len(PREFIX) :]
    bucket, _, key = rest.partition("/")
    s3 = stack.client("s3")
    if bucket != stack.files_bucket or (key and not key.startswith(r.UPLOADS_PREFIX)):
        return _error(403, "AccessDenied", "Access Denied")
    if method == "GET" and key:
        query = dict(parse_qsl(url.query))
        problem = _signed_query_problem(query)
        if problem:
            return _error(403, "AccessDenied", problem)
        with calls.owner("local:s3-presigned-get"):
            version = query.get("versionId")  # the version the API signed (design §8)
            try:
                obj = s3.get_object(Bucket=bucket, Key=key, **({"VersionId": version} if version else {}))
            except s3.exceptions.NoSuchKey:
                return _error(404, "NoSuchKey", "The specified key does not exist.")
            except s3.exceptions.ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code in {"NoSuchVersion", "404", "InvalidArgument"}:
                    return _error(404, "NoSuchVersion", "The specified version does not exist.")
                raise
        # the signed URL's response-* overrides, as S3 applies them (GetObject); the API signs
        # attachments only, so nothing else is served here
        status, headers, data = _result(
            200,
            obj["Body"].read(),
            query.get("response-content-type") or obj.get("ContentType") or "application/octet-stream",
        )
        disposition = query.get("response-content-disposition", "")
        headers["Content-Disposition"] = disposition if disposition.startswith("attachment") else "attachment"
        headers["X-Content-Type-Options"] = "nosniff"
        return status, headers, data
    if method != "POST" or key:
        return _error(405, "MethodNotAllowed", "POST a presigned form to /_s3/<bucket>, GET /_s3/<bucket>/<key>")
    ctype = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    if not ctype.startswith("multipart/form-data"):
        return _error(400, "InvalidArgument", "a presigned POST is multipart/form-data")
    form = _form(ctype, body)
    if "file" not in form or "policy" not in form or "key" not in form:
        return _error(
            400, "InvalidArgument", "the form needs key, policy and file (file last: S3 ignores the fields after it)"
        )
    if not form["key"].decode(errors="replace").startswith(r.UPLOADS_PREFIX):
        return _error(403, "AccessDenied", "Access Denied")
    try:
        policy = json.loads(base64.b64decode(form["policy"]))
        expires = datetime.fromisoformat(policy["expiration"].replace("Z", "+00:00"))
    except (ValueError, TypeError, KeyError, AttributeError):
        return _error(400, "InvalidPolicyDocument", "Invalid Policy: the policy is not a base64 JSON document")
    if expires < datetime.now(UTC):
        return _error(403, "AccessDenied", "Invalid according to Policy: Policy expired.")
    fields = {k: v.decode() for k, v in form.items() if k != "file"}
    size = len(form["file"])
    for cond in policy.get("conditions", []):
        if isinstance(cond, list) and cond[0] == "content-length-range":
            if not cond[1] <= size <= cond[2]:
                return _error(
                    400,
                    "EntityTooLarge" if size > cond[2] else "EntityTooSmall",
                    f"Your proposed upload size {size} is outside {cond[1]}..{cond[2]} bytes",
                )
        elif isinstance(cond, dict):
            for name, want in cond.items():
                got = bucket if name == "bucket" else fields.get(name, fields.get(name.title()))
                if got != want:
                    return _error(403, "AccessDenied", f"Invalid according to Policy: Policy Condition failed: {name}")
    with calls.owner("local:s3-presigned-post"):  # the uploader's signed request, no role
        s3.put_object(
            Bucket=bucket,
            Key=fields["key"],
            Body=form["file"],
            ContentType=fields.get("Content-Type", "application/octet-stream"),
        )
    return _result(204, b"")
