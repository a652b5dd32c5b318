"""Companies in the room table: a company, its people and rights policy, its external id for
Bedrock roles and its budget (design §5, §12.4). Created once (a conditional write: a second create
is a conflict, not an overwrite)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from quayutec.dal import keys
from quayutec.dal.api_keys import ApiKey
from quayutec.dal.aws import (
    is_condition_failure,
    transact_new,
    transient_errors,
    update_if,
)
from quayutec.dal.table import NOT_EXISTS, RoomTable, strip
from quayutec.errors import NotFound
from quayutec.models import (
    Company,
    CompanyBudget,
    RightsPolicy,
)

#: The company item's attributes holding its API key (never part of :class:`Company`).
API_KEY_ID_ATTR = "api_key_id"
API_KEY_VALUE_ATTR = "api_key_value"


def budget_of(item: dict[str, Any] | None) -> CompanyBudget | None:
    """A company's budget from its item as read (``None``: it set none)."""
    return CompanyBudget.model_validate(strip(item)) if item else None


class CompanyRecords(RoomTable):
    """A company's items: ``COMPANY#{id}`` / ``META`` and ``BUDGET``."""

    def put_company(self, company: Company) -> None:
        with transient_errors():
            self.db.put_item(
                TableName=self.table,
                Item={
                    **keys.company_key(company.id),
                    "type": "company",
                    **company.model_dump(mode="json"),
                },
            )

    def get_company(self, company_id: str) -> Company | None:
        item = self._item(keys.company_key(company_id))
        return Company.model_validate(strip(item)) if item else None

    def create_company(
        self, company: Company, audit: dict[str, Any] | None = None, api_key: ApiKey | None = None
    ) -> bool:
        """Write a new company (and ``audit``, an entry's ``Put``, :func:`quayutec.dal.audit.audit_put`,
        in the same transaction); ``False`` when the id is taken. ``api_key``: its API Gateway key
        (docs/design.md §5), kept on the item as ``api_key_id`` / ``api_key_value`` (outside the
        :class:`Company` model: never answered to a caller)."""
        item = {**keys.company_key(company.id), "type": "company", **company.model_dump(mode="json")}
        if api_key is not None:
            item.update({API_KEY_ID_ATTR: api_key.id, API_KEY_VALUE_ATTR: api_key.value})
        if audit is not None:
            return transact_new(self.db, [self._put(item), audit])
        try:
            with transient_errors():
                self.db.put_item(TableName=self.table, Item=item, ConditionExpression=NOT_EXISTS)
            return True
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise

    def add_person(
        self, company_id: str, person: str, max_people: int | None = None, audit: dict[str, Any] | None = None
    ) -> bool:
        """Add a person to a company (and ``audit`` in the same transaction); ``False`` when
        already there (or no such company), also when it holds ``max_people`` people already (the
        caller tells which: it read the company)."""
        condition = "attribute_exists(pk) AND NOT contains(people, :one)"
        values: dict[str, Any] = {":p": [person], ":one": person}
        if max_people is not None:
            condition += " AND size(people) < :max"
            values[":max"] = max_people
        if audit is not None:
            update = {
                "Update": {
                    "TableName": self.table,
                    "Key": keys.company_key(company_id),
                    "UpdateExpression": "SET people = list_append(people, :p)",
                    "ConditionExpression": condition,
                    "ExpressionAttributeValues": values,
                }
            }
            return transact_new(self.db, [update, audit])
        return update_if(
            self.db,
            TableName=self.table,
            Key=keys.company_key(company_id),
            UpdateExpression="SET people = list_append(people, :p)",
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )

    def company_api_key(self, company_id: str) -> str | None:
        """The value of the company's API key (its throttle identity, docs/design.md §5); ``None``
        for an unknown company or one created before companies had keys."""
        item = self._item(keys.company_key(company_id))
        value = (item or {}).get(API_KEY_VALUE_ATTR)
        return str(value) if value else None

    def set_company_api_key(self, company_id: str, api_key: ApiKey) -> bool:
        """Give an existing company without one its API key (the backfill, docs/deploy.md);
        ``False`` when there is no such company or it has a key already."""
        return update_if(
            self.db,
            TableName=self.table,
            Key=keys.company_key(company_id),
            UpdateExpression="SET #i = :i, #v = :v",
            ConditionExpression="attribute_exists(pk) AND attribute_not_exists(#v)",
            ExpressionAttributeNames={"#i": API_KEY_ID_ATTR, "#v": API_KEY_VALUE_ATTR},
            ExpressionAttributeValues={":i": api_key.id, ":v": api_key.value},
        )

    def external_id(self, company_id: str, candidate: str) -> str:
        """The company's external id for its Bedrock roles (docs/design.md §5): the one it has, or
        ``candidate`` stored as its first (a conditional update: of two first roles at once, one id
        is kept). Raises ``NotFound`` for an unknown company, TransientError on throttling."""
        key = keys.company_key(company_id)
        stored = update_if(
            self.db,
            TableName=self.table,
            Key=key,
            UpdateExpression="SET external_id = :e",
            # A company written before it had one holds no attribute, or a null one.
            ConditionExpression="attribute_exists(pk) AND "
            "(attribute_not_exists(external_id) OR attribute_type(external_id, :null))",
            ExpressionAttributeValues={":e": candidate, ":null": "NULL"},
        )
        if stored:
            return candidate
        company = self.get_company(company_id)
        if company is None or company.external_id is None:
            raise NotFound(f"company {company_id!r} does not exist")
        return company.external_id

    def set_policy(self, company_id: str, policy: RightsPolicy) -> bool:
        return update_if(
            self.db,
            TableName=self.table,
            Key=keys.company_key(company_id),
            UpdateExpression="SET rights = :r",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":r": policy.model_dump(mode="json")},
        )

    def set_max_concurrent_runs(
        self, company_id: str, value: int, cap_entry: dict[str, Any], audit: dict[str, Any] | None = None
    ) -> bool:
        """Set the company's ``max_concurrent_runs`` (design §12.3) and, in the same transaction,
        ``cap_entry`` (its turns counter's copy, :meth:`quayutec.dal.turns.TurnStore.set_cap_item`,
        which the runs' turn transactions compare against). ``False`` when no such company."""
        update = {
            "Update": {
                "TableName": self.table,
                "Key": keys.company_key(company_id),
                "UpdateExpression": "SET max_concurrent_runs = :n",
                "ConditionExpression": "attribute_exists(pk)",
                "ExpressionAttributeValues": {":n": value},
            }
        }
        return transact_new(self.db, [update, cap_entry, *([audit] if audit is not None else [])])

    def get_budget(self, company_id: str) -> CompanyBudget | None:
        """The company's budget (design §12.4), ``None`` when it set none."""
        return budget_of(self._item(keys.budget_key(company_id)))

    def put_budget(self, company_id: str, budget: CompanyBudget) -> None:
        """Set (replace) the company's budget. Raises TransientError on throttling."""
        with transient_errors():
            self.db.put_item(
                TableName=self.table,
                Item=json.loads(
                    json.dumps(
                        {
                            **keys.budget_key(company_id),
                            "type": "budget",
                            **budget.model_dump(mode="json", exclude_none=True),
                        }
                    ),
                    parse_float=Decimal,
                ),
            )
