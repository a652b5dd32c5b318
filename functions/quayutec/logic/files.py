"""Room files (design §8): declaring an upload, ingesting it into the room's retrieval index,
removing it, and reading the passages a run sees.

Index updates: read the pointer (version N) and its manifest, write the file's own segment (and
any tier merge or rewrite it causes, :func:`quayutec.logic.segments.next_version`) and version
N+1's manifest as new objects, then move the pointer N → N+1 conditionally. When another ingest
moved it first, delete every object written and start over from the version that won: nobody's
chunks are lost, and a run that read version N keeps reading version N's objects (retired once
superseded: a delete marker, their S3 versions readable a day more).
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any
from urllib.parse import quote

from quayutec import resources as R
from quayutec.dal.files import IndexView, UploadHead, index_ref, signer, split_index_ref, upload_id, upload_key
from quayutec.dal.pages import Page
from quayutec.deps import Deps
from quayutec.errors import Forbidden, InvalidInput, NotFound, PayloadTooLarge
from quayutec.logic import retrieval
from quayutec.logic import segments as seg
from quayutec.logic.access import Principal, member_room
from quayutec.logic.extract import Unreadable, extract, kind_of
from quayutec.models import Author, FileChunk, RoomFile, iso, parse_iso
from quayutec.seams import announce

#: Attempts at moving the index pointer before giving up (the event is redelivered).
INDEX_ATTEMPTS = 8


class IndexConflict(RuntimeError):
    """The index pointer kept moving under this ingest; the event is retried."""


def new_file_id() -> str:
    return "f-" + secrets.token_hex(8)


def declare_upload(
    deps: Any,
    room_id: str,
    *,
    name: str,
    content_type: str,
    size: int,
    uploader: Author,
    at: str,
    file_id: str | None = None,
) -> RoomFile:
    """Record a file ``uploading`` (kind from its type or name). Raises ValueError for a kind
    not accepted or a size over the limit (checked by the caller first, for its own status)."""
    kind = kind_of(name, content_type)
    if kind is None:
        raise ValueError(
            f"{name!r} ({content_type}): not a kind the room takes (plain text, Markdown, CSV, JSON, HTML, PDF)"
        )
    if size > R.MAX_UPLOAD_BYTES:
        raise ValueError(f"{size} bytes is over the {R.MAX_UPLOAD_BYTES} byte limit")
    f = RoomFile(
        id=file_id or new_file_id(),
        room_id=room_id,
        name=name,
        content_type=content_type,
        size=size,
        kind=kind,
        uploader=uploader,
        created_at=at,
    )
    if not deps.files.put_file(f):
        raise RuntimeError(f"file id {f.id} collision")
    return f


#: How long after its declaration a file may still be ``uploading``: derived from the form's
#: life and the ingest queue's redeliveries (:data:`quayutec.resources.UPLOAD_GRACE_S`). Past it,
#: the upload never arrived, and the file is shown ``failed`` (:func:`as_seen`).
UPLOAD_GRACE_S = R.UPLOAD_GRACE_S


def as_seen(f: RoomFile, now: datetime) -> RoomFile:
    """``f`` as people see it (design §8: ``uploading`` → ``ready`` | ``failed``): a declared
    upload that never arrived, past :data:`UPLOAD_GRACE_S`, reads ``failed`` with the reason,
    rather than ``uploading`` for good (``now``: an aware UTC time)."""
    if f.status != "uploading" or (now - parse_iso(f.created_at)).total_seconds() <= UPLOAD_GRACE_S:
        return f
    return f.model_copy(update={"status": "failed", "reason": "the upload never arrived (its form expired)"})


# ----------------------------------------------------------------------------- ingest
def ingest(deps: Any, room_id: str, file_id: str, at: str) -> str:
    """Ingest an uploaded file once: ``ready`` with its chunks in the room's index, or
    ``failed`` with a reason. Returns what happened (``ready``, ``failed: ...``, ``skipped``,
    ``discarded``). Design §8.

    What agents read is what people download, at every moment:

    * the upload read is the key's current version, and the file record names it
      (``version_id``); the download names that version;
    * the index pointer and the file record move in one conditional transaction: an ingest that
      loses it deletes the index objects it wrote and starts over from what won (a file record
      that changed: a later upload through the same form, still current, is ingested in place of
      the one before; a superseded or deleted one is skipped);
    * an object whose file record is gone (a form used after the file was deleted) is deleted,
      every version, and nothing of it reaches the index (``discarded``);
    * a missing object (404) is skipped; a denied one (403) raises UploadDenied (retried)."""
    files = deps.files
    head = files.head_upload(room_id, file_id)  # raises UploadDenied on a 403
    if head is None:
        return "skipped"  # removed before it was read
    meta = files.get_file(room_id, file_id)
    if meta is None:  # deleted (or never declared): what the form stored must not stay readable
        files.delete_upload(room_id, file_id)
        return "discarded"
    this = upload_id(head.version_id, head.etag)
    if meta.status != "uploading" and _ingested_from(meta) == this:
        return "skipped"  # a redelivered event of a finished ingest
    if head.size > R.MAX_UPLOAD_BYTES:
        return _finish(
            deps,
            meta,
            head,
            at,
            chunks=None,
            reason=f"too large ({head.size} bytes; the limit is {R.MAX_UPLOAD_BYTES})",
        )
    data = files.read_upload(room_id, file_id, R.MAX_UPLOAD_BYTES + 1, version_id=head.version_id)
    if data is None:
        return "skipped"  # that version went (deleted, or the file with it) before it was read
    try:
        parts = extract(meta.kind, data)
    except Unreadable as exc:
        return _finish(deps, meta, head, at, chunks=None, reason=str(exc))
    del data
    chunks: list[FileChunk] = []
    for page, text in parts:
        chunks += retrieval.chunk_text(room_id, meta.name, text, file_id=file_id, page=page, start_index=len(chunks))
    if not chunks:
        return _finish(deps, meta, head, at, chunks=None, reason="no text")
    segment = retrieval.build_segment(chunks)  # the file's own segment: memory bounded by the file
    del chunks, parts
    return _finish(deps, meta, head, at, chunks=segment, reason=None)


def _ingested_from(f: RoomFile) -> str:
    return upload_id(f.version_id, f.etag)


def _finish(
    deps: Any, meta: RoomFile, head: UploadHead, at: str, *, chunks: seg.Segment | None, reason: str | None
) -> str:
    """Commit an ingest's outcome (``chunks``: the file's segment, ready; None: failed with
    ``reason``): the file record, and the room's index when it changes (the file's chunks in or
    out), in one transaction; retried from what won when either moved meanwhile."""
    files = deps.files
    room_id, file_id = meta.room_id, meta.id
    this = upload_id(head.version_id, head.etag)
    limit = deps.settings.max_file_chunks
    for _ in range(INDEX_ATTEMPTS):
        replacing = _ingested_from(meta) if meta.status != "uploading" else None
        had_chunks = meta.status == "ready"
        status = "ready" if chunks is not None else "failed"
        finish: dict[str, Any] = {
            "status": status,
            "reason": reason,
            "chunks": chunks.n if chunks is not None else 0,
            "size": head.size,
            "at": at,
            "etag": head.etag,
            "replacing": replacing,
            "version_id": head.version_id,
        }
        if chunks is None and not had_chunks:  # failed, and nothing of the file in the index
            if files.finish_file(room_id, file_id, **finish):
                return f"failed: {reason}"
        else:
            version, key = files.index_pointer(room_id)
            current = _current(files, key, file_id)
            total = current.chunks - current.chunks_of(file_id) + (chunks.n if chunks is not None else 0)
            if total > limit:
                reason = f"too large: the room's index would hold {total} chunks (limit {limit})"
                chunks = None
                continue  # failed instead (its earlier chunks, if any, go out)
            nxt = seg.next_version(current.manifest, [*current.adds, *([chunks] if chunks else [])], file_id,
                                   current.read, _writer(files, room_id))  # fmt: skip
            new_key = files.new_index_key(room_id, version + 1)
            new_version = files.put_index(new_key, nxt.manifest.dump())
            refused = files.commit_ingest(
                room_id,
                version,
                index_ref(new_key, new_version),
                nxt.manifest.chunks,
                files.finish_update(room_id, file_id, **finish),
            )
            _settle(files, key, nxt, committed=refused is None, manifest=(new_key, new_version))
            if refused is None:
                return "ready" if chunks is not None else f"failed: {reason}"
            if not refused[1]:
                continue  # only the pointer moved (another file's ingest): merge again
        # the file record changed under this ingest: start over from what won
        now = files.get_file(room_id, file_id)
        if now is None:
            return "skipped"  # deleted meanwhile (the delete takes its chunks out)
        current_head = files.head_upload(room_id, file_id)
        if current_head is None or upload_id(current_head.version_id, current_head.etag) != this:
            return "skipped"  # a later upload superseded this one: its own event ingests it
        if now.status != "uploading" and _ingested_from(now) == this:
            return "skipped"  # another delivery of this event finished it
        meta = now
    raise IndexConflict(f"room {room_id}: the index moved {INDEX_ATTEMPTS} times under this ingest")


def remove(deps: Any, room_id: str, file_id: str) -> None:
    """Take a deleted file's chunks out of the room's index (runs reading an older version keep
    it). A file that still exists keeps its chunks: the object removed was one of its versions
    (never the one it was ingested from, which only its delete removes)."""
    if deps.files.get_file(room_id, file_id) is not None:
        return
    update_index(deps, room_id, add=[], remove=file_id, limit=deps.settings.max_file_chunks, unhide=True)


class TooManyChunks(Unreadable):
    pass


def update_index(
    deps: Any, room_id: str, *, add: list[FileChunk], remove: str | None, limit: int, unhide: bool = False
) -> int:
    """Write the room's next index version with ``add`` and without ``remove``'s chunks;
    returns the version written (the current one when nothing changed). An attempt that loses
    the pointer deletes every object it wrote. ``unhide``: ``remove`` is a deleted file, no longer
    hidden once no version holds it."""
    files = deps.files
    adding = retrieval.build_segment(add) if add else None
    for _ in range(INDEX_ATTEMPTS):
        version, key = files.index_pointer(room_id)
        current = _current(files, key, remove)
        out = current.chunks_of(remove) if remove else 0
        if adding is None and not out:
            if remove and unhide:
                files.unhide(room_id, remove)
            return version  # nothing to take out: no new version
        total = current.chunks - out + len(add)
        if total > limit:
            raise TooManyChunks(f"too large: the room's index would hold {total} chunks (limit {limit})")
        nxt = seg.next_version(current.manifest, [*current.adds, *([adding] if adding else [])], remove,
                               current.read, _writer(files, room_id))  # fmt: skip
        new_key = files.new_index_key(room_id, version + 1)
        new_version = files.put_index(new_key, nxt.manifest.dump())
        moved = files.advance_index(
            room_id, version, index_ref(new_key, new_version), nxt.manifest.chunks, unhide=remove if unhide else None
        )
        _settle(files, key, nxt, committed=moved, manifest=(new_key, new_version))
        if moved:
            return version + 1
    raise IndexConflict(f"room {room_id}: the index moved {INDEX_ATTEMPTS} times under this ingest")


class _Current:
    """The room's current index version as an ingest starts from it: its manifest (segments as
    named), and for a format-1 index (one ``bm25s`` index over the room, before segments) no
    segment yet but its files' chunks as segments to add (``adds``, the given file left out:
    converted once, in memory of the room's size)."""

    def __init__(self, files: Any, manifest: seg.Manifest, adds: list[seg.Segment]) -> None:
        self.files = files
        self.manifest = manifest
        self.adds = adds

    @property
    def chunks(self) -> int:
        return self.manifest.chunks + sum(a.n for a in self.adds) + self.legacy_dropped

    legacy_dropped = 0

    def chunks_of(self, file_id: str | None) -> int:
        """The chunks ``file_id`` has in this version."""
        if file_id is None:
            return 0
        holder = self.manifest.holding(file_id)
        return holder.files[file_id] if holder else self.legacy_dropped

    def read(self, ref: str) -> seg.Segment:
        return seg.load(self.files.get_index(ref))


