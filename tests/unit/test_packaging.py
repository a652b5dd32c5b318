"""The deployed package carries only what runs in Lambda: no Lambda module imports the CLI, the
local stack, moto or the test tools (design §7)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

PACKAGE = Path(__file__).resolve().parents[2] / "functions" / "quayutec"
FORBIDDEN = {"quaylocal", "quayinfra", "moto", "yaml", "typer", "rich", "pytest", "aws_cdk", "cdk_nag"}


def test_lambda_code_imports_nothing_local_only() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.relative_to(PACKAGE)}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_every_function_handler_resolves() -> None:
    import importlib

    from quayutec import resources

    for f in resources.FUNCTIONS:
        module, _, attr = f.handler.rpartition(".")
        assert callable(getattr(importlib.import_module(module), attr)), f.handler
