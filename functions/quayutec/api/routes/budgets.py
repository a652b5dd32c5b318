"""A company's budget over its agents' model spend and what it has spent (design §7): read and set
by the company's own people only (another company's caller gets 404, as for its policy)."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import own_company, services
from quayutec.api.context import caller
from quayutec.api.routes._params import CompanyId
from quayutec.api.schemas import BudgetIn, SpendOut
from quayutec.dal.companies import budget_of
from quayutec.dal.keys import budget_key
from quayutec.errors import NotFound
from quayutec.logic import budgets
from quayutec.models import CompanyBudget

router = APIGatewayRouter()


def _own_people(company_id: str) -> None:
    """Only the company's own people read or set its budget and spend: anyone else (another
    company, an operator) finds no such company."""
    who = caller()
    if who.company != company_id:
        raise NotFound(f"company {company_id!r} does not exist")
    own_company(services(), company_id, who)


@router.get("/companies/<company_id>/budget", tags=["budgets"], summary="The company's budget")
def get_budget(company_id: CompanyId) -> CompanyBudget:
    """Its limits per UTC day and month (USD for priced models, tokens for the others), its own
    and its agents' by name; ``{}`` when it set none (design §7)."""
    _own_people(company_id)
    return services().deps.room.get_budget(company_id) or CompanyBudget()


@router.put("/companies/<company_id>/budget", tags=["budgets"], summary="Set (replace) the company's budget")
def put_budget(company_id: CompanyId, body: Annotated[BudgetIn, Body()]) -> CompanyBudget:
    """Each limit optional; a request that would pass one is not sent (its run ends
    ``failed_before_reply``, "budget reached", a notice only the company sees); at 80 % and
    100 % the company gets one notice each per period (design §7)."""
    _own_people(company_id)
    budget = CompanyBudget.model_validate(body.model_dump())
    services().deps.room.put_budget(company_id, budget)
    return budget


@router.get("/companies/<company_id>/spend", tags=["budgets"], summary="What the company's agents spent")
def get_spend(
    company_id: CompanyId,
    period: Annotated[Literal["day", "month"], Query(description="The current UTC day or month")] = "day",
) -> SpendOut:
    """Spent and reserved (requests not answered yet) in the current UTC day or month, against
    the budget, per agent and per model, from the spend counters (design §7). USD figures
    cover models with a known price; tokens the others."""
    _own_people(company_id)
    deps = services().deps
    key = budgets.periods(deps.clock())[period]
    item, counters = deps.ledger.spend_reads(company_id, [key], (deps.room.table, budget_key(company_id)))
    counter = counters.get(key, {})
    budget = budget_of(item) or CompanyBudget()
    return SpendOut.of(company_id, period, key, counter, budget)
