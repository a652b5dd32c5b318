"""Why a run failed (docs/design.md §13): ``failure_cause`` sorts every failure into one cause,
so only our own faults reach the ``RunsFailedByFault`` alarm."""

from __future__ import annotations

import pytest

from quayutec.logic.phases.record_failure import (
    BUDGET,
    CUSTOMER,
    CUSTOMER_CATEGORIES,
    FAULT,
    PROVIDER,
    PROVIDER_CATEGORIES,
    TIME_LIMIT,
    failure_cause,
)
from quayutec.models import ModelRequestRecord
from quayutec.providers.call_policy import RULES

pytestmark = pytest.mark.unit


def _req(category: str | None, outcome: str = "error") -> ModelRequestRecord:
    return ModelRequestRecord(n=1, sent_at="2026-01-01T00:00:00Z", provider="anthropic", model="m").model_copy(
        update={"category": category, "outcome": outcome}
    )


def test_every_category_of_the_classifier_has_its_cause() -> None:
    """A new category in call_policy.RULES must be sorted here (else its runs count as faults)."""
    categories = {rule.category for rule in RULES}
    assert categories - CUSTOMER_CATEGORIES - PROVIDER_CATEGORIES == {"unexpected"}
    assert not CUSTOMER_CATEGORIES & PROVIDER_CATEGORIES


@pytest.mark.parametrize(
    ("error", "requests", "cause"),
    [
        ("ModelCallFailed", [_req("rate_limit"), _req("auth")], CUSTOMER),
        ("ModelCallFailed", [_req("spend_limit")], CUSTOMER),
        ("ModelCallFailed", [_req("server_error")] * 3, PROVIDER),
        ("ModelCallFailed", [_req("unexpected")], FAULT),
        ("ModelCallFailed", [_req("lost", "lost")], FAULT),
        ("ModelCallFailed", [], FAULT),
        ("BudgetExhausted", [_req("rate_limit")], BUDGET),
        ("RunTimedOut", [], TIME_LIMIT),
        ("States.Timeout", [], TIME_LIMIT),
        ("TIMED_OUT", [], FAULT),  # the execution's own 8-day limit: the run's limits should end it first
        ("RunStateInvalid", [], FAULT),
        ("TransientError", [], FAULT),
        ("ExecutionAborted", [], FAULT),
        ("Lambda.Unknown", [_req("auth")], FAULT),
    ],
)
def test_failure_cause(error: str, requests: list[ModelRequestRecord], cause: str) -> None:
    assert failure_cause(error, requests) == cause
