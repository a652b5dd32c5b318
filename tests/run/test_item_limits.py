"""Every item kind at its documented limits stays well under DynamoDB's 400 KB item (docs/design.md
§1, "Limits"): each is written to the local stack's table at the highest value its limits may be
set to (settings.HARD_LIMITS) with the longest ids, read back, and sized by DynamoDB's rules
("Item sizes and formats", DynamoDB developer guide: attribute names and values in UTF-8 bytes,
numbers up to 21 bytes, 3 bytes per list or map plus 1 per element)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from runhelpers import Env, table_items

from quaylocal import calls as C
from quayutec import resources as R
from quayutec.models import (
    AGENT_ID_MAX,
    ID_PART_MAX,
    Agent,
    BudgetLimits,
    Company,
    CompanyBudget,
    RightsPolicy,
    Room,
)
from quayutec.settings import HARD_LIMITS

ITEM_MAX = 400 * 1024
#: "Well under": room to grow a field or two without meeting the item limit.
BUDGET = 300 * 1024


def item_size(value: Any) -> int:
    """A DynamoDB attribute value's size in bytes (an item: a map of attributes, names counted)."""
    if isinstance(value, dict):
        return 3 + sum(len(str(k).encode()) + item_size(v) + 1 for k, v in value.items())
    if isinstance(value, (list, set, tuple)):
        return 3 + sum(item_size(v) + 1 for v in value)
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, (int, float, Decimal)):
        return 21
    if isinstance(value, bytes):
        return len(value)
    return len(str(value).encode())


def _id(prefix: str, i: int, length: int = ID_PART_MAX) -> str:
    head = f"{prefix}{i}"
    return head + "x" * (length - len(head))


def _items(env: Env, pk: str, sk: str = "META") -> dict[str, Any]:
    (item,) = [i for i in table_items(env.stack, R.ROOM_TABLE.default_name) if i["pk"] == pk and i["sk"] == sk]
    return item


def test_the_room_item_at_its_limits(env: Env) -> None:
    d = env.deps
    companies = [_id("c", i) for i in range(HARD_LIMITS["MAX_ROOM_MEMBERS"])]
    room_id = _id("room", 0)
    with C.owner(C.SETUP):
        assert d.room.create_room(Room(id=room_id, name="n" * 200, members=companies[:40]))
        for c in companies[40:]:
            assert d.room.add_member(room_id, c, HARD_LIMITS["MAX_ROOM_MEMBERS"])
        for i in range(HARD_LIMITS["MAX_ROOM_AGENTS"]):
            company = companies[i % len(companies)]
            agent = f"{company}.{_id('a', i)}"
            assert len(agent) == AGENT_ID_MAX
            d.room.add_room_agent(room_id, agent, company, HARD_LIMITS["MAX_ROOM_AGENTS"])
        for c in companies:
            d.room.mark_memory_partition(room_id, "company", c)
        d.room.mark_memory_partition(room_id, "room", companies[0])
    item = _items(env, f"ROOM#{room_id}")
    assert len(item["agents"]) == HARD_LIMITS["MAX_ROOM_AGENTS"] and len(item["members"]) == len(companies)
    assert item_size(item) < BUDGET, item_size(item)


def test_the_company_item_and_its_budget_at_their_limits(env: Env) -> None:
    d = env.deps
    company = _id("co", 0)
    people = [_id("p", i) for i in range(HARD_LIMITS["MAX_COMPANY_PEOPLE"])]
    every_kind = {"remember": "ask", "create_task": "deny", "update_task": "allow", "close_task": "ask"}
    rules = {f"{company}.{_id('a', i)}": every_kind for i in range(HARD_LIMITS["MAX_POLICY_RULES"])}
    policy = RightsPolicy.model_validate({"actions": every_kind, "agents": rules})
    limits = BudgetLimits(daily_usd=1e6, monthly_usd=1e7, daily_tokens=10**12, monthly_tokens=10**13)
    budget = CompanyBudget.model_validate(
        {**limits.model_dump(), "agents": {_id("a", i): limits.model_dump() for i in range(500)}}
    )
    with C.owner(C.SETUP):
        d.room.put_company(Company(id=company, people=people, rights=policy))
        d.room.put_budget(company, budget)
    item, budget_item = _items(env, f"COMPANY#{company}"), _items(env, f"COMPANY#{company}", "BUDGET")
    assert len(item["people"]) == len(people) and len(item["rights"]["agents"]) == len(rules)
    assert item_size(item) < BUDGET, item_size(item)
    assert item_size(budget_item) < BUDGET, item_size(budget_item)


@pytest.mark.parametrize("field", ["instructions", "model"])
def test_the_agent_item_at_its_limits(env: Env, field: str) -> None:
    d = env.deps
    company = _id("co", 1)
    agent = Agent(
        id=f"{company}.{_id('a', 0)}",
        company=company,
        provider="openai-compatible",
        model="m" * 200,
        instructions="é" * (32 * 1024 // 2),
        base_url="https://" + "h" * 200 + ".example.com/v1",
    )
    with C.owner(C.SETUP):
        d.room.put_agent(agent)
    item = _items(env, f"AGENT#{agent.id}")
    assert item[field] == getattr(agent, field)
    assert item_size(item) < BUDGET and item_size(item) < ITEM_MAX
