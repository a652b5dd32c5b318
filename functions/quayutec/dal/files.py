"""Room files (design §8): their records in the room table, the uploaded objects and the room's
retrieval index objects in the files bucket.

Room table items (pk ``ROOM#{room}#FILES``):

* ``FILE#{file_id}`` — a :class:`~quayutec.models.RoomFile` (status ``uploading`` → ``ready`` |
  ``failed``)
* ``INDEX`` — the index version pointer: ``version`` (a number, +1 per new version) and ``key``
  (the version's object). Moved only by a conditional update on the version read, so two
  ingests in one room never lose each other's chunks: the loser re-reads and re-applies.

Files bucket keys: ``uploads/{room}/{file_id}`` (the upload, as sent) and
``index/{room}/{version:08d}-{nonce}`` (an index version: written once, never overwritten; a run
keeps reading the version it started with).
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from botocore.exceptions import ClientError

from quayutec import resources as R
from quayutec.dal import keys
from quayutec.dal.aws import dynamodb, error_code, paginate_query, put_new, s3, transient_errors, update_if
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
        with transient_errors():
            self.db.delete_item(TableName=self.table, Key=keys.file_key(room_id, file_id))

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
    ) -> bool:
        """``uploading`` → ``status`` once (False: already finished, or deleted meanwhile); with
        ``replacing`` (the ETag a finished file was ingested from), that file → ``status`` once.
        ``etag``: the ETag of the upload this ingest read."""
        names = {"#s": "status", "#r": "reason", "#z": "size"}
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
        if replacing is None:
            condition = "attribute_exists(pk) AND #s = :up"
            values[":up"] = "uploading"
        else:
            condition = "attribute_exists(pk) AND etag = :prev"
            values[":prev"] = replacing
        return update_if(
            self.db,
            TableName=self.table,
            Key=keys.file_key(room_id, file_id),
            UpdateExpression="SET " + ", ".join(sets) + ("" if reason else " REMOVE #r"),
            ConditionExpression=condition,
            ExpressionAttributeNames={
                k: v for k, v in names.items() if k == "#s" or k in " ".join(sets) or (k == "#r" and not reason)
            },
            ExpressionAttributeValues=values,
        )

    # ------------------------------------------------------------------ index pointer
    def index_pointer(self, room_id: str, consistent: bool = True) -> tuple[int, str | None]:
        """``(version, object key)`` of the room's current index; ``(0, None)`` before any.
        ``consistent=False`` for a run's retrieval (a version a moment old is as good)."""
        with transient_errors():
            item = self.db.get_item(
                TableName=self.table, Key=keys.index_pointer_key(room_id), ConsistentRead=consistent
            ).get("Item")
        if not item:
            return 0, None
        return int(item["version"]), str(item["key"])

    def advance_index(self, room_id: str, seen_version: int, key: str, chunks: int) -> bool:
        """Point the room at ``key`` as version ``seen_version + 1``, only if the version is
        still ``seen_version`` (False: another ingest moved it first)."""
        cond = "attribute_not_exists(pk)" if seen_version == 0 else "version = :seen"
        values: dict[str, Any] = {":v": seen_version + 1, ":k": key, ":c": chunks}
        if seen_version:
            values[":seen"] = seen_version
        return update_if(
            self.db,
            TableName=self.table,
            Key=keys.index_pointer_key(room_id),
            UpdateExpression="SET version = :v, #k = :k, chunks = :c",
            ConditionExpression=cond,
            ExpressionAttributeNames={"#k": "key"},
            ExpressionAttributeValues=values,
        )

    # ------------------------------------------------------------------ objects
    def new_index_key(self, room_id: str, version: int) -> str:
        return index_key(room_id, version)

    def put_index(self, key: str, blob: bytes) -> None:
        with transient_errors():
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=blob, ContentType="application/gzip")

    def get_index(self, key: str) -> bytes:
        with transient_errors():
            return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def head_upload(self, room_id: str, file_id: str) -> tuple[int, str] | None:
        """The uploaded object's real size (bytes) and ETag, None when it is not there."""
        try:
            with transient_errors():
                head = self.s3.head_object(Bucket=self.bucket, Key=upload_key(room_id, file_id))
                return int(head["ContentLength"]), str(head.get("ETag") or "")
        except ClientError as exc:
            if error_code(exc) in {"404", "NoSuchKey", "NotFound"}:
                return None
            raise

    def read_upload(self, room_id: str, file_id: str, limit: int) -> bytes:
        """At most ``limit`` bytes of the upload (a Range read: never more in memory)."""
        with transient_errors():
            body = self.s3.get_object(
                Bucket=self.bucket, Key=upload_key(room_id, file_id), Range=f"bytes=0-{limit - 1}"
            )["Body"]
            return body.read(limit)

    def delete_upload(self, room_id: str, file_id: str) -> None:
        with transient_errors():
            self.s3.delete_object(Bucket=self.bucket, Key=upload_key(room_id, file_id))


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
