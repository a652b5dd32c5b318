"""What a company may spend on its agents' model requests (design §12.4, "Budgets"): the rules, no
AWS call. A budget caps a company's spend, and each of its agents', per UTC day and month, in
USD for models with a known price and in tokens for the others. Each request reserves its
worst case before it is sent (the prompt's estimated input tokens plus the reply's
``max_tokens``), in the same transaction that records it; the answer settles the reserve to the
usage the provider reported, once. Amounts are integers: micro-USD and tokens.

Sources: the price table (quayutec.cost.prices, the cost line's), DynamoDB's condition expressions
(no arithmetic: each limit is checked as ``committed <= limit - reserve``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from quayutec.cost import prices
from quayutec.models import BudgetLimits, CompanyBudget
from quayutec.words import count

MICRO = 1_000_000  # micro-USD per USD
#: The shares of a budget at which its company gets a notice, once per period (design §12.4).
NOTICE_AT = (0.8, 1.0)


def periods(now: datetime) -> dict[str, str]:
    """The spend periods a request at ``now`` (UTC) counts in: ``{"day": "D#2026-12-02",
    "month": "M#2026-12"}`` (the sort keys of the company's spend counters)."""
    # the year at four digits: strftime's %Y does not pad years before 1000 on glibc ("1-01-01")
    day, month = f"{now.year:04d}-{now.month:02d}-{now.day:02d}", f"{now.year:04d}-{now.month:02d}"
    return {"day": f"D#{day}", "month": f"M#{month}"}


def estimate_tokens(text: str) -> int:
    """An upper bound of ``text``'s tokens for reserving: a byte-level BPE vocabulary (and a
    byte-fallback one) never makes more tokens than UTF-8 bytes, so a reserve never undercounts
    (one that did could pass a budget). English makes about a token per 4 bytes: the reserve is
    generous, and the answer's reported usage settles it."""
    return len(text.encode()) + 1


@dataclass(frozen=True)
class Reserve:
    """What one request reserves: ``micro_usd`` for a priced model, else ``tokens`` (one of the
    two is 0). ``priced``: the model has a known price."""

    micro_usd: int
    tokens: int
    priced: bool


def reserve_for(
    provider: str, model: str, input_tokens: int, max_tokens: int, overrides: prices.Overrides | None = None
) -> Reserve:
    """The reserve of a request of ``input_tokens`` (estimated) and at most ``max_tokens`` out:
    priced from the one price table, rounded up."""
    price = prices.model_price(model, provider, overrides)
    if price is None:
        return Reserve(0, input_tokens + max_tokens, False)
    return Reserve(math.ceil(input_tokens * price[0] + max_tokens * price[1]), 0, True)


def actual_for(
    provider: str,
    model: str,
    input_tokens: int | None,
    output_tokens: int | None,
    overrides: prices.Overrides | None = None,
) -> tuple[int, int]:
    """``(micro_usd, tokens)`` of the usage a reply reported, priced like :func:`reserve_for`
    (rounded up to the micro-dollar)."""
    used_in, used_out = input_tokens or 0, output_tokens or 0
    price = prices.model_price(model, provider, overrides)
    if price is None:
        return 0, used_in + used_out
    return math.ceil(used_in * price[0] + used_out * price[1]), 0


@dataclass(frozen=True)
class Limit:
    """One budget that applies to a request: ``scope`` ``company`` or the agent's id, ``period``
    ``day``/``month``, ``unit`` ``usd`` (micro-USD) or ``tokens``, ``amount`` in that unit."""

    scope: str
    period: str
    unit: str
    amount: int

    def describe(self, company: str) -> str:
        """``acme's daily budget of $20.00``, ``acme.a1's monthly budget of 50,000 tokens``."""
        whose = company if self.scope == "company" else self.scope
        when = "daily" if self.period == "day" else "monthly"
        what = f"${self.amount / MICRO:,.2f}" if self.unit == "usd" else count(self.amount, "token")
        return f"{whose}'s {when} budget of {what}"


def _limits_of(b: BudgetLimits, scope: str, priced: bool) -> list[Limit]:
    out = []
    for period in ("day", "month"):
        if priced:
            usd = b.daily_usd if period == "day" else b.monthly_usd
            if usd is not None:
                out.append(Limit(scope, period, "usd", round(usd * MICRO)))
        else:
            tokens = b.daily_tokens if period == "day" else b.monthly_tokens
            if tokens is not None:
                out.append(Limit(scope, period, "tokens", tokens))
    return out


def limits_for(budget: CompanyBudget | None, agent_id: str, agent_name: str, priced: bool) -> list[Limit]:
    """The budgets a request of ``agent_id`` (named ``agent_name`` in its company) counts
    against: its company's and its own, per period, in the request's unit (USD for a priced
    model, tokens for the others)."""
    if budget is None:
        return []
    out = _limits_of(budget, "company", priced)
    own = budget.agents.get(agent_name)
    if own is not None:
        out += _limits_of(own, agent_id, priced)
    return out


def counter_attr(scope: str, unit: str) -> str:
    """The spend counter's attribute a limit reads: ``committed_usd``/``committed_tokens`` for
    the company, ``agent_usd:{agent}``/``agent_tokens:{agent}`` for one agent."""
    return f"committed_{unit}" if scope == "company" else f"agent_{unit}:{scope}"


def crossed(limit: Limit, before: int, reserve: int) -> list[float]:
    """The notice shares (:data:`NOTICE_AT`) a reserve of ``reserve`` takes ``limit``'s counter
    past, from ``before``."""
    return [share for share in NOTICE_AT if before < share * limit.amount <= before + reserve]


def notice_id(company: str, limit: Limit, period_key: str, share: float) -> str:
    """The id of the notice that ``limit`` of ``company`` reached ``share`` in ``period_key``:
    one per room, period and share (a retried step, or concurrent runs, write it once)."""
    import hashlib

    digest = hashlib.sha256(
        f"{company}\x00{limit.scope}\x00{limit.unit}\x00{period_key}\x00{share}".encode()
    ).hexdigest()[:24]
    return f"notice-budget-{digest}"


def notice_text(company: str, limit: Limit, share: float) -> str:
    """What the company reads when ``limit`` reaches ``share`` (80 %: a warning; 100 %: its
    agents' requests are not sent until the period ends)."""
    if share >= 1.0:
        return (
            f"Budget reached: {limit.describe(company)}. Model requests it covers are not sent until the "
            f"{'day' if limit.period == 'day' else 'month'} (UTC) ends or the budget is raised."
        )
    return f"{round(share * 100)} % of {limit.describe(company)} is spent or reserved."
