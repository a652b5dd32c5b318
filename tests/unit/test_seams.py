"""The deployed code's one instrumentation seam (quayutec.seams, issue 27 item 3): nothing installs
a hook on import (not the deployed modules, not the lab's), the seam names no other module of the
package, and installed hooks reach the clients, the parts and the calls until they are removed."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from quayutec import seams
from quayutec.dal import aws

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = sorted(p.stem for p in (ROOT / "functions" / "quayutec" / "handlers").glob("[a-z]*.py"))


def test_nothing_installs_a_hook_on_import() -> None:
    modules = [
        *(f"quayutec.handlers.{h}" for h in HANDLERS),
        "quayutec.cost.line",
        "quayutec.api.app",
        "quaylab.faults",
        "quaylab.sts_trust",
        "quaylab.chaos",
        "quaylocal.calls",
        "quaylocal.stack",
    ]
    code = "; ".join(
        ["import sys", *(f"import {m}" for m in modules), "from quayutec import seams", "print(seams._installed)"]
    )
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'functions'}{os.pathsep}{ROOT / 'infra'}",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    env.pop("QUAY_CALL_LOG", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "()"


def test_the_seam_names_no_other_module_of_the_package() -> None:
    tree = ast.parse((ROOT / "functions" / "quayutec" / "seams.py").read_text())
    imported = [
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in (n.names if isinstance(n, ast.Import) else [None])  # type: ignore[list-item]
    ]
    assert not [m for m in imported if m and m.split(".")[0] == "quayutec"], imported


@contextmanager
def _region(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for k, v in {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}.items():
        monkeypatch.setenv(k, v)
    aws.reset_clients()
    try:
        yield
    finally:
        aws.reset_clients()


def test_installed_hooks_reach_clients_parts_and_calls_until_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    hooked: list[Any] = []
    parts: list[str] = []
    calls: list[tuple[str, str]] = []

    @contextmanager
    def around(name: str) -> Iterator[None]:
        parts.append(name)
        yield

    probe = seams.Instruments(
        "probe", client=hooked.append, part=around, call=lambda service, op, params: calls.append((service, op))
    )
    with _region(monkeypatch):
        before = aws.client("s3")
        with seams.installed(probe):
            during = aws.client("s3")
            assert during is not before and hooked == [during]  # rebuilt, with the hook
            assert aws.client("s3") is during  # cached again
            with seams.part("claim"):
                pass
            during.generate_presigned_url("get_object", Params={"Bucket": "b", "Key": "k"})
            seams.announce("s3", "PutObject", {"Bucket": "b", "Key": "k"})
        after = aws.client("s3")
        with seams.part("claim"):
            pass
        after.generate_presigned_url("get_object", Params={"Bucket": "b", "Key": "k"})
    assert after is not during and hooked == [during]
    assert parts == ["claim"] and calls == [("s3", "GetObject"), ("s3", "PutObject")]
    assert not seams.is_installed(probe)


def test_the_cost_line_installs_its_hooks_when_it_first_counts() -> None:
    from quayutec.cost import line as cost_line

    was = seams.is_installed(cost_line.INSTRUMENTS)
    seams.uninstall(cost_line.INSTRUMENTS)
    try:
        with cost_line.counting():
            assert seams.is_installed(cost_line.INSTRUMENTS)
    finally:
        if not was:
            seams.uninstall(cost_line.INSTRUMENTS)
