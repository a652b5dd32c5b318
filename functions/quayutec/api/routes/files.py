"""Room files (design §8): a member declares an upload and gets a presigned S3 POST (files up to
25 MB go straight to S3; API Gateway's own limit is 10 MB), lists the room's files, reads one
(with a presigned download), and the uploader's company deletes one. The ingest function
(S3 event) extracts, chunks and indexes the file: status ``uploading`` → ``ready`` | ``failed``."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from quayutec import resources as R
from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.pages import fit
from quayutec.api.routes._params import Cursor, Limit, RoomId
from quayutec.api.schemas import Paged
from quayutec.logic.files import URL_EXPIRES_S
from quayutec.models import RoomFile

router = APIGatewayRouter()

FileId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$", description="A file id")]


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


class FileList(Paged):
    files: list[RoomFile]


class FileOut(BaseModel):
    file: RoomFile
    download_url: str | None = None


@router.post(
    "/rooms/<room_id>/files",
    status_code=201,
    tags=["files"],
    summary="Declare a file upload: a file id and a presigned S3 POST (files up to 25 MB)",
)
def add_file(room_id: RoomId, body: Annotated[FileIn, Body()]) -> FileUploadOut:
    f, post = services().files.declare(
        caller(), room_id, name=body.name, content_type=body.content_type, size=body.size
    )
    return FileUploadOut(
        file=f,
        upload=Upload(url=post["url"], fields=post["fields"], expires_in=URL_EXPIRES_S, max_bytes=R.MAX_UPLOAD_BYTES),
    )


@router.get("/rooms/<room_id>/files", tags=["files"], summary="The room's files (name, size, kind, status)")
def list_files(room_id: RoomId, limit: Limit = 50, cursor: Cursor = None) -> FileList:
    """In id order, at most `limit` files and about 1 MB of JSON a page (docs/design.md §14)."""
    page = fit(services().files.page(caller(), room_id, limit, cursor))
    return FileList(files=page.parts["files"], next_cursor=page.next_cursor)


@router.get("/rooms/<room_id>/files/<file_id>", tags=["files"], summary="A file and a presigned download URL")
def get_file(room_id: RoomId, file_id: FileId) -> FileOut:
    f, url = services().files.get(caller(), room_id, file_id)
    return FileOut(file=f, download_url=url)


@router.delete(
    "/rooms/<room_id>/files/<file_id>",
    tags=["files"],
    summary="Delete a file (the uploader's company); it leaves the room's index",
)
def delete_file(room_id: RoomId, file_id: FileId) -> FileOut:
    return FileOut(file=services().files.delete(caller(), room_id, file_id))
