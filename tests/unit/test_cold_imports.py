"""What a cold start loads (issue 13 item 1), counted rather than timed: each handler, imported in
a fresh process after ``import boto3`` (which every handler needs), loads none of the modules
only some paths need, and builds no pydantic validator until an invocation uses the model. The
timings themselves are ``make bench``'s (``scripts/bench.py``), never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

REPO = Path(__file__).resolve().parents[2]
HANDLERS = sorted(p.stem for p in (REPO / "functions" / "quayutec" / "handlers").glob("[a-z]*.py"))
PHASES = ("claim_and_read", "call_model", "decide_and_post", "request_approval", "apply_and_finish", "record_failure")

#: Never at any handler's import: the ranking and PDF libraries (ClaimAndRead imports them when the
#: room has ready files, ingest when it builds an index), the model SDKs (CallModel, per request),
#: the index archive format, the local stack, a settings package, Powertools' OpenAPI models (the
#: API's /openapi.json and /docs only) and its parser.
NEVER = (
    "numpy",
    "bm25s",
    "scipy",
    "pypdf",
    "anthropic",
    "openai",
    "httpx2",
    "tarfile",
    "quaycli",
    "quaylocal",
    "quaylab",
    "quay",
    "moto",
    "pydantic_settings",
    "aws_lambda_powertools.event_handler.openapi.models",
    "aws_lambda_powertools.utilities.parser",
    "aws_xray_sdk",
)
#: Not at a run phase's (or the authorizer's) import either: the API's resolver and routes, batch
#: processing, the provider adapters (CallModel imports them when it calls a model).
NOT_IN_PHASES = (
    "aws_lambda_powertools.event_handler",
    "aws_lambda_powertools.utilities.batch",
    "asyncio",
    "quayutec.api",
    "quayutec.providers",
    "quayutec.logic.room_service",
)

PROBE = """
import json, sys
import boto3
baseline = set(sys.modules)
import pydantic
import quayutec.handlers.{handler}
from quayutec import models
def built():
    return sorted(n for n, c in vars(models).items() if isinstance(c, type) and issubclass(c, pydantic.BaseModel)
                  and c.__module__ == models.__name__ and c.__pydantic_complete__)
print(json.dumps({{"loaded": sorted(set(sys.modules) - baseline), "built": built()}}))
"""


def _probe(handler: str, **extra_env: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("_HANDLER", "PROVIDER_SDKS_AT_INIT")}
    env.update({"AWS_DEFAULT_REGION": "us-east-1", "PYTHONPATH": str(REPO / "functions"), **extra_env})
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(handler=handler)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _under(loaded: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in loaded if any(m == n or m.startswith(n + ".") for n in names)]


@pytest.mark.parametrize("handler", HANDLERS)
def test_a_handler_imports_only_what_every_invocation_needs(handler: str) -> None:
    probe = _probe(handler)
    assert _under(probe["loaded"], NEVER) == []
    if handler in PHASES or handler == "authorizer":
        assert _under(probe["loaded"], NOT_IN_PHASES) == []
    if handler == "api":  # the provider package is imported by the two checks that need it only
        assert _under(probe["loaded"], ("quayutec.providers",)) == []
    # defer_build: no domain model's validator is built at import (a first invocation builds the
    # ones it validates, e.g. RunState and what it holds).
    assert probe["built"] == []


def test_with_snapstart_call_model_imports_every_provider_sdk_at_init() -> None:
    """Issue 23 (docs/design.md §10): the CDK sets PROVIDER_SDKS_AT_INIT on CallModel when
    SnapStart is on, so init (what the snapshot holds) imports the SDKs; unset, none (above)."""
    loaded = _probe("call_model", PROVIDER_SDKS_AT_INIT="true")["loaded"]
    assert {"anthropic", "openai"} <= set(loaded)
    assert _under(_probe("call_model", PROVIDER_SDKS_AT_INIT="false")["loaded"], ("anthropic", "openai")) == []
