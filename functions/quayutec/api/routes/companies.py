"""Companies (operator only to create and staff; a company's people read their own)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import own_company, services
from quayutec.api.context import caller
from quayutec.api.routes._params import CompanyId
from quayutec.api.schemas import CompanyIn, CompanyOut, PersonIn
from quayutec.errors import Conflict, LimitReached, NotFound
from quayutec.models import Company

router = APIGatewayRouter()


def _out(company: Company) -> CompanyOut:
    return CompanyOut.model_validate(company.model_dump())


@router.post("/companies", status_code=201, tags=["companies"], summary="Create a company (operator)")
def create_company(body: Annotated[CompanyIn, Body()]) -> CompanyOut:
    caller().require_admin()
    company = Company(id=body.id, people=list(dict.fromkeys(body.people)))
    svc = services()
    most = svc.deps.settings.max_company_people
    if len(company.people) > most:
        raise LimitReached(f"company {body.id!r} with {len(company.people)} people", most, "MAX_COMPANY_PEOPLE")
    if not svc.directory.create_company(company):
        raise Conflict(f"company {body.id!r} exists already")
    return _out(company)


@router.get("/companies/<company_id>", tags=["companies"], summary="A company (its own people, or an operator)")
def get_company(company_id: CompanyId) -> CompanyOut:
    return _out(own_company(services(), company_id, caller()))


@router.post(
    "/companies/<company_id>/people",
    status_code=201,
    tags=["companies"],
    summary="Add a person to a company (operator)",
)
def add_person(company_id: CompanyId, body: Annotated[PersonIn, Body()]) -> CompanyOut:
    caller().require_admin()
    svc = services()
    if svc.deps.room.get_company(company_id) is None:
        raise NotFound(f"company {company_id!r} does not exist")
    most = svc.deps.settings.max_company_people
    if not svc.directory.add_person(company_id, body.person, most):
        company = svc.deps.room.get_company(company_id)
        if company is not None and body.person not in company.people and len(company.people) >= most:
            raise LimitReached(f"company {company_id!r} has {len(company.people)} people", most, "MAX_COMPANY_PEOPLE")
        raise Conflict(f"{body.person!r} is a person of {company_id!r} already")
    return _out(svc.deps.room.get_company(company_id))  # type: ignore[arg-type]
