"""The runtime's settings: validated environment models, read through a cached getter (never at
import time). Names come from ``quayutec.resources``.

:class:`Settings` holds every variable any function reads (with defaults: tests, the CLI and
synth-time validation use it). Each deployed function validates its environment with its own
model, :func:`settings_model` (``ClaimAndReadFunctionSettings``, ...): only the variables its
``FunctionDef.reads`` names, each required except the optional endpoint overrides. So a function
deployed without a variable it reads fails at cold start naming it, and reading a setting it
does not declare is an ``AttributeError`` (locally too: the local stack runs each invocation
with that function's own environment, :func:`function_environment`). Which function is running
comes from ``_HANDLER``, the handler string the Lambda runtime sets for every function.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache, lru_cache
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, ValidationError, field_validator
from pydantic_core import PydanticUndefined

from quayutec import resources as r
from quayutec.errors import Misconfigured

#: The largest value each limit may be set to: with the longest ids, the room item and the
#: company item stay well under DynamoDB's 400 KB item (tests/unit/test_item_limits.py).
HARD_LIMITS = {"MAX_ROOM_AGENTS": 1500, "MAX_ROOM_MEMBERS": 100, "MAX_COMPANY_PEOPLE": 1000, "MAX_POLICY_RULES": 500}

#: The ASL's execution ``TimeoutSeconds`` is 691200 s (8 days); an approval expiry must leave
#: room for the 300 s of active time (design §2.6).
MAX_APPROVAL_TIMEOUT_SECONDS = 604800


class ModelPrice(BaseModel):
    """A model's price, USD per million tokens (the ``MODEL_PRICES`` setting)."""

    model_config = {"extra": "forbid", "frozen": True, "defer_build": True}
    input: float = Field(ge=0, le=10_000)
    output: float = Field(ge=0, le=10_000)

    @field_validator("input", "output")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("a finite number of USD per million tokens")
        return v


def _json_object(value: Any) -> Any:
    """A setting holding a JSON object: its text parsed (an empty text is ``{}``)."""
    if isinstance(value, str):
        try:
            return json.loads(value) if value.strip() else {}
        except ValueError as exc:
            raise ValueError(f"not JSON: {exc}") from None
    return value


#: ``MODEL_PRICES``: ``{"model-id": {"input": usd, "output": usd}}`` per million tokens; overrides
#: (and adds to) the built-in model prices of the cost line (quayutec.cost.prices.MODEL_PRICES).
ModelPrices = Annotated[
    dict[Annotated[str, Field(min_length=1, max_length=200)], ModelPrice], BeforeValidator(_json_object)
]


