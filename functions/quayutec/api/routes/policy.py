"""A company's rights policy over its agents' declared actions (SPEC §5): read and set by the
company's own people."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import own_company, services
from quayutec.api.context import caller
from quayutec.api.routes._params import CompanyId
from quayutec.errors import NotFound
from quayutec.models import RightsPolicy

router = APIGatewayRouter()


@router.get("/companies/<company_id>/policy", tags=["policy"], summary="The company's rights policy")
def get_policy(company_id: CompanyId) -> RightsPolicy:
    return own_company(services(), company_id, caller()).rights


@router.put("/companies/<company_id>/policy", tags=["policy"], summary="Set the company's rights policy")
def put_policy(company_id: CompanyId, body: Annotated[RightsPolicy, Body()]) -> RightsPolicy:
    svc = services()
    own_company(svc, company_id, caller())
    if not svc.directory.set_policy(company_id, body):
        raise NotFound(f"company {company_id!r} does not exist")
    return body