def _current(files: Any, key: str | None, file_id: str | None) -> _Current:
    if key is None:
        return _Current(files, seg.Manifest(), [])
    blob = files.get_index(key)
    if seg.is_manifest(blob):
        return _Current(files, seg.load_manifest(blob), [])
    chunks = retrieval.chunks_of(blob)  # format 1: converted to segments, one per file
    del blob
    by_file: dict[str, list[FileChunk]] = {}
    for c in chunks:
        by_file.setdefault(c.file_id, []).append(c)
    del chunks
    out = _Current(files, seg.Manifest(), [retrieval.build_segment(cs) for f, cs in by_file.items() if f != file_id])
    out.legacy_dropped = len(by_file.get(file_id or "", []))
    return out


def _writer(files: Any, room_id: str) -> Any:
    def write(segment: seg.Segment) -> str:
        key = files.new_segment_key(room_id)
        return index_ref(key, files.put_index(key, seg.dump(segment)))

    return write


def _settle(
    files: Any, old: str | None, nxt: seg.NextVersion, *, committed: bool, manifest: tuple[str, str | None]
) -> None:
    """After the pointer's conditional write: committed, retire what the new version superseded
    (the old manifest, the segments merged or rewritten: readable by their S3 versions for a day
    more, design §8) and delete what this ingest wrote but no manifest names; lost, delete every
    object this ingest wrote (by version): nothing of it stays in what agents read."""
    drop = nxt.unnamed() if committed else [*nxt.wrote, index_ref(*manifest)]
    for ref in drop:
        files.delete_index(*split_index_ref(ref))
    if committed:
        for ref in [*([old] if old else []), *nxt.superseded]:
            files.retire_index(ref)


