"""Companies: an operator creates one and sets its run cap; an operator or its own people add
its people; its people read it and its audit trail (docs/design.md §5)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.routes._params import CompanyId, Limit
from quayutec.api.schemas import AuditList, CompanyIn, CompanyOut, CompanyPatch, PersonIn
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
    summary="Add a person to a company (an operator, or one of its people)",
)
def add_person(company_id: CompanyId, body: Annotated[PersonIn, Body()]) -> CompanyOut:
    """An operator, or a person of the company (anyone else: 404). An entry of the company's audit
    trail says who added whom, and when (docs/design.md §5)."""
    return _out(services().companies.add_person(caller(), company_id, body.person))


@router.get(
    "/companies/<company_id>/audit",
    tags=["companies"],
    summary="The company's audit trail: who changed its people, tokens and run cap, and when",
)
def company_audit(company_id: CompanyId, limit: Limit = 50) -> AuditList:
    """Its own people, or an operator (anyone else: 404); newest first, the last ``limit``
    entries. Every operator act on the company is here: creating it, adding a person, issuing or
    revoking a token, setting its run cap; and its own people's (docs/design.md §5)."""
    return AuditList(entries=services().companies.audit(caller(), company_id, limit))
