"""The domain services the routes call, on the running function's deps (built on first use:
:func:`quayutec.deps.default_deps`). The rules themselves (membership, ownership, registration,
placement) are the services' (:mod:`quayutec.logic.access` and the services of
:mod:`quayutec.logic.services`); a route parses, calls one, and maps its result."""

from __future__ import annotations

from quayutec.deps import default_deps
from quayutec.logic.services import Services


def services() -> Services:
    return Services(default_deps())