# ----------------------------------------------------------------------------- runs
def passages(
    deps: Any, room_id: str, query: str, k: int, pointer: IndexView | None = None
) -> tuple[int, list[FileChunk]]:
    """The room's index version and its top ``k`` passages for ``query``, BM25 over the whole
    room: one pointer read (none when the caller read ``pointer``, ``(version, object key)``,
    with its other reads), then the version's manifest and each of its segments (at most
    :data:`quayutec.logic.segments.MAX_SEGMENTS`) unless this Lambda holds them already (a cache
    bounded in bytes, :data:`quayutec.logic.retrieval.INDEX_CACHE_BYTES`; a segment that a newer
    version still names stays a hit)."""
    if k <= 0:
        return 0, []
    version, key, hidden = pointer if pointer is not None else deps.files.index_view(room_id, consistent=False)
    if key is None:
        return version, []
    index: Any = _cached(deps, room_id, key, top=True)
    if isinstance(index, seg.Manifest):
        index = retrieval.SegmentedIndex([_cached(deps, room_id, s.ref) for s in index.segments])
    return version, index.top(query, k, hidden)  # a deleted file's chunks: hidden at once


def version_chunks(files: Any, ref: str) -> list[FileChunk]:
    """Every chunk of the index version ``ref`` names (a manifest: its segments' chunks in order;
    a format-1 index: its chunks), read without the cache: tests and tools."""
    blob = files.get_index(ref)
    if not seg.is_manifest(blob):
        return retrieval.chunks_of(blob)
    return [c for s in seg.load_manifest(blob).segments for c in seg.load(files.get_index(s.ref)).chunks()]


