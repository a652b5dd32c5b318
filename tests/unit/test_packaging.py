"""The deployed package carries only what runs in Lambda: no Lambda module imports the CLI, the
local stack, moto or the test tools (design §7)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

PACKAGE = Path(__file__).resolve().parents[2] / "functions" / "quayutec"
FORBIDDEN = {
    "quaycli",
    "quaylocal",
    "quaylab",
    "quay",
    "quayinfra",
    "moto",
    "yaml",
    "typer",
    "rich",
    "pytest",
    "aws_cdk",
    "cdk_nag",
}


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


def test_the_quay_command_is_the_composed_entry_point() -> None:
    """The console script runs the entry point that wires the engine's and the lab's commands onto
    the client CLI (infra/quay/main.py), and the packages and the scenarios are packaged."""
    import importlib
    import tomllib

    from typer.main import get_command

    pyproject = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text())
    target = pyproject["project"]["scripts"]["quay"]
    assert target == "quay.main:main"
    module, _, attr = target.partition(":")
    entry = importlib.import_module(module)
    assert callable(getattr(entry, attr))
    wired = set(get_command(entry.app).commands)  # type: ignore[attr-defined]
    assert {"demo", "dev", "chaos", "post", "room", "ledger", "preflight"} <= wired
    packages = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {"quaycli*", "quaylocal*", "quaylab*", "quay"} <= set(packages)
    assert pyproject["tool"]["setuptools"]["package-data"]["quaylocal"] == ["scenarios/*.yaml", "scenarios/*.md"]


def test_the_client_cli_alone_has_no_engine_commands() -> None:
    """``python -m quaycli``: the client commands only (no engine imported, so no dev, demo, chaos)."""
    import os
    import subprocess
    import sys

    code = (
        "import sys; from typer.main import get_command; from quaycli.cli import app; "
        "print(sorted(get_command(app).commands)); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('quay', 'quaylocal', 'quaylab', 'moto')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=os.environ)
    assert done.returncode == 0, done.stderr[-2000:]
    commands, engine = done.stdout.splitlines()
    assert "'post'" in commands and not any(f"'{c}'" in commands for c in ("dev", "demo", "chaos"))
    assert engine == "[]"
