"""Room files (design §8): their records in the room table, the uploaded objects and the room's
retrieval index objects in the files bucket.

Room table items (pk ``ROOM#{room}#FILES``):

* ``FILE#{file_id}`` — a :class:`~quayutec.models.RoomFile` (status ``uploading`` → ``ready`` |
  ``failed``)
* ``INDEX`` — the index version pointer: ``version`` (a number, +1 per new version) and ``key``
  (the version's object). Moved only by a conditional update on the version read, so two
  ingests in one room never lose each other's chunks: the loser re-reads and re-applies. Its
  ``key`` names the object with its S3 version (:func:`index_ref`); ``hidden``: the ids of
  deleted files whose chunks that version still holds (retrieval skips them).

Files bucket keys (the bucket is versioned): ``uploads/{room}/{file_id}`` (the upload, as sent;
each upload through the form is a version of the key, and the file record names the version it
was ingested from) and ``index/{room}/{version:08d}-{nonce}`` (an index version: written once,
never overwritten; a run keeps reading the version it started with).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from quayutec import resources as R
from quayutec.dal import keys
from quayutec.dal.aws import (
    Refused,
    dynamodb,
    error_code,
    paginate_query,
    put_new,
    s3,
    transact_refusals,
    transient_errors,
    update_if,
)
from quayutec.dal.pages import KeySpec, Page, decode_cursor, query_rows
from quayutec.models import RoomFile, now_iso
from quayutec.seams import observe


def upload_key(room_id: str, file_id: str) -> str:
    return f"{R.UPLOADS_PREFIX}{room_id}/{file_id}"


def index_key(room_id: str, version: int) -> str:
    """A new S3 key for version ``version`` of the room's index (one immutable object each)."""
    return f"{R.INDEX_PREFIX}{room_id}/{version:08d}-{secrets.token_hex(6)}"


def parse_upload_key(key: str) -> tuple[str, str] | None:
    """``(room_id, file_id)`` of an upload key, None for any other key."""
    if not key.startswith(R.UPLOADS_PREFIX):
        return None
    parts = key[len(R.UPLOADS_PREFIX) :].split("/")
    return (parts[0], parts[1]) if len(parts) == 2 and all(parts) else None


#: S3 error codes of an object (or version) that is not there: with s3:ListBucket granted on the
#: prefix, a missing key answers 404 NoSuchKey (HeadObject: a bare 404), a deleted version
#: NoSuchVersion (S3 API reference, GetObject/HeadObject).
MISSING_CODES = frozenset({"404", "NoSuchKey", "NotFound", "NoSuchVersion"})
#: S3 error codes of a request the role may not make: never read as "not there".
DENIED_CODES = frozenset({"403", "AccessDenied", "Forbidden"})


class UploadDenied(RuntimeError):
    """S3 refused to read an upload (403): the role lacks a grant. Never taken for a missing
    object (the ingest is retried, then its event goes to the dead-letter queue)."""


@dataclass(frozen=True)
class UploadHead:
    """An upload's current version: its real size (bytes), ETag and version id (``None`` in an
    unversioned bucket)."""

    size: int
    etag: str
    version_id: str | None


#: ``(version, object reference, hidden file ids)`` of a room's index pointer.
IndexView = tuple[int, str | None, frozenset[str]]


def pointer_of(item: dict[str, Any] | None) -> IndexView:
    """:data:`IndexView` of the pointer item (``(0, None, {})`` when absent or never advanced)."""
    if not item:
        return 0, None, frozenset()
    hidden = frozenset(str(h) for h in item.get("hidden") or ())
    if "version" not in item:
        return 0, None, hidden
    return int(item["version"]), str(item["key"]), hidden


def _strip(item: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (int(v) if k in {"size", "chunks"} else v)
        for k, v in item.items()
        if k not in {"pk", "sk", "type", "gsi4pk", "gsi4sk"}
    }


