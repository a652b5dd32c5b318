"""retry-after parsing and the retry decision (design §2.3)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from quayutec.providers import ProviderFailure, decide_next, parse_retry_after

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def failure(**kw: Any) -> ProviderFailure:
    base: dict[str, Any] = {
        "status": 529,
        "error_type": "overloaded_error",
        "error_code": None,
        "message": "Overloaded",
        "request_id": "req_1",
        "category": "overloaded",
        "retryable": True,
        "retry_after_s": None,
        "retry_after_header": None,
        "body": "{}",
    }
    base.update(kw)
    return ProviderFailure(**base)


# ----------------------------------------------------------------- parse_retry_after
@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"retry-after": "1"}, (1.0, "retry-after: 1")),
        ({"Retry-After": "1.5"}, (1.5, "retry-after: 1.5")),
        ({"retry-after": "171"}, (171.0, "retry-after: 171")),
        ({"retry-after-ms": "1500", "retry-after": "7"}, (1.5, "retry-after-ms: 1500")),
        ({"retry-after-ms": "250.5"}, (0.2505, "retry-after-ms: 250.5")),
        ({"retry-after": "Sat, 01 Mar 2025 12:00:10 GMT"}, (10.0, "retry-after: Sat, 01 Mar 2025 12:00:10 GMT")),
        ({"retry-after": "Sat, 01 Mar 2025 11:00:00 GMT"}, (0.0, "retry-after: Sat, 01 Mar 2025 11:00:00 GMT")),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, (0.0, "retry-after: Wed, 21 Oct 2015 07:28:00 GMT")),
        ({"retry-after": "soon"}, (None, None)),
        ({"retry-after": "-3"}, (None, None)),
        ({"retry-after-ms": "junk", "retry-after": "4"}, (4.0, "retry-after: 4")),
        ({}, (None, None)),
        (None, (None, None)),
    ],
)
def test_parse_retry_after(headers: Any, expected: tuple) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


# ----------------------------------------------------------------- decide_next
def test_no_header_waits_2_then_8_then_final_at_3() -> None:
    f = failure()
    first = decide_next(f, 1, False)
    second = decide_next(f, 2, False)
    third = decide_next(f, 3, False)
    assert (first.retry, first.wait_seconds) == (True, 2)
    assert first.reason == "default wait 2 s before request 2"
    assert (second.retry, second.wait_seconds) == (True, 8)
    assert second.reason == "default wait 8 s before request 3"
    assert (third.retry, third.wait_seconds) == (False, None)
    assert "request 3 of 3 was the last" in third.reason


def test_retry_after_is_rounded_up() -> None:
    d = decide_next(failure(retry_after_s=1.5, retry_after_header="retry-after: 1.5"), 1, False)
    assert (d.retry, d.wait_seconds) == (True, 2)
    assert d.reason == "retry-after: 1.5 -> wait 2 s before request 2"
    d = decide_next(failure(retry_after_s=0.001, retry_after_header="retry-after-ms: 1"), 2, False)
    assert (d.retry, d.wait_seconds) == (True, 1)


def test_retry_after_past_date_waits_zero() -> None:
    d = decide_next(
        failure(retry_after_s=0.0, retry_after_header="retry-after: Wed, 21 Oct 2015 07:28:00 GMT"), 1, False
    )
    assert (d.retry, d.wait_seconds) == (True, 0)


def test_twenty_seconds_is_tested_on_the_exact_value() -> None:
    at_limit = decide_next(failure(retry_after_s=20.0, retry_after_header="retry-after: 20"), 1, False)
    assert (at_limit.retry, at_limit.wait_seconds) == (True, 20)
    above = decide_next(failure(retry_after_s=20.001, retry_after_header="retry-after-ms: 20001"), 1, False)
    assert (above.retry, above.wait_seconds) == (False, None)
    assert "not waited for" in above.reason


def test_retry_after_171_is_not_waited_for() -> None:
    d = decide_next(
        failure(status=429, category="rate_limit", retry_after_s=171.0, retry_after_header="retry-after: 171"), 1, False
    )
    assert not d.retry and d.wait_seconds is None
    assert d.reason == "retry-after: 171 -> 171 s > 20 s: not waited for"


def test_retry_after_does_not_extend_the_cap() -> None:
    d = decide_next(failure(retry_after_s=1.0, retry_after_header="retry-after: 1"), 3, False)
    assert not d.retry


def test_final_failure_is_never_retried() -> None:
    d = decide_next(failure(status=429, category="quota", retryable=False), 1, False)
    assert (d.retry, d.wait_seconds, d.reason) == (False, None, "final: quota")


def test_owner_base_url_gets_one_request_but_keeps_its_classification() -> None:
    f = failure(status=503, category="server_error", retryable=True)
    d = decide_next(f, 1, True)
    assert (d.retry, d.wait_seconds, d.reason) == (False, None, "owner base URL: one request")
    assert f.retryable is True


def test_requests_made_must_count_the_failed_one() -> None:
    with pytest.raises(ValueError):
        decide_next(failure(), 0, False)