def version_objects(files: Any, ref: str) -> list[str]:
    """The object references of the index version ``ref`` names: the manifest (or format-1
    index) and its segments."""
    blob = files.get_index(ref)
    return [ref, *([s.ref for s in seg.load_manifest(blob).segments] if seg.is_manifest(blob) else [])]


def _cached(deps: Any, room_id: str, ref: str, top: bool = False) -> Any:
    """An index object by reference from the warm cache, else read and kept: with ``top``, the
    pointer's object (a manifest, or a format-1 index); else a segment."""
    got = retrieval.CACHE.get(room_id, ref)
    if got is None:
        blob = deps.files.get_index(ref)
        if not top:
            got = seg.load(blob)
        elif seg.is_manifest(blob):
            got = seg.load_manifest(blob)
        else:
            got = retrieval.load_index(blob)
        del blob
        retrieval.CACHE.put(room_id, ref, got)
    return got


#: How long a presigned upload or download URL is valid (seconds).
URL_EXPIRES_S = R.UPLOAD_URL_EXPIRES_S


def attachment(name: str) -> str:
    """A ``Content-Disposition`` that saves the file under ``name`` (RFC 6266 §4.3: an ASCII
    ``filename`` fallback and the UTF-8 ``filename*``, RFC 8187)."""
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