class FileStore:
    def __init__(self, table: str, bucket: str, db: Any | None = None, client: Any | None = None) -> None:
        self.table = table
        self.bucket = bucket
        self._db = db
        self._client = client

    @property
    def db(self) -> Any:
        return self._db or dynamodb()

    @property
    def s3(self) -> Any:
        return self._client or s3()

    # ------------------------------------------------------------------ file records
    def put_file(self, f: RoomFile) -> bool:
        """Record a new file once (False: that id exists)."""
        item = {
            **keys.file_key(f.room_id, f.id),
            "type": "room_file",
            **f.model_dump(mode="json", exclude_none=True),
            "gsi4pk": keys.changes_pk(f.room_id, "files"),
            "gsi4sk": keys.change_sk(f.created_at, f.id),
        }
        return put_new(self.db, self.table, item)

    def get_file(self, room_id: str, file_id: str) -> RoomFile | None:
        with transient_errors():
            item = self.db.get_item(TableName=self.table, Key=keys.file_key(room_id, file_id), ConsistentRead=True).get(
                "Item"
            )
        return RoomFile.model_validate(_strip(item)) if item else None

    def list_files(self, room_id: str) -> list[RoomFile]:
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :f)",
            ExpressionAttributeValues={":pk": keys.files_pk(room_id), ":f": keys.FILE_PREFIX},
        )
        return sorted((RoomFile.model_validate(_strip(i)) for i in items), key=lambda f: (f.created_at, f.id))

    def files_page(self, room_id: str, limit: int, cursor: str | None = None) -> Page:
        """One page of the room's file records in id order (part ``files``), from ``cursor`` on:
        one bounded query of the room's ``FILE#`` range (design §14). Raises InvalidInput (a
        cursor this listing did not hand out), TransientError."""
        listing = f"files:{room_id}"
        spec = KeySpec({"pk": keys.files_pk(room_id)}, {"sk": keys.FILE_PREFIX})
        start = decode_cursor(cursor, listing, {"files": spec})["files"]
        query = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :f)",
            "ExpressionAttributeValues": {":pk": keys.files_pk(room_id), ":f": keys.FILE_PREFIX},
        }
        rows = query_rows(self.db, query, limit, start, ("pk", "sk"))
        return Page(listing, {"files": rows.map(lambda i: RoomFile.model_validate(_strip(i)))})

    def delete_file(self, room_id: str, file_id: str) -> None:
        """Delete the file's record and hide its chunks from the room's index pointer in one
        transaction (``hidden``: file ids whose chunks retrieval skips until an index version
        without them is written, design §8), so agents stop reading a file the moment people no
        longer see it. A tombstone (:func:`quayutec.dal.keys.file_gone_key`) takes the file's
        place in the room's changes feed in the same transaction, so a page polling the changes
        learns of the delete (design §9)."""
        gone = {
            **keys.file_gone_key(room_id, file_id),
            "type": "file_deleted",
            "id": file_id,
            "room_id": room_id,
            "gsi4pk": keys.changes_pk(room_id, "files"),
            "gsi4sk": keys.change_sk(now_iso(), file_id),
        }
        transact_refusals(
            self.db,
            [
                {"Delete": {"TableName": self.table, "Key": keys.file_key(room_id, file_id)}},
                {"Put": {"TableName": self.table, "Item": gone}},
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": keys.index_pointer_key(room_id),
                        "UpdateExpression": "ADD #hid :h",
                        "ExpressionAttributeNames": {"#hid": "hidden"},  # a reserved word
                        "ExpressionAttributeValues": {":h": {file_id}},
                    }
                },
            ],
        )

    def unhide(self, room_id: str, file_id: str) -> None:
        """Forget a hidden file id whose chunks no index version holds any more."""
        update_if(
            self.db,
            TableName=self.table,
            Key=keys.index_pointer_key(room_id),
            UpdateExpression="DELETE #hid :h",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#hid": "hidden"},
            ExpressionAttributeValues={":h": {file_id}},
        )

    def finish_file(
        self,
        room_id: str,
        file_id: str,
        *,
        status: str,
        reason: str | None,
        chunks: int,
        size: int | None,
        at: str,
        etag: str | None = None,
        replacing: str | None = None,
        version_id: str | None = None,
    ) -> bool:
        """``uploading`` → ``status`` once (False: already finished, or deleted meanwhile); with
        ``replacing`` (the upload a finished file was ingested from: :func:`upload_id`), that file
        → ``status`` once. ``etag``, ``version_id``: the upload this ingest read."""
        return update_if(
            self.db,
            **self.finish_update(
                room_id,
                file_id,
                status=status,
                reason=reason,
                chunks=chunks,
                size=size,
                at=at,
                etag=etag,
                replacing=replacing,
                version_id=version_id,
            ),
        )

    def finish_update(
        self,
        room_id: str,
        file_id: str,
        *,
        status: str,
        reason: str | None,
        chunks: int,
        size: int | None,
        at: str,
        etag: str | None = None,
        replacing: str | None = None,
        version_id: str | None = None,
    ) -> dict[str, Any]:
        """The conditional ``UpdateItem`` parameters of :meth:`finish_file` (also an entry of
        :meth:`commit_ingest`'s transaction)."""
        names = {"#s": "status", "#r": "reason", "#z": "size", "#v": "version_id"}
        # gsi4sk: the changes feed (design §14); the time of this write, which ``at`` may precede
        values: dict[str, Any] = {":s": status, ":c": chunks, ":at": at, ":chg": keys.change_sk(now_iso(), file_id)}
        sets = ["#s = :s", "chunks = :c", "ingested_at = :at", "gsi4sk = :chg"]
        if reason:
            sets.append("#r = :r")
            values[":r"] = reason
        if size is not None:
            sets.append("#z = :z")
            values[":z"] = size
        if etag is not None:
            sets.append("etag = :e")
            values[":e"] = etag
        if version_id is not None:
            sets.append("#v = :vid")
            values[":vid"] = version_id
        if replacing is None:
            condition = "attribute_exists(pk) AND #s = :up"
            values[":up"] = "uploading"
        elif replacing.startswith(_ETAG_ID):  # a file ingested before versioning: by its ETag
            condition = "attribute_exists(pk) AND etag = :prev AND attribute_not_exists(#v)"
            values[":prev"] = replacing[len(_ETAG_ID) :]
        else:
            condition = "attribute_exists(pk) AND #v = :prev"
            values[":prev"] = replacing
        text = " ".join(sets) + " " + condition
        return {
            "TableName": self.table,
            "Key": keys.file_key(room_id, file_id),
            "UpdateExpression": "SET " + ", ".join(sets) + ("" if reason else " REMOVE #r"),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {k: v for k, v in names.items() if k in text or (k == "#r" and not reason)},
            "ExpressionAttributeValues": values,
        }

    # ------------------------------------------------------------------ index pointer
    def index_pointer(self, room_id: str, consistent: bool = True) -> tuple[int, str | None]:
        """``(version, object reference)`` of the room's current index; ``(0, None)`` before any.
        ``consistent=False`` for a run's retrieval (a version a moment old is as good)."""
        version, ref, _ = self.index_view(room_id, consistent)
        return version, ref

    def index_view(self, room_id: str, consistent: bool = True) -> IndexView:
        """:meth:`index_pointer` and the file ids its version still holds but retrieval hides
        (deleted files, :meth:`delete_file`)."""
        with transient_errors():
            item = self.db.get_item(
                TableName=self.table, Key=keys.index_pointer_key(room_id), ConsistentRead=consistent
            ).get("Item")
        return pointer_of(item)

    def advance_index(self, room_id: str, seen_version: int, key: str, chunks: int, unhide: str | None = None) -> bool:
        """Point the room at ``key`` as version ``seen_version + 1``, only if the version is
        still ``seen_version`` (False: another ingest moved it first); ``unhide``: a hidden file
        id the new version no longer holds."""
        return update_if(self.db, **self._advance(room_id, seen_version, key, chunks, unhide))

    def _advance(
        self, room_id: str, seen_version: int, key: str, chunks: int, unhide: str | None = None
    ) -> dict[str, Any]:
        # the pointer item may exist without a version: a delete hid a file before any index
        cond = "attribute_not_exists(version)" if seen_version == 0 else "version = :seen"
        values: dict[str, Any] = {":v": seen_version + 1, ":k": key, ":c": chunks}
        if seen_version:
            values[":seen"] = seen_version
        if unhide:
            values[":h"] = {unhide}
        return {
            "TableName": self.table,
            "Key": keys.index_pointer_key(room_id),
            "UpdateExpression": "SET version = :v, #k = :k, chunks = :c" + (" DELETE #hid :h" if unhide else ""),
            "ConditionExpression": cond,
            "ExpressionAttributeNames": {"#k": "key", **({"#hid": "hidden"} if unhide else {})},
            "ExpressionAttributeValues": values,
        }

    def commit_ingest(
        self, room_id: str, seen_version: int, key: str, chunks: int, finish: dict[str, Any]
    ) -> tuple[bool, bool] | None:
        """Move the index pointer to ``key`` (as :meth:`advance_index`) and finish the file
        (``finish``: :meth:`finish_update`'s parameters) in one ``TransactWriteItems``: both or
        neither (design §8). ``None`` when both landed; else ``(pointer moved, file changed)``,
        whose condition failed (nothing written). Raises TransientError on throttling or a
        conflicting transaction."""
        refused: list[Refused | None] | None = transact_refusals(
            self.db,
            [{"Update": self._advance(room_id, seen_version, key, chunks)}, {"Update": finish}],
        )
        if refused is None:
            return None
        return refused[0] is not None, refused[1] is not None

    # ------------------------------------------------------------------ objects
    def new_index_key(self, room_id: str, version: int) -> str:
        return index_key(room_id, version)

    def put_index(self, key: str, blob: bytes) -> str | None:
        """Write an index object; its S3 version id (``None`` unversioned)."""
        with transient_errors():
            out = self.s3.put_object(Bucket=self.bucket, Key=key, Body=blob, ContentType="application/gzip")
        return out.get("VersionId")

    def delete_index(self, key: str, version_id: str | None) -> None:
        """Delete an index object this ingest wrote and did not commit (its version: the bucket is
        versioned, a plain delete would only hide it)."""
        with transient_errors():
            self.s3.delete_object(Bucket=self.bucket, Key=key, **({"VersionId": version_id} if version_id else {}))

    def get_index(self, ref: str) -> bytes:
        """An index version's object by its reference (:func:`index_ref`: the key and its S3
        version, so it stays readable after it is retired)."""
        key, version = split_index_ref(ref)
        with transient_errors():
            return self.s3.get_object(Bucket=self.bucket, Key=key, **({"VersionId": version} if version else {}))[
                "Body"
            ].read()

    def retire_index(self, ref: str) -> None:
        """Retire a superseded index version: a delete marker hides its key, its version stays
        readable by :func:`index_ref` until the bucket's lifecycle expires noncurrent versions (a
        day: longer than any run holds a pointer, design §8)."""
        key, _ = split_index_ref(ref)
        with transient_errors():
            self.s3.delete_object(Bucket=self.bucket, Key=key)

    def head_upload(self, room_id: str, file_id: str) -> UploadHead | None:
        """The upload's current version (:class:`UploadHead`); None when it is not there (404:
        never uploaded, deleted). Raises UploadDenied when S3 refuses (403), never None."""
        try:
            with transient_errors():
                head = self.s3.head_object(Bucket=self.bucket, Key=upload_key(room_id, file_id))
        except ClientError as exc:
            if error_code(exc) in MISSING_CODES:
                return None
            if error_code(exc) in DENIED_CODES:
                raise UploadDenied(
                    f"s3:GetObject on {upload_key(room_id, file_id)} was denied (403): "
                    "check the role's s3:GetObject and s3:ListBucket on uploads/"
                ) from exc
            raise
        version = head.get("VersionId")
        return UploadHead(
            int(head["ContentLength"]), str(head.get("ETag") or ""), None if version in (None, "null") else str(version)
        )

    def read_upload(self, room_id: str, file_id: str, limit: int, version_id: str | None = None) -> bytes | None:
        """At most ``limit`` bytes of the upload's version ``version_id`` (the current one when
        None; a Range read: never more in memory); None when that version is gone."""
        extra = {"VersionId": version_id} if version_id else {}
        try:
            with transient_errors():
                body = self.s3.get_object(
                    Bucket=self.bucket, Key=upload_key(room_id, file_id), Range=f"bytes=0-{limit - 1}", **extra
                )["Body"]
                return body.read(limit)
        except ClientError as exc:
            if error_code(exc) in MISSING_CODES:
                return None
            raise

    def delete_upload(self, room_id: str, file_id: str) -> int:
        """Delete every version of the upload (and its delete markers): nothing of it stays
        readable, by key or by version (a download URL names one). Returns how many went."""
        key = upload_key(room_id, file_id)
        gone = 0
        with transient_errors():
            pages = self.s3.get_paginator("list_object_versions").paginate(Bucket=self.bucket, Prefix=key)
            for page in pages:
                for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]:
                    if v["Key"] != key:  # uploads/{room}/{file}x: another file's key
                        continue
                    self.s3.delete_object(Bucket=self.bucket, Key=key, VersionId=v["VersionId"])
                    gone += 1
        return gone


