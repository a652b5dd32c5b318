"""Companies (operator only to create and staff; a company's people read their own)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.routes._params import CompanyId
from quayutec.api.schemas import CompanyIn, CompanyOut, PersonIn
from quayutec.models import Company

router = APIGatewayRouter()


def _out(company: Company) -> CompanyOut:
    return CompanyOut.model_validate(company.model_dump())


@router.post("/companies", status_code=201, tags=["companies"], summary="Create a company (operator)")
def create_company(body: Annotated[CompanyIn, Body()]) -> CompanyOut:
    return _out(services().companies.create(caller(), body.id, body.people))


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