class Settings(BaseModel):
    room_table: str = Field(alias=r.ROOM_TABLE.env_var)
    claim_table: str = Field(alias=r.CLAIM_TABLE.env_var)
    ledger_table: str = Field(alias=r.LEDGER_TABLE.env_var)
    idempotency_table: str = Field(alias=r.IDEMPOTENCY_TABLE.env_var)
    run_data_bucket: str = Field(alias=r.RUN_DATA_BUCKET.env_var)
    files_bucket: str = Field(default="", alias=r.FILES_BUCKET.env_var)
    wake_queue_url: str = Field(default="", alias=r.WAKE_QUEUE_ENV)
    state_machine_arn: str = Field(default="", alias=r.STATE_MACHINE_ENV)

    hop_limit: int = Field(default=8, ge=0, alias="HOP_LIMIT")
    approval_timeout_s: int = Field(
        default=86400, ge=1, le=MAX_APPROVAL_TIMEOUT_SECONDS, alias="APPROVAL_TIMEOUT_SECONDS"
    )
    run_time_limit_s: int = Field(default=300, ge=1, alias="RUN_TIME_LIMIT_SECONDS")
    # Fair turns (design §12.3): a turn's lease (a lost release frees it after this) and how often
    # a waiting run looks again (whole seconds: a Task's TimeoutSecondsPath).
    turn_lease_s: int = Field(default=420, ge=2, le=86400, alias="TURN_LEASE_SECONDS")
    turn_recheck_s: int = Field(default=60, ge=1, le=3600, alias="TURN_RECHECK_SECONDS")
    model_timeout_s: float = Field(default=120, gt=0, alias="MODEL_TIMEOUT_SECONDS")
    recent_messages: int = Field(default=50, ge=1, le=1000, alias="RECENT_MESSAGES")
    memory_lines: int = Field(default=100, ge=1, le=1000, alias="MEMORY_LINES")
    file_passages: int = Field(default=5, ge=0, le=50, alias="FILE_PASSAGES")
    max_file_chunks: int = Field(default=100000, ge=1, alias="MAX_FILE_CHUNKS")
    # Limits of one item (docs/design.md §1): each at most the bound that keeps the item well
    # under DynamoDB's 400 KB with the longest ids (tests/unit/test_item_limits.py).
    max_room_agents: int = Field(default=1000, ge=1, le=HARD_LIMITS["MAX_ROOM_AGENTS"], alias="MAX_ROOM_AGENTS")
    max_room_members: int = Field(default=50, ge=1, le=HARD_LIMITS["MAX_ROOM_MEMBERS"], alias="MAX_ROOM_MEMBERS")
    max_company_people: int = Field(
        default=1000, ge=1, le=HARD_LIMITS["MAX_COMPANY_PEOPLE"], alias="MAX_COMPANY_PEOPLE"
    )
    max_policy_rules: int = Field(default=500, ge=1, le=HARD_LIMITS["MAX_POLICY_RULES"], alias="MAX_POLICY_RULES")
    model_prices: ModelPrices = Field(default={}, alias="MODEL_PRICES")
    secret_prefix: str = Field(default=r.DEFAULT_SECRET_PREFIX, alias=r.SECRET_PREFIX_ENV)
    stage: str = Field(default=r.DEFAULT_STAGE, min_length=1, pattern=r"^[A-Za-z0-9-]+$", alias=r.STAGE_ENV)

    anthropic_base_url: str | None = Field(default=None, alias="ANTHROPIC_BASE_URL")
    openai_base_url: str | None = Field(default=None, alias="OPENAI_BASE_URL")
    bedrock_endpoint_url: str | None = Field(default=None, alias="BEDROCK_ENDPOINT_URL")
    # CallModel with SnapStart (the CDK's snapStart context): every provider SDK imported at init,
    # into the snapshot (docs/design.md §10). Read at import by quayutec.handlers.call_model.
    provider_sdks_at_init: bool = Field(default=False, alias=r.PROVIDER_SDKS_AT_INIT_ENV)
    # Local stack only (quay dev): where presigned file URLs point (the dev server).
    files_endpoint_url: str | None = Field(default=None, alias=r.FILES_ENDPOINT_ENV)
    # Per-company API throttling (docs/design.md §5): the usage plan new companies' keys join
    # (ApiFunction) and the shared key's id (AuthorizerFunction); unset: no per-company keys.
    usage_plan_name: str | None = Field(default=None, min_length=1, max_length=1024, alias=r.USAGE_PLAN_NAME_ENV)
    shared_api_key_id: str | None = Field(default=None, min_length=1, max_length=128, alias=r.SHARED_API_KEY_ID_ENV)

    # defer_build: on Lambda a function validates its own model (settings_model), never this one
    model_config = {"populate_by_name": True, "extra": "ignore", "defer_build": True}


#: env var -> Settings field name
FIELD_BY_ENV: dict[str, str] = {f.alias or n: n for n, f in Settings.model_fields.items()}

#: Set by the Lambda runtime to the function's handler string (``quayutec.handlers.x.handler``).
HANDLER_ENV = "_HANDLER"

_ENVIRONMENT: ContextVar[Mapping[str, str] | None] = ContextVar("quayutec_environment", default=None)


