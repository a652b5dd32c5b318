"""Room files (design §8): a member declares an upload and gets a presigned S3 POST (files up to
25 MB go straight to S3; API Gateway's own limit is 10 MB), lists the room's files, reads one
(with a presigned download), and the uploader's company deletes one. The ingest function
(S3 event) extracts, chunks and indexes the file: status ``uploading`` → ``ready`` | ``failed``."""

from __future__ import annotations

import os
from typing import Annotated, Any
from urllib.parse import quote

from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from quayutec import resources as R
from quayutec import seams
from quayutec.api.access import member_room, services
from quayutec.api.context import caller
from quayutec.api.errors import PayloadTooLarge
from quayutec.api.routes._params import RoomId
from quayutec.dal.files import upload_key
from quayutec.errors import Forbidden, InvalidInput, NotFound
from quayutec.logic import files as room_files
from quayutec.logic.extract import kind_of
from quayutec.models import RoomFile, iso

router = APIGatewayRouter()

FileId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$", description="A file id")]
#: How long a presigned upload or download URL is valid.
URL_EXPIRES_S = 900


#: A media type as RFC 6838 §4.2 names one (``type/subtype``), with optional parameters of
#: printable ASCII: never a line break or control character (it becomes a signed header).
MEDIA_TYPE = r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*( *;[ -~]*)?$"


class FileIn(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    name: str = Field(min_length=1, max_length=200, pattern=r"^[^/\\\x00-\x1f]+$")
    content_type: str = Field(
        min_length=1, max_length=100, pattern=MEDIA_TYPE, description="The file's media type, e.g. text/markdown"
    )
    size: StrictInt = Field(ge=1, description=f"bytes; at most {R.MAX_UPLOAD_BYTES}")  # never true/false


class Upload(BaseModel):
    url: str
    fields: dict[str, str]
    expires_in: int
    max_bytes: int


class FileUploadOut(BaseModel):
    file: RoomFile
    upload: Upload


class FileList(BaseModel):
    files: list[RoomFile]


class FileOut(BaseModel):
    file: RoomFile
    download_url: str | None = None


def _signer(observed: bool = True) -> Any:
    """The S3 client that signs the files bucket's URLs: the runtime's, or on ``quay dev`` one
    pointed at the dev server (FILES_ENDPOINT_URL), which serves the URLs locally. Unobserved
    for a presigned POST: botocore builds it on the CreateBucket operation model (so an observer
    would see a CreateBucket); the POST is announced as the PutObject it grants instead."""
    endpoint = getattr(services().deps.settings, "files_endpoint_url", None)
    import boto3
    from botocore.config import Config

    if endpoint:
        client = boto3.client(
            "s3", endpoint_url=endpoint, config=Config(signature_version="s3v4", s3={"addressing_style": "path"})
        )
    else:
        client = regional_s3(boto3.session.Session().region_name or os.environ.get("AWS_REGION") or "us-east-1")
    return seams.observe(client) if observed else client


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


def _now() -> str:
    return iso(services().deps.clock())


@router.post(
    "/rooms/<room_id>/files",
    status_code=201,
    tags=["files"],
    summary="Declare a file upload: a file id and a presigned S3 POST (files up to 25 MB)",
)
def add_file(room_id: RoomId, body: Annotated[FileIn, Body()]) -> FileUploadOut:
    who = caller()
    svc = services()
    member_room(svc, room_id, who)
    if body.size > R.MAX_UPLOAD_BYTES:
        raise PayloadTooLarge(
            f"body.size: {body.size} bytes is over the {R.MAX_UPLOAD_BYTES} byte (25 MB) limit for a room file"
        )
    if kind_of(body.name, body.content_type) is None:
        raise InvalidInput(
            f"content_type: {body.content_type!r} ({body.name!r}) is not a kind the room takes "
            "(plain text, Markdown, CSV, JSON, HTML, PDF)"
        )
    f = room_files.declare_upload(
        svc.deps,
        room_id,
        name=body.name,
        content_type=body.content_type,
        size=body.size,
        uploader=who.author(),
        at=_now(),
    )
    bucket, key = svc.deps.files.bucket, upload_key(room_id, f.id)
    post = _signer(observed=False).generate_presigned_post(
        Bucket=bucket,
        Key=key,
        Fields={"Content-Type": body.content_type},
        Conditions=[{"Content-Type": body.content_type}, ["content-length-range", 1, R.MAX_UPLOAD_BYTES]],
        ExpiresIn=URL_EXPIRES_S,
    )
    # Announce the action the signature grants (s3:PutObject on the key) to the call observers
    # (the IAM check), as a presigned GET is announced as its GetObject.
    seams.announce("s3", "PutObject", {"Bucket": bucket, "Key": key})
    return FileUploadOut(
        file=f,
        upload=Upload(url=post["url"], fields=post["fields"], expires_in=URL_EXPIRES_S, max_bytes=R.MAX_UPLOAD_BYTES),
    )


@router.get("/rooms/<room_id>/files", tags=["files"], summary="The room's files (name, size, kind, status)")
def list_files(room_id: RoomId) -> FileList:
    svc = services()
    member_room(svc, room_id, caller())
    now = svc.deps.clock()
    return FileList(files=[room_files.as_seen(f, now) for f in svc.deps.files.list_files(room_id)])


def attachment(name: str) -> str:
    """A ``Content-Disposition`` that saves the file under ``name`` (RFC 6266 §4.3: an ASCII
    ``filename`` fallback and the UTF-8 ``filename*``, RFC 8187)."""
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def _file(room_id: str, file_id: str) -> RoomFile:
    svc = services()
    member_room(svc, room_id, caller())
    f = svc.deps.files.get_file(room_id, file_id)
    if f is None:
        raise NotFound(f"file {file_id!r} is not in room {room_id!r}")
    return f


@router.get("/rooms/<room_id>/files/<file_id>", tags=["files"], summary="A file and a presigned download URL")
def get_file(room_id: RoomId, file_id: FileId) -> FileOut:
    f = _file(room_id, file_id)
    url = None
    if f.status != "uploading":  # stored status: an upload that never arrived has nothing to download
        # Served as a download, never rendered where the URL opens: an uploaded HTML file must
        # not run as a page (S3 applies response-* overrides on signed requests, GetObject API).
        url = _signer().generate_presigned_url(
            "get_object",
            Params={
                "Bucket": services().deps.files.bucket,
                "Key": upload_key(room_id, file_id),
                "ResponseContentDisposition": attachment(f.name),
            },
            ExpiresIn=URL_EXPIRES_S,
        )
    return FileOut(file=room_files.as_seen(f, services().deps.clock()), download_url=url)


@router.delete(
    "/rooms/<room_id>/files/<file_id>",
    tags=["files"],
    summary="Delete a file (the uploader's company); it leaves the room's index",
)
def delete_file(room_id: RoomId, file_id: FileId) -> FileOut:
    who = caller()
    f = _file(room_id, file_id)
    if f.uploader.company != who.require_company():
        raise Forbidden(f"file {file_id!r} was uploaded by another company: only it may delete the file")
    files = services().deps.files
    files.delete_file(room_id, file_id)
    files.delete_upload(room_id, file_id)  # its S3 event takes the chunks out of the index
    return FileOut(file=f)
