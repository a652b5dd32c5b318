"""The collaborators of the domain logic, built lazily from the settings. Handlers take an
optional :class:`Deps` (tests and the local stack inject their own); the default is built on
first use, never at import time."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from quayutec.dal import aws
from quayutec.dal.ledger import LedgerStore
from quayutec.dal.room import RoomStore
from quayutec.dal.rundata import RunDataStore
from quayutec.settings import Settings, get_settings


def _utcnow() -> datetime:
    return datetime.now(UTC)


def secret_name(settings: Settings, company: str, provider: str) -> str:
    """The Secrets Manager name of a company's key for a provider (SPEC §5):
    ``{prefix}/{stage}/{company}/{provider}``, so stages sharing an account never share keys."""
    return f"{settings.secret_prefix}/{settings.stage}/{company}/{provider}"


def read_api_key(settings: Settings, company: str, provider: str) -> str:
    """A company's provider key from Secrets Manager, through the Powertools parameters
    utility (cached 60 s). The secret is the key itself or JSON ``{"api_key": "..."}``.

    Raises ``aws_lambda_powertools.utilities.parameters.GetParameterError`` when missing.
    """
    from aws_lambda_powertools.utilities import parameters

    value = parameters.get_secret(secret_name(settings, company, provider), max_age=60)
    text = value.decode() if isinstance(value, bytes) else str(value)
    if text.lstrip().startswith("{"):
        return str(json.loads(text)["api_key"])
    return text


@dataclass
class Deps:
    settings: Settings
    room: RoomStore
    ledger: LedgerStore
    rundata: RunDataStore
    clock: Callable[[], datetime] = _utcnow
    api_key: Callable[[str, str], str] | None = None  # (company, provider) -> key
    call_provider: Callable[[Any], Any] | None = None  # quayutec.providers.call_model
    sfn: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def get_api_key(self, company: str, provider: str) -> str:
        if self.api_key is not None:
            return self.api_key(company, provider)
        return read_api_key(self.settings, company, provider)

    def provider(self) -> Callable[[Any], Any]:
        if self.call_provider is not None:
            return self.call_provider
        from quayutec.providers import call_model

        return call_model

    def stepfunctions(self) -> Any:
        return self.sfn or aws.stepfunctions()


def build_deps(settings: Settings | None = None) -> Deps:
    s = settings or get_settings()
    return Deps(settings=s, room=RoomStore(s.room_table), ledger=LedgerStore(s.ledger_table, s.claim_table),
                rundata=RunDataStore(s.run_data_bucket))


@lru_cache(maxsize=1)
def default_deps() -> Deps:
    return build_deps()


def reset() -> None:
    """Forget cached settings, clients and deps (after an environment change)."""
    from aws_lambda_powertools.utilities import parameters

    get_settings.cache_clear()
    default_deps.cache_clear()
    aws.reset_clients()
    parameters.clear_caches()
