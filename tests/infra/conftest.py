"""Fixtures of the CDK app tests: one offline synth per test session (shared by xdist workers).

The synth builds the Lambda dependency layer first if ``.build/layer`` is missing or stale
(pip, needs PyPI once; then cached).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

REPO_ROOT = Path(__file__).resolve().parents[2]
for _path in (REPO_ROOT / "infra", REPO_ROOT / "functions"):
    if str(_path) not in sys.path:  # quayinfra is not in an older editable install
        sys.path.insert(0, str(_path))


def _synth(outdir: Path) -> None:
    from aws_cdk import App

    from quayinfra.stack import build_app

    app, _stack = build_app(App(outdir=str(outdir)))
    app.synth()


@pytest.fixture(scope="session")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthesized cloud assembly directory (default context: stage "dev")."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        outdir = tmp_path_factory.mktemp("cdk.out")
        _synth(outdir)
        return outdir
    shared = tmp_path_factory.getbasetemp().parent / "quayinfra-cdk.out"
    with open(str(shared) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "manifest.json").exists():
            _synth(shared)
    return shared


@pytest.fixture(scope="session")
def stack_files(assembly: Path) -> tuple[str, Path, Path]:
    from quayinfra.localdeploy import stack_artifact

    return stack_artifact(assembly)


@pytest.fixture(scope="session")
def template(stack_files) -> dict:
    return json.loads(stack_files[1].read_text())


@pytest.fixture(scope="session")
def resources(template) -> dict:
    return template["Resources"]
