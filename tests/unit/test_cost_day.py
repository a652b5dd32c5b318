"""`GET /rooms/{room}/cost?day=` takes a UTC day written `YYYY-MM-DD` and nothing else (docs/api.md:
`400` for another `day`): `strptime` alone also takes one-digit months and days and any Unicode
digits, which named a day the caller never wrote."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from quayutec.errors import InvalidInput
from quayutec.logic.runs import utc_day

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text", ["2026-12-03", "2024-02-29", " 2026-12-03 ", "1900-01-01", "9999-12-31"])
def test_a_day_written_yyyy_mm_dd_is_taken(text: str) -> None:
    got = utc_day(text)
    assert got.tzinfo is UTC and got == datetime.strptime(text.strip(), "%Y-%m-%d").replace(tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        "2026-1-1",  # one-digit month and day
        "2026-12-3",
        "\uff12\uff10\uff12\uff16-12-03",  # full-width digits
        "\u0662\u0660\u0662\u0666-12-03",  # Arabic-Indic digits
        "2026-02-30",
        "2026-13-01",
        "10000-01-01",
        "2026-12-03T00:00:00",
        "20261203",
        "garbage",
    ],
)
def test_anything_else_is_refused_naming_the_shape(text: str) -> None:
    with pytest.raises(InvalidInput, match="is not a UTC day YYYY-MM-DD"):
        utc_day(text)


def test_a_period_key_writes_the_year_at_four_digits() -> None:
    """``?day=0001-01-01`` answered the key ``1-01-01``: ``%Y`` does not pad early years."""
    from quayutec.logic.budgets import periods

    assert periods(datetime(1, 1, 1, tzinfo=UTC)) == {"day": "D#0001-01-01", "month": "M#0001-01"}
    assert periods(datetime(2026, 12, 4, 3, 0, tzinfo=UTC)) == {"day": "D#2026-12-04", "month": "M#2026-12"}