@contextmanager
def function_environment(env: Mapping[str, str]) -> Iterator[None]:
    """Local stack: run the enclosed invocation with ``env`` (a function's own Lambda
    environment, ``_HANDLER`` included) as the environment its settings are read from. A context
    variable, not ``os.environ``: invocations of different functions run at once in threads."""
    token = _ENVIRONMENT.set(dict(env))
    try:
        yield
    finally:
        _ENVIRONMENT.reset(token)


def environment() -> Mapping[str, str]:
    """The environment settings are read from: the invocation's (local stack) or the process's."""
    env = _ENVIRONMENT.get()
    return os.environ if env is None else env


@cache
def settings_model(function_id: str) -> type[BaseModel]:
    """The environment model of one function: the :class:`Settings` fields its
    ``FunctionDef.reads`` names, with their types and bounds, required unless optional."""
    fdef = r.FUNCTIONS_BY_ID[function_id]
    fields: dict[str, Any] = {}
    for env_var in fdef.reads:
        name = FIELD_BY_ENV[env_var]  # KeyError: a read with no Settings field
        info = Settings.model_fields[name]
        if env_var not in r.OPTIONAL_ENVS:
            info = copy.copy(info)
            info.default = PydanticUndefined
        fields[name] = (info.annotation, info)
    from pydantic import create_model

    return create_model(
        f"{function_id}Settings", __config__={"extra": "ignore", "frozen": True}, __module__=__name__, **fields
    )


def function_id(env: Mapping[str, str] | None = None) -> str | None:
    """The logical id of the running function (by ``_HANDLER``), None outside a function."""
    fdef = r.FUNCTIONS_BY_HANDLER.get((env if env is not None else environment()).get(HANDLER_ENV, ""))
    return fdef.logical_id if fdef else None


def get_settings() -> Any:
    """The settings of this function, validated from its environment once (cached): its own
    model (:func:`settings_model`) inside a function, :class:`Settings` elsewhere.

    Raises :class:`quayutec.errors.Misconfigured` naming the missing or invalid variables (the
    operator's fault, so never a pydantic ``ValidationError`` that an API would answer as the
    caller's 422).
    """
    env = environment()
    fid = function_id(env)
    items = tuple(sorted((k, v) for k, v in env.items() if k in FIELD_BY_ENV and v != ""))
    return _validated(fid, items)


@lru_cache(maxsize=64)  # one entry on Lambda; one per function (and setting change) locally
def _validated(fid: str | None, items: tuple[tuple[str, str], ...]) -> Any:
    model = settings_model(fid) if fid else Settings
    try:
        return model.model_validate(dict(items))
    except ValidationError as exc:
        raise _misconfigured(model, exc) from None


def _misconfigured(model: type[BaseModel], exc: ValidationError) -> Misconfigured:
    """``exc`` (a settings model's) as the operator's error, by environment variable name."""
    variables, problems = [], []
    for e in exc.errors(include_input=False):
        name = str(e["loc"][0]) if e.get("loc") else "?"
        info = model.model_fields.get(name)
        var = (info.alias if info is not None and info.alias else name) or name
        variables.append(var)
        problems.append(f"{var} (missing)" if e.get("type") == "missing" else f"{var} ({e.get('msg', 'invalid')})")
    return Misconfigured(variables, problems)


get_settings.cache_clear = _validated.cache_clear  # type: ignore[attr-defined]


def validate_settings(values: Mapping[str, str]) -> Settings:
    """Synth: the runtime settings ``values`` (``SETTING_DEFAULTS`` names, no resource names)
    through :class:`Settings`, as a function would read them. Raises ``ValidationError``."""
    placeholders = {
        f.alias: "validated-at-synth" for f in Settings.model_fields.values() if f.is_required() and f.alias
    }
    return Settings.model_validate({**placeholders, **{k: v for k, v in values.items() if v != ""}})
