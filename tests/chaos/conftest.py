"""Fixtures of the chaos tests: a chaos lab (the local stack with fault injection switched on,
a provider server, companies acme and bolt) shared by the tests of a module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from quaylab import faults
from quaylab.chaos import ChaosLab


@pytest.fixture(scope="module")
def lab() -> Iterator[ChaosLab]:
    with ChaosLab() as chaos_lab:
        yield chaos_lab


@pytest.fixture(autouse=True)
def _no_plan_left() -> Iterator[None]:
    yield
    faults.disarm()
