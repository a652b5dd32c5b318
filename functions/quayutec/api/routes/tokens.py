"""Bearer tokens (operator only): issued for a person of a company, shown once, stored hashed."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.routes._params import CompanyId, TokenId
from quayutec.api.schemas import Me, Ok, TokenIn, TokenInfoOut, TokenIssued, TokenList

router = APIGatewayRouter()


@router.post(
    "/companies/<company_id>/tokens",
    status_code=201,
    tags=["tokens"],
    summary="Issue a bearer token for a person of the company (operator)",
)
def issue_token(company_id: CompanyId, body: Annotated[TokenIn, Body()]) -> TokenIssued:
    token, principal = services().tokens.issue(caller(), company_id, body.member)
    return TokenIssued(token=token, token_id=principal.token_id, company=company_id, member=body.member)


@router.get("/companies/<company_id>/tokens", tags=["tokens"], summary="The company's tokens (operator)")
def list_tokens(company_id: CompanyId) -> TokenList:
    tokens = services().tokens.list(caller(), company_id)
    return TokenList(tokens=[TokenInfoOut.model_validate(t.model_dump()) for t in tokens])


@router.delete("/companies/<company_id>/tokens/<token_id>", tags=["tokens"], summary="Revoke a token (operator)")
def revoke_token(company_id: CompanyId, token_id: TokenId) -> Ok:
    services().tokens.revoke(caller(), company_id, token_id)
    return Ok(detail={"revoked": token_id})


@router.get("/me", tags=["tokens"], summary="Who the token is: company, person, operator or not")
def me() -> Me:
    """The caller as the authorizer resolved the token (no read): ``quay whoami``, and the room
    page, which offers only the actions its person may take (docs/design.md §5)."""
    who = caller()
    return Me(company=who.company, member=who.member, admin=who.admin)
