"""A model request's reserve and its settlement in its company's spend counters (design §12.4): the
call path's part of budgets. CallModel reserves before each request, in the transaction that
records it; the outcome write settles the reserve to the reported usage, once."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from aws_lambda_powertools.metrics import MetricUnit

from quayutec.cost import line as cost_line
from quayutec.dal.companies import budget_of
from quayutec.dal.keys import budget_key
from quayutec.dal.ledger import BudgetRefused, SpendCount
from quayutec.deps import Deps
from quayutec.logic import budgets, ids
from quayutec.logic.notices import company_notice
from quayutec.models import ModelRequestRecord, RunRef

from .common import logger, metrics


class BudgetReached(Exception):
    """A request would pass ``limit``: it is not sent (design §12.4)."""

    def __init__(self, limit: budgets.Limit) -> None:
        super().__init__(limit.describe(limit.scope))
        self.limit = limit


@dataclass
class Reservation:
    """A request's reserve and the counts that carry it: ``counts`` go into the transaction that
    records the request; ``record`` is the request with its reserve written on it."""

    record: ModelRequestRecord
    counts: list[SpendCount]
    limits: list[budgets.Limit] = field(default_factory=list)
    before: dict[budgets.Limit, int] = field(default_factory=dict)
    amount: int = 0


def reserve(
    deps: Deps,
    company: str,
    record: ModelRequestRecord,
    prompt: str,
    max_tokens: int,
    now: datetime,
    room_id: str = "",
) -> Reservation:
    """The reserve of request ``record`` (of ``record.agent_id``'s company ``company``, in room
    ``room_id``, counted in the room's spend too) with ``prompt`` and at most ``max_tokens`` out,
    against its budgets as one read finds them. Raises BudgetReached when the reserve would pass
    a budget, TransientError on throttling."""
    agent_id = record.agent_id or ""
    periods = budgets.periods(now)
    item, counters = deps.ledger.spend_reads(
        company, [periods["day"], periods["month"]], (deps.room.table, budget_key(company))
    )
    budget = budget_of(item)
    overrides = cost_line.model_prices_of(deps.settings)
    estimate = budgets.estimate_tokens(prompt)
    r = budgets.reserve_for(record.provider, record.model, estimate, max_tokens, overrides)
    unit, amount = ("usd", r.micro_usd) if r.priced else ("tokens", r.tokens)
    limits = budgets.limits_for(budget, agent_id, ids.agent_name(agent_id), r.priced)
    before = {
        lim: int(counters.get(periods[lim.period], {}).get(budgets.counter_attr(lim.scope, unit), 0)) for lim in limits
    }
    over = [lim for lim in limits if before[lim] + amount > lim.amount]
    if over:
        raise BudgetReached(over[0])
    counts = [
        SpendCount(
            company=company,
            agent_id=agent_id,
            model=record.model,
            period=periods[p],
            unit=unit,
            amount=amount,
            reserved=amount,
            room_id=room_id,
            checks=tuple(
                (budgets.counter_attr(lim.scope, unit), lim.amount - amount) for lim in limits if lim.period == p
            ),
        )
        for p in ("day", "month")
    ]
    stamped = record.model_copy(
        update={
            "reserve_usd": r.micro_usd,
            "reserve_tokens": r.tokens,
            "spend_day": periods["day"],
            "spend_month": periods["month"],
            "spend_room": room_id or None,
            "company": company,
        }
    )
    return Reservation(stamped, counts, limits, before, amount)


def refused_limit(res: Reservation, refused: BudgetRefused) -> budgets.Limit:
    """Which of the reservation's limits a concurrent request took first (the counters as the
    cancelled transaction found them)."""
    unit = res.counts[0].unit
    periods = {"day": res.counts[0].period, "month": res.counts[1].period}
    for lim in res.limits:
        held = refused.counters.get(periods[lim.period])
        if held is not None and int(held.get(budgets.counter_attr(lim.scope, unit), 0)) + res.amount > lim.amount:
            return lim
    return res.limits[0]


def post_notices(deps: Deps, ref: RunRef, company: str, res: Reservation) -> None:
    """The company-only notices of the budgets this reserve took past 80 % or 100 % (design §12.4):
    once per budget, period and room."""
    for lim in res.limits:
        period = res.counts[0 if lim.period == "day" else 1].period
        for share in budgets.crossed(lim, res.before[lim], res.amount):
            post_reached(deps, ref, company, lim, period, share)


def post_reached(deps: Deps, ref: RunRef, company: str, lim: budgets.Limit, period: str, share: float = 1.0) -> None:
    """The notice that ``lim`` reached ``share`` (only ``company`` sees it), once."""
    deps.room.put_message(
        company_notice(
            id=budgets.notice_id(company, lim, period, share),
            room_id=ref.room_id,
            company=company,
            text=budgets.notice_text(company, lim, share),
            run_id=ref.run_id,
        )
    )


def refuse(deps: Deps, ref: RunRef, company: str, lim: budgets.Limit, now: datetime) -> str:
    """A request ``lim`` refuses: its notice (once per period) and the metric; returns the reason
    the run ends with ("budget reached: acme's daily budget of $20.00")."""
    post_reached(deps, ref, company, lim, budgets.periods(now)[lim.period])
    metrics.add_metric(name="BudgetRefused", unit=MetricUnit.Count, value=1)
    logger.info("model request not sent: budget reached", extra={"run_id": ref.run_id, "budget": lim.scope})
    return f"budget reached: {lim.describe(company)}"


def settlement(deps: Deps, outcome: ModelRequestRecord) -> list[SpendCount] | None:
    """The counts that settle the reserve written on a request to its ``outcome`` (design §12.4): a
    reply's reported
    usage; no usage reported, no answer known (a timeout, a lost request) keeps the reserve;
    an error the provider answered with costs nothing. ``None``: the request reserved nothing."""
    pending = outcome
    if pending.spend_day is None or pending.spend_month is None or pending.company is None:
        return None
    priced = pending.reserve_tokens == 0
    unit, reserved = ("usd", pending.reserve_usd) if priced else ("tokens", pending.reserve_tokens)
    if outcome.outcome == "ok" and (outcome.input_tokens is not None or outcome.output_tokens is not None):
        usd, tokens = budgets.actual_for(
            outcome.provider,
            outcome.model,
            outcome.input_tokens,
            outcome.output_tokens,
            cost_line.model_prices_of(deps.settings),
        )
        actual = usd if priced else tokens
    elif outcome.outcome == "error" and outcome.status is not None:
        actual = 0  # the provider answered with an error: nothing was generated
    else:
        actual = reserved
    return [
        SpendCount(
            company=pending.company,
            agent_id=pending.agent_id or "",
            model=pending.model,
            period=period,
            unit=unit,
            amount=actual - reserved,
            reserved=-reserved,
            room_id=pending.spend_room or "",
        )
        for period in (pending.spend_day, pending.spend_month)
    ]