def index_ref(key: str, version_id: str | None) -> str:
    """What the index pointer names: the object's key and, in the versioned bucket, its version
    (``{key}?versionId={version}``)."""
    return f"{key}?versionId={version_id}" if version_id else key


def split_index_ref(ref: str) -> tuple[str, str | None]:
    """``(key, version id or None)`` of an :func:`index_ref`."""
    key, _, version = ref.partition("?versionId=")
    return key, version or None


#: :func:`upload_id` of an upload without a version id (an unversioned bucket): its ETag.
_ETAG_ID = "etag:"


def upload_id(version_id: str | None, etag: str | None) -> str:
    """What tells one upload to a file's key from another: its S3 version id, or ``etag:<ETag>``
    where there is none (a file ingested before the bucket was versioned)."""
    return version_id if version_id else f"{_ETAG_ID}{etag or ''}"


def signer(endpoint: str | None, observed: bool = True) -> Any:
    """The S3 client that signs the files bucket's URLs: the runtime's, or on ``quay dev`` one
    pointed at the dev server (``endpoint``: FILES_ENDPOINT_URL), which serves the URLs locally.
    Unobserved for a presigned POST: botocore builds it on the CreateBucket operation model (so an
    observer would see a CreateBucket); the POST is announced as the PutObject it grants instead."""
    import boto3
    from botocore.config import Config

    if endpoint:
        client = boto3.client(
            "s3", endpoint_url=endpoint, config=Config(signature_version="s3v4", s3={"addressing_style": "path"})
        )
    else:
        client = regional_s3(boto3.session.Session().region_name or os.environ.get("AWS_REGION") or "us-east-1")
    return observe(client) if observed else client


def regional_s3(region: str) -> Any:
    """An S3 client that signs for the bucket's regional virtual-hosted origin,
    ``https://{bucket}.s3.{region}.amazonaws.com`` (the origin the room page's connect-src names:
    quayutec.api.routes.page.upload_origins). Left to itself boto3 signs the global
    ``https://{bucket}.s3.amazonaws.com``, which the page's policy would block (and which a new
    bucket outside us-east-1 answers with a redirect).

    Signed with SigV4 (``s3v4``): given an endpoint URL, botocore presigns with S3's legacy SigV2
    (``AWSAccessKeyId``/``Signature``/``Expires``), which S3 refuses for buckets created since
    June 2020 and which expires with the role's session, not at ``ExpiresIn`` (Amazon S3 User
    Guide, "Authenticating Requests (AWS Signature Version 4)")."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        region_name=region,
        endpoint_url=f"https://s3.{region}.amazonaws.com",
        config=Config(signature_version="s3v4", s3={"addressing_style": "virtual"}),
    )
