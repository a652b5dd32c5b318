"""A room's changes since a position, by kind (design §9, §14): one bounded Query per kind, in the
order of each item's last change, past the position the caller's cursor holds.

* messages: ``by_time`` (``ROOM#{room}#MSG`` / ``{created_at}#{id}``; a message never changes),
  without other companies' company-only notices (:func:`quayutec.dal.messages.visible_messages`)
* tasks, files: ``changes`` (``CHANGES#{room}#tasks`` | ``…#files`` / ``{changed_at}#{id}``)
* approvals: ``changes``, the company's own partition (``CHANGES#{room}#approvals#{company}``)
* runs: the ledger's ``run_changes`` (``CHANGES#{room}#runs#{company}`` / ``{changed_at}#{run}``)

A position is an index sort key (or an ISO-8601 time, which sorts before every key of that
instant): the range is ``sort key > position``, so an item is read again only when a later write
moved it past the position. GSIs are eventually consistent: a change of the last moment may be
missing from one read and is in the next (design §14)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from quayutec.dal import keys
from quayutec.dal.aws import transient_errors
from quayutec.dal.files import _strip as file_fields
from quayutec.dal.ledger import LedgerStore, _plain
from quayutec.dal.messages import visible_messages
from quayutec.dal.store import RoomStore
from quayutec.dal.table import strip
from quayutec.models import ApprovalRequest, RoomFile, RunRecord, Task

#: The room table's ``changes`` index and the ledger's ``run_changes``: name, key attributes.
_CHANGES = ("changes", "gsi4pk", "gsi4sk")
_RUN_CHANGES = ("run_changes", "chg_pk", "chg_sk")


@dataclass(frozen=True)
class DeletedFile:
    """A file deleted since the position: its id only (its record is gone)."""

    id: str


@dataclass
class KindPage:
    """Up to ``limit`` changed items of one kind, oldest change first, each with its position
    (its index sort key: where the next read of this kind starts after it); ``position``: the
    last one read (a hidden notice's, when only those were read; ``None``: nothing read);
    ``more``: the index may hold more past it."""

    items: list[tuple[str, Any]] = field(default_factory=list)
    position: str | None = None
    more: bool = False


class ChangeReads:
    """The reads of a room's changes feed over the room store and the ledger."""

    def __init__(self, room: RoomStore, ledger: LedgerStore) -> None:
        self.room = room
        self.ledger = ledger

    def messages(self, room_id: str, after: str, limit: int, *, reader: str) -> KindPage:
        """Messages created past ``after`` that company ``reader`` may read (design §12.5)."""
        pk = keys.message_pk(room_id)
        query = {
            "TableName": self.room.table,
            "IndexName": "by_time",
            "KeyConditionExpression": "gsi2pk = :pk AND gsi2sk > :after",
            "ExpressionAttributeValues": {":pk": pk, ":after": after},
        }
        found, start = visible_messages(self.room.db, query, limit, reader)
        page = KindPage([(keys.time_sk(m.created_at, m.id), m) for m in found], more=start is not None)
        page.position = page.items[-1][0] if page.items else (str(start["gsi2sk"]) if start else None)
        return page

    def tasks(self, room_id: str, after: str, limit: int) -> KindPage:
        items, more = self._range(self.room, _CHANGES, keys.changes_pk(room_id, "tasks"), after, limit)
        return _page([(str(i["gsi4sk"]), Task.model_validate(strip(i))) for i in items], more)

    def approvals(self, room_id: str, company: str, after: str, limit: int) -> KindPage:
        pk = keys.changes_pk(room_id, "approvals", company)
        items, more = self._range(self.room, _CHANGES, pk, after, limit)
        # the task token stays in the table: ApprovalRequest holds no such field
        return _page([(str(i["gsi4sk"]), ApprovalRequest.model_validate(strip(i))) for i in items], more)

    def files(self, room_id: str, after: str, limit: int) -> KindPage:
        """Files declared or ingested past ``after``, and deleted ones (:class:`DeletedFile`:
        the tombstone a delete writes, :meth:`quayutec.dal.files.FileStore.delete_file`)."""
        items, more = self._range(self.room, _CHANGES, keys.changes_pk(room_id, "files"), after, limit)
        return _page(
            [
                (
                    str(i["gsi4sk"]),
                    DeletedFile(str(i["id"]))
                    if i.get("type") == "file_deleted"
                    else RoomFile.model_validate(file_fields(i)),
                )
                for i in items
            ],
            more,
        )

    def runs(self, room_id: str, company: str, after: str, limit: int) -> KindPage:
        pk = keys.changes_pk(room_id, "runs", company)
        items, more = self._range(self.ledger, _RUN_CHANGES, pk, after, limit)
        return _page([(str(i["chg_sk"]), RunRecord.model_validate(_plain(i))) for i in items], more)

    @staticmethod
    def _range(
        store: Any, index: tuple[str, str, str], pk: str, after: str, limit: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """One Query of ``index`` (its name, partition and sort key attributes): at most
        ``limit`` items of partition ``pk`` past ``after``, oldest change first, and whether it
        may hold more (``limit`` reached, or a page DynamoDB cut at 1 MB)."""
        name, pk_attr, sk_attr = index
        with transient_errors():
            page = store.db.query(
                TableName=store.table,
                IndexName=name,
                KeyConditionExpression="#pk = :pk AND #sk > :after",
                ExpressionAttributeNames={"#pk": pk_attr, "#sk": sk_attr},
                ExpressionAttributeValues={":pk": pk, ":after": after},
                Limit=limit,
            )
        return list(page.get("Items", [])), "LastEvaluatedKey" in page


def _page(items: list[tuple[str, Any]], more: bool) -> KindPage:
    return KindPage(items, items[-1][0] if items else None, more)
