"""Phase spans (design §2.8): each run phase's start and end, carried in the run state (phase
names and times only) and written on the run's final ledger write, which the run makes anyway:
no extra AWS call. The phase wrapper opens a span for its invocation (:func:`recording`); the
final write reads the spans so far, the open one ending now (:func:`so_far`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from quayutec.models import PhaseSpan, now_iso

# At most this many spans are kept (a run retrying its model many times): the first and the newest.
MAX_SPANS = 64

_OPEN: ContextVar[tuple[list[PhaseSpan], str, str] | None] = ContextVar("quay_phase_span", default=None)


def _capped(spans: list[PhaseSpan]) -> list[PhaseSpan]:
    return spans if len(spans) <= MAX_SPANS else spans[:1] + spans[-(MAX_SPANS - 1) :]


@contextmanager
def recording(prior: list[PhaseSpan] | None, phase: str) -> Iterator[None]:
    """Open ``phase``'s span (starting now) after ``prior`` for the ``with`` block."""
    token = _OPEN.set((list(prior or []), phase, now_iso()))
    try:
        yield
    finally:
        _OPEN.reset(token)


def closed() -> list[PhaseSpan] | None:
    """The spans so far with the open one ending now; ``None`` outside :func:`recording`."""
    current = _OPEN.get()
    if current is None:
        return None
    prior, phase, start = current
    return _capped([*prior, PhaseSpan(phase=phase, start=start, end=now_iso())])


def so_far() -> list[dict[str, Any]] | None:
    """:func:`closed` as JSON objects ``{"phase", "start", "end"}`` (ISO-8601 UTC) for a ledger write."""
    spans = closed()
    return None if spans is None else [s.model_dump(mode="json") for s in spans]
