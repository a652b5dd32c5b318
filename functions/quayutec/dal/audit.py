"""A company's audit trail (design §5): what was done to its people and tokens, and by whom (an
operator or one of its people). Each entry is written in the same transaction as the change it
records, so no change is made unaudited."""

from __future__ import annotations

import secrets
from typing import Any

from quayutec.dal import keys
from quayutec.dal.aws import transient_errors
from quayutec.dal.table import RoomTable, strip
from quayutec.models import AuditEntry, now_iso


def audit_put(table: str, company_id: str, entry: AuditEntry) -> dict[str, Any]:
    """The ``Put`` of ``entry`` for a ``TransactWriteItems`` (never overwrites another entry)."""
    return {
        "Put": {
            "TableName": table,
            "Item": {
                **keys.audit_key(company_id, entry.at, entry.id),
                "type": "audit",
                **entry.model_dump(mode="json", exclude_none=True),
            },
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def new_entry(actor: str, operator: bool, action: str, subject: str, detail: str = "") -> AuditEntry:
    """An entry stamped now, with a fresh id: ``actor`` (the operator token's member or the
    person), ``action`` (``company_created``, ``person_added``, ``token_issued``,
    ``token_revoked``, ``max_concurrent_runs_set``), ``subject`` (the person or the token id)."""
    return AuditEntry(
        id=secrets.token_hex(6),
        at=now_iso(),
        actor=actor,
        actor_kind="operator" if operator else "person",
        action=action,
        subject=subject,
        detail=detail,
    )


class AuditRecords(RoomTable):
    """Reads of a company's audit trail."""

    def audit_trail(self, company_id: str, limit: int) -> list[AuditEntry]:
        """The newest ``limit`` entries, newest first: one bounded query. Raises TransientError
        on throttling."""
        with transient_errors():
            items = self.db.query(
                TableName=self.table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                ExpressionAttributeValues={":pk": keys.company_pk(company_id), ":p": keys.AUDIT_PREFIX},
                ScanIndexForward=False,
                Limit=limit,
                ConsistentRead=True,
            ).get("Items", [])
        return [AuditEntry.model_validate(strip(i)) for i in items]
