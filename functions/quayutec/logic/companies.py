"""Companies (docs/design.md §5, §10): an operator creates one and staffs it; its own people read
it, set its rights policy and its budget and read its spend. The domain service of
``/companies``; the scenario player, the chaos lab and the test fixtures create companies
through it too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from quayutec.dal.audit import audit_put, new_entry
from quayutec.dal.companies import budget_of
from quayutec.dal.keys import budget_key
from quayutec.deps import Deps
from quayutec.errors import Conflict, Forbidden, InvalidInput, LimitReached, NotFound
from quayutec.logic import budgets, rights
from quayutec.logic.access import Principal, own_company, own_people
from quayutec.models import MAX_CONCURRENT_RUNS_LIMIT, AuditEntry, Company, CompanyBudget, RightsPolicy

MIN_CONCURRENT_RUNS = 1


@dataclass(frozen=True)
class Spend:
    """A company's spend counter of one period (design §12.4): its key (``D#…``/``M#…``), the
    counter item's attributes (``{}`` before any spend) and the budget it is held against."""

    key: str
    counter: dict[str, Any]
    budget: CompanyBudget


class Companies:
    """``deps``: the runtime's stores and settings (:mod:`quayutec.deps`)."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room

    def create(
        self,
        who: Principal,
        company_id: str,
        people: list[str],
        rights_policy: RightsPolicy | None = None,
        max_concurrent_runs: int | None = None,
    ) -> Company:
        """A new company (operator only; people deduplicated, in order). Raises Forbidden,
        LimitReached (more than ``max_company_people``), Conflict (the id is taken).
        ``rights_policy``: its policy from the start (set-up; the API sets it with
        :meth:`set_policy`). ``max_concurrent_runs``: its runs active at once (design §12.3;
        ``None``: the default, 10). With the stage's usage plan configured (``deps.api_keys``) the
        company gets its API key first (:meth:`quayutec.dal.api_keys.ApiKeys.ensure`: found by name
        on a retry, so a crash between the key and the company item makes no second key)."""
        who.require_admin()
        company = Company(id=company_id, people=list(dict.fromkeys(people)), rights=rights_policy or RightsPolicy())
        most = self.deps.settings.max_company_people
        if len(company.people) > most:
            raise LimitReached(f"company {company_id!r} with {len(company.people)} people", most, "MAX_COMPANY_PEOPLE")
        created = new_entry(who.member, True, "company_created", company_id, f"people: {', '.join(company.people)}")
        api_key = None
        if self.deps.api_keys is not None:  # its own API throttle (docs/design.md §5)
            if self.store.get_company(company_id) is not None:  # no key made for a taken id
                raise Conflict(f"company {company_id!r} exists already")
            # Found by name when a create before this one made it and failed before the write
            api_key = self.deps.api_keys.ensure(company_id)
        if not self.store.create_company(company, audit_put(self.store.table, company_id, created), api_key):
            raise Conflict(f"company {company_id!r} exists already")
        if max_concurrent_runs is not None and max_concurrent_runs != company.max_concurrent_runs:
            return self.set_max_concurrent_runs(who, company_id, max_concurrent_runs)
        return company

    def set_max_concurrent_runs(self, who: Principal, company_id: str, value: int) -> Company:
        """Set how many runs of the company's agents may be active at once (operator only,
        design §12.3): 1 to 1,000. It holds from the next turn taken: runs active now finish.
        Raises Forbidden, InvalidInput (out of range), NotFound."""
        who.require_admin()
        if not MIN_CONCURRENT_RUNS <= value <= MAX_CONCURRENT_RUNS_LIMIT:
            raise InvalidInput(
                f"max_concurrent_runs must be {MIN_CONCURRENT_RUNS} to {MAX_CONCURRENT_RUNS_LIMIT}, not {value}"
            )
        entry = new_entry(who.member, True, "max_concurrent_runs_set", company_id, str(value))
        if not self.store.set_max_concurrent_runs(
            company_id,
            value,
            self.deps.turns.set_cap_item(company_id, value),
            audit_put(self.store.table, company_id, entry),
        ):
            raise NotFound(f"company {company_id!r} does not exist")
        return self.store.get_company(company_id)  # type: ignore[return-value]

    def get(self, who: Principal, company_id: str) -> Company:
        """The company, to its own people or an operator; NotFound otherwise."""
        return own_company(self.store, company_id, who)

    def add_person(self, who: Principal, company_id: str, person: str) -> Company:
        """Add a person: an operator, or one of the company's own people. Audited (who, when).
        Raises NotFound (no such company, or another company's), LimitReached, Conflict (a
        person of it already)."""
        if self.store.get_company(company_id) is None or not (who.admin or who.company == company_id):
            raise NotFound(f"company {company_id!r} does not exist")
        most = self.deps.settings.max_company_people
        entry = new_entry(who.member, who.admin, "person_added", person)
        if not self.store.add_person(company_id, person, most, audit_put(self.store.table, company_id, entry)):
            company = self.store.get_company(company_id)
            if company is not None and person not in company.people and len(company.people) >= most:
                raise LimitReached(
                    f"company {company_id!r} has {len(company.people)} people", most, "MAX_COMPANY_PEOPLE"
                )
            raise Conflict(f"{person!r} is a person of {company_id!r} already")
        return self.store.get_company(company_id)  # type: ignore[return-value]

    # ------------------------------------------------------------------ rights policy
    def policy(self, who: Principal, company_id: str) -> RightsPolicy:
        return own_company(self.store, company_id, who).rights

    def set_policy(self, who: Principal, company_id: str, policy: RightsPolicy) -> list[str]:
        """Set the company's rights policy (its own people only: never an operator, never another
        company); returns the policy's warnings. Raises Forbidden (an operator), NotFound,
        LimitReached (rules for more than ``max_policy_rules`` agents), InvalidInput (its
        refusals, :func:`quayutec.logic.rights.policy_problems`)."""
        if who.company != company_id:  # operators administer companies, not their rights
            if who.admin and who.company is None:
                raise Forbidden("an operator cannot change a company's rights policy: only its own people can")
            raise NotFound(f"company {company_id!r} does not exist")
        own_company(self.store, company_id, who)
        most = self.deps.settings.max_policy_rules
        if len(policy.agents) > most:
            raise LimitReached(
                f"policy of {company_id!r}: rules for {len(policy.agents)} agents", most, "MAX_POLICY_RULES"
            )
        refusals, warnings = rights.policy_problems(policy, company_id, self.store.agents_of(company_id))
        if refusals:
            raise InvalidInput("; ".join(refusals))
        if not self.store.set_policy(company_id, policy):
            raise NotFound(f"company {company_id!r} does not exist")
        return warnings

    # ------------------------------------------------------------------ budget and spend
    def budget(self, who: Principal, company_id: str) -> CompanyBudget:
        """The company's budget (``{}`` when it set none), to its own people only."""
        own_people(self.store, company_id, who)
        return self.store.get_budget(company_id) or CompanyBudget()

    def set_budget(self, who: Principal, company_id: str, budget: CompanyBudget) -> CompanyBudget:
        """Set (replace) the company's budget, by its own people only."""
        own_people(self.store, company_id, who)
        self.store.put_budget(company_id, budget)
        return budget

    def spend(self, who: Principal, company_id: str, period: Literal["day", "month"]) -> Spend:
        """The spend counter of the current UTC day or month and the budget, read together
        (design §12.4), to the company's own people only."""
        own_people(self.store, company_id, who)
        key = budgets.periods(self.deps.clock())[period]
        item, counters = self.deps.ledger.spend_reads(company_id, [key], (self.store.table, budget_key(company_id)))
        return Spend(key=key, counter=counters.get(key, {}), budget=budget_of(item) or CompanyBudget())

    # ------------------------------------------------------------------ audit trail
    def audit(self, who: Principal, company_id: str, limit: int) -> list[AuditEntry]:
        """The company's audit trail, newest first (its people, or an operator): who created it,
        added its people, issued and revoked its tokens and set its run cap, and when
        (design §5). Raises NotFound."""
        own_company(self.store, company_id, who)
        return self.store.audit_trail(company_id, limit)
