"""A company's rights policy over its agents' declared actions (design §5): read by the
company's own people (and operators), set by its own people only: never by an operator, never by
another company."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import own_company, services
from quayutec.api.context import caller
from quayutec.api.routes._params import CompanyId
from quayutec.api.schemas import PolicyOut
from quayutec.errors import Forbidden, InvalidInput, LimitReached, NotFound
from quayutec.logic import rights
from quayutec.models import RightsPolicy

router = APIGatewayRouter()


@router.get("/companies/<company_id>/policy", tags=["policy"], summary="The company's rights policy")
def get_policy(company_id: CompanyId) -> RightsPolicy:
    return own_company(services(), company_id, caller()).rights


@router.put("/companies/<company_id>/policy", tags=["policy"], summary="Set the company's rights policy")
def put_policy(company_id: CompanyId, body: Annotated[RightsPolicy, Body()]) -> PolicyOut:
    svc = services()
    who = caller()
    if who.company != company_id:  # operators administer companies, not their rights (design §5)
        if who.admin and who.company is None:
            raise Forbidden("an operator cannot change a company's rights policy: only its own people can")
        raise NotFound(f"company {company_id!r} does not exist")
    own_company(svc, company_id, who)
    most = svc.deps.settings.max_policy_rules
    if len(body.agents) > most:
        raise LimitReached(f"policy of {company_id!r}: rules for {len(body.agents)} agents", most, "MAX_POLICY_RULES")
    refusals, warnings = rights.policy_problems(body, company_id, svc.directory.agents_of(company_id))
    if refusals:
        raise InvalidInput("; ".join(refusals))
    if not svc.directory.set_policy(company_id, body):
        raise NotFound(f"company {company_id!r} does not exist")
    return PolicyOut(**body.model_dump(), warnings=warnings)
