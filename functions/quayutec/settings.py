"""The runtime's settings: one validated environment model for every function, read through
a cached getter (never at import time). Names come from ``quayutec.resources``."""

from __future__ import annotations

import os
from functools import lru_cache

from pydantic import BaseModel, Field

from quayutec import resources as r

#: The ASL's execution ``TimeoutSeconds`` is 691200 s (8 days); an approval expiry must leave
#: room for the 300 s of active time (SPEC §2.6).
MAX_APPROVAL_TIMEOUT_SECONDS = 604800


class Settings(BaseModel):
    room_table: str = Field(alias=r.ROOM_TABLE.env_var)
    claim_table: str = Field(alias=r.CLAIM_TABLE.env_var)
    ledger_table: str = Field(alias=r.LEDGER_TABLE.env_var)
    idempotency_table: str = Field(alias=r.IDEMPOTENCY_TABLE.env_var)
    run_data_bucket: str = Field(alias=r.RUN_DATA_BUCKET.env_var)
    wake_queue_url: str = Field(default="", alias=r.WAKE_QUEUE.env_var)
    state_machine_arn: str = Field(default="", alias=r.STATE_MACHINE_ENV)

    hop_limit: int = Field(default=8, ge=0, alias="HOP_LIMIT")
    approval_timeout_s: int = Field(default=86400, ge=1, le=MAX_APPROVAL_TIMEOUT_SECONDS,
                                    alias="APPROVAL_TIMEOUT_SECONDS")
    run_time_limit_s: int = Field(default=300, ge=1, alias="RUN_TIME_LIMIT_SECONDS")
    model_timeout_s: float = Field(default=120, gt=0, alias="MODEL_TIMEOUT_SECONDS")
    recent_messages: int = Field(default=50, ge=1, le=1000, alias="RECENT_MESSAGES")
    memory_lines: int = Field(default=100, ge=1, le=1000, alias="MEMORY_LINES")
    file_passages: int = Field(default=5, ge=0, le=50, alias="FILE_PASSAGES")
    max_file_chunks: int = Field(default=2000, ge=1, alias="MAX_FILE_CHUNKS")
    secret_prefix: str = Field(default=r.DEFAULT_SECRET_PREFIX, alias=r.SECRET_PREFIX_ENV)
    stage: str = Field(default=r.DEFAULT_STAGE, min_length=1, pattern=r"^[A-Za-z0-9-]+$", alias=r.STAGE_ENV)

    anthropic_base_url: str | None = Field(default=None, alias="ANTHROPIC_BASE_URL")
    openai_base_url: str | None = Field(default=None, alias="OPENAI_BASE_URL")
    bedrock_endpoint_url: str | None = Field(default=None, alias="BEDROCK_ENDPOINT_URL")
    # Local stack only (quay dev, tests): an owner's model address may be loopback. The deployed
    # stack never sets it (SPEC §5; tests/infra checks the template).
    allow_loopback_model_urls: bool = Field(default=False, alias="ALLOW_LOOPBACK_MODEL_URLS")

    model_config = {"populate_by_name": True, "extra": "ignore"}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The settings of this function, validated from ``os.environ`` once.

    Raises ``pydantic.ValidationError`` naming the missing or invalid variable.
    """
    env = {k: v for k, v in os.environ.items() if v != ""}
    return Settings.model_validate(env)
