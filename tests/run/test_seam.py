"""Guard the moto seam the local stack depends on (shared notes LOCAL-AWS.md): moto is pinned and
``LambdaFunction._invoke_lambda(self, event) -> (str, bool, str)`` is still the one path."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import ClassVar

import moto
import pytest

from quaylocal.stack import ORIGINAL_INVOKE_LAMBDA

pytestmark = pytest.mark.unit  # no AWS, no network: make unit


def test_moto_is_pinned_to_the_installed_version() -> None:
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    pinned = re.search(r'"moto\[[^\]]*\]==([0-9.]+)"', pyproject)
    assert pinned and pinned.group(1) == moto.__version__


def test_invoke_lambda_signature_is_unchanged() -> None:
    params = list(inspect.signature(ORIGINAL_INVOKE_LAMBDA).parameters)
    assert params == ["self", "event"]


def test_handler_errors_come_back_in_the_runtime_shape(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import json

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")  # as the local stack sets it
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Quayutec")
    from quaylocal.stack import invoke_in_process

    class Fn:  # the attributes of moto's LambdaFunction the seam reads
        handler = "quayutec.handlers.claim_and_read.handler"
        function_name = "f"
        function_arn = "arn:aws:lambda:us-east-1:123456789012:function:f"
        environment_vars: ClassVar[dict[str, str]] = {}  # the seam gives the function its own environment
        memory_size = 128
        timeout = 3

    body, errored, _ = invoke_in_process(Fn(), {"state": {"wake": {"agent_id": 1}}, "run_id": "r"})  # type: ignore[arg-type]
    assert errored is True
    payload = json.loads(body)
    assert payload["errorType"] == "RunStateInvalid" and "wake" in payload["errorMessage"]
    assert isinstance(payload["stackTrace"], list)
