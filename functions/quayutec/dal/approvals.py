"""Approval requests in the room table: a held action waiting for its company's yes, with the
Step Functions task token; GSI ``approvals_by_company`` lists a company's own (design §2, §14)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from quayutec.dal import keys
from quayutec.dal.aws import (
    Guard,
    is_condition_failure,
    paginate_query,
    put_guarded,
    transient_errors,
    update_if,
)
from quayutec.dal.pages import KeySpec, Page, decode_cursor, query_rows
from quayutec.dal.table import RoomTable, strip
from quayutec.models import (
    ApprovalRequest,
    now_iso,
)

#: The key of an approval request on ``approvals_by_company`` (a page cursor's key).
APPROVAL_KEY = ("pk", "sk", "gsi3pk", "gsi3sk")


class ApprovalRecords(RoomTable):
    """A room's approval requests: ``APPROVAL#{run}#{index:03d}``."""

    def put_approval(self, approval: ApprovalRequest, task_token: str, guard: Guard | None = None) -> ApprovalRequest:
        """Record an approval request once; a repeat (a retried waitForTaskToken task, which
        gets a new token) only refreshes the token while the request is pending. Returns
        ``approval`` itself when it was recorded now, else the stored request. ``guard``: the
        run's stop guard (raises RunStopped: a stopped run asks for nothing)."""
        key = keys.approval_key(approval.room_id, approval.run_id, approval.index)
        item = {
            **key,
            "type": "approval",
            "gsi3pk": keys.approvals_pk(approval.room_id, approval.company),
            "gsi3sk": keys.approvals_sk(approval.created_at, approval.run_id, approval.index),
            "gsi4pk": keys.changes_pk(approval.room_id, "approvals", approval.company),
            "gsi4sk": keys.change_sk(approval.created_at, approval.id),
            "task_token": task_token,
            **approval.model_dump(mode="json", exclude_none=True),
        }
        if put_guarded(self.db, self.table, item, guard):
            return approval
        try:
            with transient_errors():
                self.db.update_item(
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET task_token = :t",
                    ConditionExpression="#s = :pending",
                    ExpressionAttributeNames={"#s": "status"},
                    ExpressionAttributeValues={":t": task_token, ":pending": "pending"},
                )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise
        existing = self._item(key)
        return ApprovalRequest.model_validate(strip(existing or item))

    def get_approval(self, room_id: str, run_id: str, index: int) -> tuple[ApprovalRequest, str] | None:
        """The approval request and its task token."""
        item = self._item(keys.approval_key(room_id, run_id, index))
        if not item:
            return None
        return ApprovalRequest.model_validate(strip(item)), str(item["task_token"])

    def run_approvals(self, room_id: str, run_id: str) -> list[tuple[ApprovalRequest, str]]:
        """The approval requests of one run, each with its task token, by index (one query:
        the run's held actions are at most 25). Raises TransientError on throttling."""
        with transient_errors():
            items = list(
                paginate_query(
                    self.db.query,
                    TableName=self.table,
                    KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                    ExpressionAttributeValues={":pk": keys.room_pk(room_id), ":p": keys.approval_prefix(run_id)},
                    ConsistentRead=True,
                )
            )
        return [(ApprovalRequest.model_validate(strip(i)), str(i["task_token"])) for i in items]

    def set_approval_status(
        self,
        room_id: str,
        run_id: str,
        index: int,
        status: str,
        by: str | None,
        from_statuses: tuple[str, ...] = ("pending",),
    ) -> bool:
        """Move an approval from one of ``from_statuses`` (default: pending) to ``status``;
        ``False`` when it is in none of them (already decided, or gone). ``by``: who decided
        (``None``: ``system`` for an expiry, else the person recorded when deciding began)."""
        names = {"#s": "status"}
        values: dict[str, Any] = {
            ":s": status,
            ":chg": keys.change_sk(now_iso(), f"{run_id}:{index}"),  # the changes feed (design §14)
            **{f":f{i}": f for i, f in enumerate(from_statuses)},
        }
        update = "SET #s = :s, gsi4sk = :chg"
        if by is not None or status == "expired":
            update += ", decided_by = :by"
            values[":by"] = by or "system"
        condition = f"attribute_exists(pk) AND #s IN ({', '.join(f':f{i}' for i in range(len(from_statuses)))})"
        return update_if(
            self.db,
            TableName=self.table,
            Key=keys.approval_key(room_id, run_id, index),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def approvals_page(
        self, room_id: str, company: str, limit: int, cursor: str | None = None, open_only: bool = False
    ) -> Page:
        """One page of ``company``'s agents' approval requests in the room, oldest first (part
        ``approvals``), from ``cursor`` on: one bounded query of the company's partition of
        ``approvals_by_company`` (eventually consistent, design §14). ``open_only``: those
        ``pending`` or ``deciding``, by a filter (bounded reads: a page may be short and still
        have a next cursor). The cursor binds the room, company and filter. Raises
        InvalidInput (a cursor this listing did not hand out), TransientError."""
        pk = keys.approvals_pk(room_id, company)
        listing = f"approvals:{'open' if open_only else 'all'}:{room_id}"
        spec = KeySpec({"pk": keys.room_pk(room_id), "gsi3pk": pk}, {"sk": keys.APPROVAL_PREFIX, "gsi3sk": ""})
        start = decode_cursor(cursor, listing, {"approvals": spec})["approvals"]
        query: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "approvals_by_company",
            "KeyConditionExpression": "gsi3pk = :pk",
            "ExpressionAttributeValues": {":pk": pk},
        }
        if open_only:
            query["FilterExpression"] = "#s IN (:pending, :deciding)"
            query["ExpressionAttributeNames"] = {"#s": "status"}
            query["ExpressionAttributeValues"] = {":pk": pk, ":pending": "pending", ":deciding": "deciding"}
        rows = query_rows(self.db, query, limit, start, APPROVAL_KEY, filtered=open_only)
        return Page(listing, {"approvals": rows.map(lambda i: ApprovalRequest.model_validate(strip(i)))})

    def approvals(self, room_id: str, company: str | None = None) -> list[ApprovalRequest]:
        """The approval requests of a room, oldest first: those of ``company``'s agents, read from
        the ``approvals_by_company`` GSI (only that company's rows; eventually consistent: a
        listing, no decision rests on it, design §14); ``company=None``: every company's (the
        operator's view: the scenario player, the chaos lab, tests)."""
        if company is None:
            query = {
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
                "ExpressionAttributeValues": {":pk": keys.room_pk(room_id), ":p": keys.APPROVAL_PREFIX},
            }
        else:
            query = {
                "IndexName": "approvals_by_company",
                "KeyConditionExpression": "gsi3pk = :pk",
                "ExpressionAttributeValues": {":pk": keys.approvals_pk(room_id, company)},
            }
        items = paginate_query(self.db.query, TableName=self.table, **query)
        return sorted((ApprovalRequest.model_validate(strip(i)) for i in items), key=lambda a: (a.created_at, a.index))
