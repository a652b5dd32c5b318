"""Bearer tokens: issued for a person of a company, shown once, stored hashed; by the company's own
people, or by an operator for its first token only; every issue and revoke audited
(docs/design.md §5)."""

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
    summary="Issue a bearer token for a person of the company (its people; an operator: its first)",
)
def issue_token(company_id: CompanyId, body: Annotated[TokenIn, Body()]) -> TokenIssued:
    """A person of the company issues tokens for its people. An operator issues only the
    company's first (while none of its people holds a live token: its bootstrap), else 403.
    Another company's person: 404. The token is shown once; the audit trail names who issued it
    (docs/design.md §5)."""
    token, principal = services().tokens.issue(caller(), company_id, body.member)
    return TokenIssued(token=token, token_id=principal.token_id, company=company_id, member=body.member)


@router.get(
    "/companies/<company_id>/tokens", tags=["tokens"], summary="The company's tokens (its people, or an operator)"
)
def list_tokens(company_id: CompanyId) -> TokenList:
    tokens = services().tokens.list(caller(), company_id)
    return TokenList(tokens=[TokenInfoOut.model_validate(t.model_dump()) for t in tokens])


@router.delete(
    "/companies/<company_id>/tokens/<token_id>",
    tags=["tokens"],
    summary="Revoke a token (its company's people, or an operator)",
)
def revoke_token(company_id: CompanyId, token_id: TokenId) -> Ok:
    services().tokens.revoke(caller(), company_id, token_id)
    return Ok(detail={"revoked": token_id})


@router.get("/me", tags=["tokens"], summary="Who the token is: company, person, operator or not")
def me() -> Me:
    """The caller as the authorizer resolved the token (no read): ``quay whoami``, and the room
    page, which offers only the actions its person may take (docs/design.md §5)."""
    who = caller()
    return Me(company=who.company, member=who.member, admin=who.admin)
