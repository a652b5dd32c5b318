"""Memory lines in the room table: one partition per room for room-wide lines and one per company
for its own, marked in the room item's ``memory`` map so a run queries only those holding lines
(design §2, §5, §14)."""

from __future__ import annotations

from quayutec.dal import keys
from quayutec.dal.aws import (
    Guard,
    paginate_query,
    put_guarded,
    update_if,
)
from quayutec.dal.pages import KeySpec, Page, decode_cursor, query_rows
from quayutec.dal.table import RoomTable, strip
from quayutec.models import (
    MemoryLine,
)

#: The key of a memory line on ``by_time`` (a page cursor's key).
MEMORY_KEY = ("pk", "sk", "gsi2pk", "gsi2sk")


class MemoryRecords(RoomTable):
    """A room's memory lines: ``ROOM#{id}#MEM#...`` / ``MEM#{id}``."""

    def put_memory(self, line: MemoryLine, guard: Guard | None = None, *, marked: bool = False) -> bool:
        """Write a memory line once. Its partition is marked in the room item's ``memory`` map (a
        run then queries only partitions that hold lines) by a write of its own before the line,
        unless ``marked`` (the caller read the map and found it there): so lines of one room are
        never written in a transaction with the room item, and runs writing memory do not
        conflict with each other or with agent placement (docs/design.md §2). A crash between the
        two leaves a marked partition without lines: one query that finds none. ``False`` when
        the line existed already. ``guard``: a run's stop guard (raises RunStopped). Raises
        ValueError when the room does not exist (nothing written)."""
        if not marked:
            self.mark_memory_partition(line.room_id, line.visibility, line.company)
        key = keys.memory_key(line.room_id, line.visibility, line.company, line.id)
        item = {
            **key,
            "type": "memory",
            "gsi2pk": key["pk"],
            "gsi2sk": keys.time_sk(line.created_at, line.id),
            **line.model_dump(mode="json", exclude_none=True),
        }
        return put_guarded(self.db, self.table, item, guard)

    def mark_memory_partition(self, room_id: str, visibility: str, company: str) -> None:
        """Mark the partition of ``(visibility, company)`` lines in the room item's ``memory``
        map (idempotent). Raises ValueError when the room does not exist, TransientError on
        throttling."""
        if not update_if(
            self.db,
            TableName=self.table,
            Key=keys.room_key(room_id),
            UpdateExpression="SET memory.#k = :t",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#k": keys.memory_partition(visibility, company)},
            ExpressionAttributeValues={":t": True},
        ):
            raise ValueError(f"room {room_id!r} does not exist")

    def get_memory(self, room_id: str, visibility: str, company: str, line_id: str) -> MemoryLine | None:
        item = self._item(keys.memory_key(room_id, visibility, company, line_id))
        return MemoryLine.model_validate(strip(item)) if item else None

    def memory_for(self, room_id: str, company: str, limit: int, present: set[str] | None = None) -> list[MemoryLine]:
        """The newest ``limit`` memory lines a company may read (room-wide and its own
        company-only lines), oldest first. A bounded query per partition on the ``by_time`` GSI
        (eventually consistent, design §14), only those the room item's ``memory`` map names
        (``present``, from :meth:`run_reads`; ``None``: both), each continued past a page
        DynamoDB cut short (:meth:`_query_up_to`)."""
        lines: list[MemoryLine] = []
        for visibility in ("room", "company"):
            if present is not None and keys.memory_partition(visibility, company) not in present:
                continue
            items = self._query_up_to(
                limit,
                IndexName="by_time",
                KeyConditionExpression="gsi2pk = :pk",
                ExpressionAttributeValues={":pk": keys.memory_pk(room_id, visibility, company)},
                ScanIndexForward=False,
            )
            lines += [MemoryLine.model_validate(strip(i)) for i in items]
        lines.sort(key=lambda m: m.created_at)
        return lines[-limit:]

    def memory_page(self, room_id: str, company: str, limit: int, cursor: str | None = None) -> Page:
        """One page of the memory lines a company may read, newest first: the room-wide lines
        (part ``room``) and its own company-only lines (part ``company``) merged by time, at
        most ``limit``. One bounded query per partition on ``by_time`` (at most ``limit`` items
        each, design §14), from ``cursor`` on; a line read but not on this page is read again
        on the next. The cursor binds the room and company. Raises InvalidInput (a cursor this
        listing did not hand out), TransientError."""
        pks = {"room": keys.memory_pk(room_id, "room", company), "company": keys.memory_pk(room_id, "company", company)}
        listing = f"memory:{room_id}"
        specs = {name: KeySpec({"pk": pk, "gsi2pk": pk}, {"sk": "MEM#", "gsi2sk": ""}) for name, pk in pks.items()}
        at = decode_cursor(cursor, listing, specs)
        read = {
            name: query_rows(
                self.db,
                {
                    "TableName": self.table,
                    "IndexName": "by_time",
                    "KeyConditionExpression": "gsi2pk = :pk",
                    "ExpressionAttributeValues": {":pk": pk},
                    "ScanIndexForward": False,
                },
                limit,
                at[name],
                MEMORY_KEY,
            )
            for name, pk in pks.items()
        }
        newest = sorted(
            ((str(item["gsi2sk"]), name) for name, rows in read.items() for item in rows.items), reverse=True
        )[:limit]
        order = [name for _, name in newest]
        parts = {name: rows.head(order.count(name)) for name, rows in read.items()}
        return Page(listing, parts, order).map(lambda i: MemoryLine.model_validate(strip(i)))

    def all_memory(self, room_id: str, companies: list[str]) -> list[MemoryLine]:
        out: list[MemoryLine] = []
        pks = [keys.memory_pk(room_id, "room", "")] + [keys.memory_pk(room_id, "company", c) for c in companies]
        for pk in pks:
            out += [
                MemoryLine.model_validate(strip(i))
                for i in paginate_query(
                    self.db.query,
                    TableName=self.table,
                    KeyConditionExpression="pk = :pk",
                    ExpressionAttributeValues={":pk": pk},
                )
            ]
        return sorted(out, key=lambda m: m.created_at)
