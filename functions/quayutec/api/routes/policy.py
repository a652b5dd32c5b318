"""A company's rights policy over its agents' declared actions (design §5): read by the
company's own people (and operators), set by its own people only: never by an operator, never by
another company."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.routes._params import CompanyId
from quayutec.api.schemas import PolicyOut
from quayutec.models import RightsPolicy

router = APIGatewayRouter()


@router.get("/companies/<company_id>/policy", tags=["policy"], summary="The company's rights policy")
def get_policy(company_id: CompanyId) -> RightsPolicy:
    return services().companies.policy(caller(), company_id)


@router.put("/companies/<company_id>/policy", tags=["policy"], summary="Set the company's rights policy")
def put_policy(company_id: CompanyId, body: Annotated[RightsPolicy, Body()]) -> PolicyOut:
    warnings = services().companies.set_policy(caller(), company_id, body)
    return PolicyOut(**body.model_dump(), warnings=warnings)
