"""Companies (operator only to create and staff; a company's people read their own)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.routes._params import CompanyId
from quayutec.api.schemas import CompanyIn, CompanyOut, CompanyPatch, PersonIn
from quayutec.models import Company

router = APIGatewayRouter()


def _out(company: Company) -> CompanyOut:
    return CompanyOut.model_validate(company.model_dump())


@router.post("/companies", status_code=201, tags=["companies"], summary="Create a company (operator)")
def create_company(body: Annotated[CompanyIn, Body()]) -> CompanyOut:
    """Create a company (operator only). ``max_concurrent_runs``: at most this many runs of its
    agents are active at once (docs/design.md §12.3), 1 to 1000, default 10."""
    return _out(
        services().companies.create(caller(), body.id, body.people, max_concurrent_runs=body.max_concurrent_runs)
    )


@router.patch("/companies/<company_id>", tags=["companies"], summary="Change a company's settings (operator)")
def patch_company(company_id: CompanyId, body: Annotated[CompanyPatch, Body()]) -> CompanyOut:
    """Set ``max_concurrent_runs``: at most this many runs of the company's agents are active at
    once; a run over it waits for a turn, in its company's arrival order (docs/design.md
    §12.3). 1 to 1000; runs active now finish, it holds from the next turn taken. Operator only:
    403 for anyone else, 404 for an unknown company, 400 for a value out of range."""
    return _out(services().companies.set_max_concurrent_runs(caller(), company_id, body.max_concurrent_runs))


@router.get("/companies/<company_id>", tags=["companies"], summary="A company (its own people, or an operator)")
def get_company(company_id: CompanyId) -> CompanyOut:
    return _out(services().companies.get(caller(), company_id))


@router.post(
    "/companies/<company_id>/people",
    status_code=201,
    tags=["companies"],
    summary="Add a person to a company (operator)",
)
def add_person(company_id: CompanyId, body: Annotated[PersonIn, Body()]) -> CompanyOut:
    return _out(services().companies.add_person(caller(), company_id, body.person))
