"""Bearer tokens (docs/design.md §5): an operator issues one for a person of a company (shown
once, stored hashed), lists a company's and revokes one."""

from __future__ import annotations

from quayutec.dal.auth import Principal as TokenPrincipal
from quayutec.dal.auth import TokenInfo, TokenStore
from quayutec.deps import Deps
from quayutec.errors import InvalidInput, NotFound
from quayutec.logic.access import Principal


class Tokens:
    """``deps``: the runtime's stores (the tokens live in the room table)."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room

    @property
    def _tokens(self) -> TokenStore:
        return TokenStore(self.store.table)

    def issue(self, who: Principal, company_id: str, member: str) -> tuple[str, TokenPrincipal]:
        """A new token of ``member`` (a person of the company) and what it stands for (operator
        only). Raises Forbidden, NotFound, InvalidInput (not a person of the company)."""
        who.require_admin()
        company = self.store.get_company(company_id)
        if company is None:
            raise NotFound(f"company {company_id!r} does not exist")
        if member not in company.people:
            raise InvalidInput(f"member: {member!r} is not a person of company {company_id!r}")
        return self._tokens.issue(company_id, member)

    def list(self, who: Principal, company_id: str) -> list[TokenInfo]:
        who.require_admin()
        if self.store.get_company(company_id) is None:
            raise NotFound(f"company {company_id!r} does not exist")
        return self._tokens.list(company_id)

    def revoke(self, who: Principal, company_id: str, token_id: str) -> None:
        """Revoke a token (operator only). Raises Forbidden, NotFound."""
        who.require_admin()
        if not self._tokens.revoke(company_id, token_id):
            raise NotFound(f"token {token_id!r} of company {company_id!r} does not exist")
