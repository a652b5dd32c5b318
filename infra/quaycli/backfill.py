"""``quay admin backfill-api-keys``: give each company created before companies had API keys its
own key (docs/design.md §5, docs/deploy.md), with the operator's AWS credentials.

Until then such a company's requests carry the shared key, throttled together with the
operators' and every other such company's. The backfill scans the room table for company items
without ``api_key_value`` (a Scan: run by an operator, never by a deployed function), and for each
makes (or finds, by its name) the company's key in the stage's usage plan and writes it on the
company item, only if the item still has none. It is safe to run again, or to stop and rerun: a
company already given a key is skipped, a key made before a crash is found by its name. The
authorizer answers the new key once its cached answer for a token expires (5 minutes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from quayutec import resources as R
from quayutec.dal.api_keys import ApiKeys
from quayutec.dal.companies import API_KEY_VALUE_ATTR, CompanyRecords
from quayutec.dal.keys import company_pk


@dataclass
class Backfill:
    """What a backfill did: the companies given a key, those that had one."""

    given: list[str] = field(default_factory=list)
    had: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"given": self.given, "had": len(self.had)}


def companies(db: Any, table: str) -> list[tuple[str, bool]]:
    """Every company of the room table and whether it has its API key (a paginated Scan)."""
    out: list[tuple[str, bool]] = []
    kwargs: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "sk = :meta AND #t = :company",
        "ProjectionExpression": "pk, #v",
        "ExpressionAttributeNames": {"#t": "type", "#v": API_KEY_VALUE_ATTR},
        "ExpressionAttributeValues": {":meta": "META", ":company": "company"},
    }
    while True:
        page = db.scan(**kwargs)
        for item in page.get("Items", []):
            out.append((str(item["pk"]).removeprefix(company_pk("")), bool(item.get(API_KEY_VALUE_ATTR))))
        if "LastEvaluatedKey" not in page:
            return sorted(out)
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def backfill(db: Any, apigateway: Any, *, table: str, stage: str) -> Backfill:
    """Give every company of ``table`` without an API key its key in the usage plan of ``stage``.
    ``db``: a DynamoDB client taking Python values; ``apigateway``: an API Gateway client."""
    keys = ApiKeys(stage, R.usage_plan_name(stage), client=apigateway)
    records = CompanyRecords(table, client=db)
    done = Backfill()
    for company, has_key in companies(db, table):
        if has_key:
            done.had.append(company)
            continue
        if records.set_company_api_key(company, keys.ensure(company)):
            done.given.append(company)
        else:  # given one meanwhile (another backfill), or deleted
            done.had.append(company)
    return done