class Files:
    """The domain service of ``/rooms/{id}/files`` (docs/design.md §13): a member declares an
    upload and gets a presigned S3 POST, lists the room's files, reads one with a presigned
    download, and the uploader's company deletes one. ``deps``: the runtime's stores (its
    ``files``), settings (``files_endpoint_url`` on ``quay dev``) and clock."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room

    def _signer(self, observed: bool = True) -> Any:
        return signer(getattr(self.deps.settings, "files_endpoint_url", None), observed)

    def declare(
        self, who: Principal, room_id: str, *, name: str, content_type: str, size: int
    ) -> tuple[RoomFile, dict[str, Any]]:
        """Record a file ``uploading`` and presign its upload: the file and the POST's ``url`` and
        ``fields`` (at most :data:`quayutec.resources.MAX_UPLOAD_BYTES`, valid
        :data:`URL_EXPIRES_S`). Raises NotFound, PayloadTooLarge, InvalidInput (a kind the room
        does not take)."""
        member_room(self.store, room_id, who)
        if size > R.MAX_UPLOAD_BYTES:
            raise PayloadTooLarge(
                f"body.size: {size} bytes is over the {R.MAX_UPLOAD_BYTES} byte (25 MB) limit for a room file"
            )
        if kind_of(name, content_type) is None:
            raise InvalidInput(
                f"content_type: {content_type!r} ({name!r}) is not a kind the room takes "
                "(plain text, Markdown, CSV, JSON, HTML, PDF)"
            )
        f = declare_upload(
            self.deps,
            room_id,
            name=name,
            content_type=content_type,
            size=size,
            uploader=who.author(),
            at=iso(self.deps.clock()),
        )
        bucket, key = self.deps.files.bucket, upload_key(room_id, f.id)
        post = self._signer(observed=False).generate_presigned_post(
            Bucket=bucket,
            Key=key,
            Fields={"Content-Type": content_type},
            Conditions=[{"Content-Type": content_type}, ["content-length-range", 1, R.MAX_UPLOAD_BYTES]],
            ExpiresIn=URL_EXPIRES_S,
        )
        # Announce the action the signature grants (s3:PutObject on the key) to the call observers
        # (the IAM check), as a presigned GET is announced as its GetObject.
        announce("s3", "PutObject", {"Bucket": bucket, "Key": key})
        return f, post

    def list(self, who: Principal, room_id: str) -> list[RoomFile]:
        """The room's files as people see them (:func:`as_seen`). Raises NotFound."""
        member_room(self.store, room_id, who)
        now = self.deps.clock()
        return [as_seen(f, now) for f in self.deps.files.list_files(room_id)]

    def page(self, who: Principal, room_id: str, limit: int, cursor: str | None = None) -> Page:
        """One page of the room's files as people see them (:func:`as_seen`), in id order (part
        ``files``, :meth:`quayutec.dal.files.FileStore.files_page`). Raises NotFound,
        InvalidInput."""
        member_room(self.store, room_id, who)
        now = self.deps.clock()
        return self.deps.files.files_page(room_id, limit, cursor).map(lambda f: as_seen(f, now))

    def _file(self, who: Principal, room_id: str, file_id: str) -> RoomFile:
        member_room(self.store, room_id, who)
        f = self.deps.files.get_file(room_id, file_id)
        if f is None:
            raise NotFound(f"file {file_id!r} is not in room {room_id!r}")
        return f

    def get(self, who: Principal, room_id: str, file_id: str) -> tuple[RoomFile, str | None]:
        """A file as people see it and a presigned download URL (``None`` while its upload has
        not arrived). Raises NotFound."""
        f = self._file(who, room_id, file_id)
        url = None
        if f.status != "uploading":  # stored status: an upload that never arrived has nothing to download
            # Served as a download, never rendered where the URL opens: an uploaded HTML file must
            # not run as a page (S3 applies response-* overrides on signed requests, GetObject API).
            url = self._signer().generate_presigned_url(
                "get_object",
                Params={
                    "Bucket": self.deps.files.bucket,
                    "Key": upload_key(room_id, file_id),
                    # the version agents read (design §8): never a later upload, nothing once deleted
                    **({"VersionId": f.version_id} if f.version_id else {}),
                    "ResponseContentDisposition": attachment(f.name),
                },
                ExpiresIn=URL_EXPIRES_S,
            )
        return as_seen(f, self.deps.clock()), url

    def delete(self, who: Principal, room_id: str, file_id: str) -> RoomFile:
        """Delete a file (the uploader's company only): its record, then every version of its
        upload (a download URL issued before serves nothing; a form used after stores nothing
        readable: ingest deletes it); their S3 events take its chunks out of the index. A
        retried delete (the first ended after the record went, before every version did) finds
        the file's tombstone, deletes what is left of its upload and answers the same file: the
        uploader's company only, as the first. Raises NotFound, Forbidden."""
        member_room(self.store, room_id, who)
        f = self.deps.files.get_file(room_id, file_id)
        gone = f is None
        if f is None:
            f = self.deps.files.deleted_file(room_id, file_id)
            if f is None or f.uploader.company != who.require_company():
                raise NotFound(f"file {file_id!r} is not in room {room_id!r}")
        if f.uploader.company != who.require_company():
            raise Forbidden(f"file {file_id!r} was uploaded by another company: only it may delete the file")
        if not gone:
            self.deps.files.delete_file(f)
        self.deps.files.delete_upload(room_id, file_id)  # their S3 events take the chunks out of the index
        return f
