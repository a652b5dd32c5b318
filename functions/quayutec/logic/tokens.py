"""Bearer tokens (docs/design.md §5): shown once, stored hashed. A company's own people issue
tokens for its people, list and revoke them; an operator issues a company's first token only
(its bootstrap: while none of its people holds a live token), and may list and revoke them.
Every issue and revoke is an entry of the company's audit trail, written in the same
transaction."""

from __future__ import annotations

from quayutec.dal.audit import audit_put, new_entry
from quayutec.dal.auth import Principal as TokenPrincipal
from quayutec.dal.auth import TokenInfo, TokenStore
from quayutec.deps import Deps
from quayutec.errors import Forbidden, InvalidInput, NotFound
from quayutec.logic.access import Principal
from quayutec.models import Company


class Tokens:
    """``deps``: the runtime's stores (the tokens live in the room table)."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room

    @property
    def _tokens(self) -> TokenStore:
        return TokenStore(self.store.table)

    def _company(self, who: Principal, company_id: str) -> Company:
        """The company, for an operator or one of its people; NotFound for anyone else."""
        company = self.store.get_company(company_id)
        if company is None or not (who.admin or who.company == company_id):
            raise NotFound(f"company {company_id!r} does not exist")
        return company

    def issue(self, who: Principal, company_id: str, member: str) -> tuple[str, TokenPrincipal]:
        """A new token of ``member`` (a person of the company) and what it stands for: issued by
        one of the company's people, or by an operator while none of its people holds a live
        token (the company's bootstrap). Audited. Raises NotFound (no such company, or another
        company's), Forbidden (an operator after the bootstrap), InvalidInput (not a person of
        the company)."""
        company = self._company(who, company_id)
        if member not in company.people:
            raise InvalidInput(f"member: {member!r} is not a person of company {company_id!r}")
        if who.admin:
            live = [t for t in self._tokens.list(company_id) if not t.revoked]
            if live:
                raise Forbidden(
                    f"company {company_id!r} has people with live tokens: they issue its tokens now "
                    "(POST /companies/{company}/tokens with one of theirs); an operator issues only a "
                    "company's first token (docs/design.md §5)"
                )
        entry = new_entry(who.member, who.admin, "token_issued", member)
        return self._tokens.issue(company_id, member, audit=audit_put(self.store.table, company_id, entry))

    def list(self, who: Principal, company_id: str) -> list[TokenInfo]:
        """The company's tokens (never a token itself): its people or an operator. Raises NotFound."""
        self._company(who, company_id)
        return self._tokens.list(company_id)

    def revoke(self, who: Principal, company_id: str, token_id: str) -> None:
        """Revoke a token of the company (its people or an operator); idempotent, audited once.
        Raises NotFound."""
        self._company(who, company_id)
        entry = new_entry(who.member, who.admin, "token_revoked", token_id)
        if not self._tokens.revoke(company_id, token_id, audit=audit_put(self.store.table, company_id, entry)):
            raise NotFound(f"token {token_id!r} of company {company_id!r} does not exist")
