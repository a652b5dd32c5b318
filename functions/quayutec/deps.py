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

from quayutec import resources as r
from quayutec import seams
from quayutec.dal import aws
from quayutec.dal.api_keys import ApiKeys
from quayutec.dal.files import FileStore
from quayutec.dal.ledger import LedgerStore
from quayutec.dal.rundata import RunDataStore
from quayutec.dal.store import RoomStore
from quayutec.dal.turns import TurnStore
from quayutec.settings import Settings, get_settings


def _utcnow() -> datetime:
    return datetime.now(UTC)


def secret_name(settings: Settings, company: str, provider: str) -> str:
    """The Secrets Manager name of a company's key for a provider (design §5):
    ``{prefix}/{stage}/{company}/{provider}``, so stages sharing an account never share keys."""
    return f"{settings.secret_prefix}/{settings.stage}/{company}/{provider}"


def read_api_key(settings: Settings, company: str, provider: str) -> str:
    """A company's provider key from Secrets Manager, through the Powertools parameters
    utility (cached 60 s). The secret is the key itself or JSON ``{"api_key": "..."}``.

    Raises ``aws_lambda_powertools.utilities.parameters.GetParameterError`` when missing.
    """
    value = _secrets_provider().get(secret_name(settings, company, provider), max_age=60)
    text = value.decode() if isinstance(value, bytes) else str(value)
    if text.lstrip().startswith("{"):
        return str(json.loads(text)["api_key"])
    return text


@lru_cache(maxsize=1)
def _secrets_provider() -> Any:
    """The Powertools secrets provider (its own cache) on the factory's observed client."""
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    return SecretsProvider(boto3_client=aws.secretsmanager())


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
    files: Any = None  # FileStore: room files and the retrieval index (design §8)
    #: An owner's model address may be a loopback one (registration and CallModel's check): the
    #: local engine's switch, set on the deps its stacks build (quaylocal.stack, through
    #: seams.hook_deps) for its local provider server on 127.0.0.1. No setting of a deployed
    #: function turns it on: there it is always off (design §5).
    allow_loopback_model_urls: bool = False
    #: The companies' API keys in the stage's usage plan (docs/design.md §5): set when the
    #: function reads USAGE_PLAN_NAME; ``None``: companies get no key of their own.
    api_keys: ApiKeys | None = None

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

    @property
    def turns(self) -> TurnStore:
        """Fair turns (design §12.3): the companies' turns, in the ledger table."""
        return TurnStore(self.ledger.table, client=getattr(self.ledger, "_client", None))


class UndeclaredResource(RuntimeError):
    """A function used a store whose name is not in its environment (``FunctionDef.reads``)."""


class _Undeclared:
    """Stands in for a store the running function does not declare: any use raises."""

    def __init__(self, store: str, env_var: str, settings: Any) -> None:
        self._message = (
            f"{type(settings).__name__.removesuffix('Settings') or 'this function'} "
            f"uses the {store} but does not read {env_var}: add it to its "
            "FunctionDef.reads in quayutec/resources.py"
        )

    def __getattr__(self, name: str) -> Any:
        raise UndeclaredResource(self._message)


def build_deps(settings: Settings | None = None) -> Deps:
    """The stores of the names the settings hold (a function's own model holds only the ones it
    reads; a store it does not declare raises :class:`UndeclaredResource` when used)."""
    s = settings or get_settings()

    def name(field: str) -> str | None:
        return getattr(s, field, None)

    def store(field: str, env_var: str, what: str, make: Callable[[str], Any]) -> Any:
        value = name(field)
        return make(value) if value else _Undeclared(what, env_var, s)

    plan = name("usage_plan_name")
    return Deps(
        settings=s,
        api_keys=ApiKeys(str(getattr(s, "stage", r.DEFAULT_STAGE)), plan) if plan else None,
        room=store("room_table", r.ROOM_TABLE.env_var, "room table", RoomStore),
        ledger=store(
            "ledger_table",
            r.LEDGER_TABLE.env_var,
            "ledger",
            lambda table: LedgerStore(table, name("claim_table") or ""),
        ),
        rundata=store("run_data_bucket", r.RUN_DATA_BUCKET.env_var, "run data bucket", RunDataStore),
        files=store(
            "files_bucket",
            r.FILES_BUCKET.env_var,
            "files bucket",
            lambda bucket: FileStore(name("room_table") or "", bucket),
        ),
    )


_DEFAULT: dict[int, tuple[Any, int, Deps]] = {}


def default_deps() -> Deps:
    """The deps of the running function's settings (one set on Lambda; one per function in the
    local stack, where functions share the process), built on first use, through the seam's deps
    hooks (:func:`quayutec.seams.hook_deps`: none on Lambda; the local engine's stack sets its
    switches), and built again when those change."""
    s = get_settings()  # cached: the same object while the environment is the same
    hit = _DEFAULT.get(id(s))
    if hit is None or hit[0] is not s or hit[1] != seams.deps_generation():
        generation = seams.deps_generation()
        hit = _DEFAULT[id(s)] = (s, generation, seams.hook_deps(build_deps(s)))
    return hit[2]


default_deps.cache_clear = _DEFAULT.clear  # type: ignore[attr-defined]


def reset() -> None:
    """Forget cached settings, clients and deps (after an environment change)."""
    from aws_lambda_powertools.utilities import parameters

    get_settings.cache_clear()  # type: ignore[attr-defined]  # set on it in quayutec.settings
    _DEFAULT.clear()  # default_deps.cache_clear
    _secrets_provider.cache_clear()
    aws.reset_clients()
    parameters.clear_caches()
