"""A company's budget over its agents' model spend and what it has spent (design §12.4): read and set
by the company's own people only (another company's caller gets 404, as for its policy)."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.routes._params import CompanyId
from quayutec.api.schemas import BudgetIn, SpendOut
from quayutec.models import CompanyBudget

router = APIGatewayRouter()


@router.get("/companies/<company_id>/budget", tags=["budgets"], summary="The company's budget")
def get_budget(company_id: CompanyId) -> CompanyBudget:
    """Its limits per UTC day and month (USD for priced models, tokens for the others), its own
    and its agents' by name; ``{}`` when it set none (design §12.4)."""
    return services().companies.budget(caller(), company_id)


@router.put("/companies/<company_id>/budget", tags=["budgets"], summary="Set (replace) the company's budget")
def put_budget(company_id: CompanyId, body: Annotated[BudgetIn, Body()]) -> CompanyBudget:
    """Each limit optional; a request that would pass one is not sent (its run ends
    ``failed_before_reply``, "budget reached", a notice only the company sees); at 80 % and
    100 % the company gets one notice each per period (design §12.4)."""
    return services().companies.set_budget(caller(), company_id, CompanyBudget.model_validate(body.model_dump()))


@router.get("/companies/<company_id>/spend", tags=["budgets"], summary="What the company's agents spent")
def get_spend(
    company_id: CompanyId,
    period: Annotated[Literal["day", "month"], Query(description="The current UTC day or month")] = "day",
) -> SpendOut:
    """Spent and reserved (requests not answered yet) in the current UTC day or month, against
    the budget, per agent and per model, from the spend counters (design §12.4). USD figures
    cover models with a known price; tokens the others."""
    spend = services().companies.spend(caller(), company_id, period)
    return SpendOut.of(company_id, period, spend.key, spend.counter, spend.budget)
