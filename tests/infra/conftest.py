"""Fixtures of the CDK app tests: one offline synth per test session (shared by xdist workers).

The synth is the one ``make synth`` and ``cdk deploy`` run: the CDK CLI (npm ``aws-cdk``) with
cdk.json's app, context and feature flags, into a temporary ``-o`` directory; so the tested
template is the deployed one. It builds the Lambda dependency layer first if ``.build/layer`` is
missing or stale (pip, needs PyPI once; then cached).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

REPO_ROOT = Path(__file__).resolve().parents[2]
for _path in (REPO_ROOT / "infra", REPO_ROOT / "functions"):
    if str(_path) not in sys.path:  # quayinfra is not in an older editable install
        sys.path.insert(0, str(_path))


CDK_CLI = REPO_ROOT / "node_modules" / ".bin" / "cdk"


def cdk_cli() -> list[str]:
    """The project's CDK CLI (package.json; ``npm ci`` here if node_modules is missing)."""
    if not CDK_CLI.exists():
        npm = shutil.which("npm")
        assert npm, "npm is needed for the CDK CLI (package.json)"
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--silent"], cwd=REPO_ROOT, check=True, timeout=600)
    return [str(CDK_CLI)]


def app_command() -> list[str]:
    """cdk.json's app, unless the suite runs on another interpreter than the one it names:
    then the same script on this one (the context and feature flags still come from cdk.json)."""
    app = json.loads((REPO_ROOT / "cdk.json").read_text())["app"]
    named = Path(app.split()[0])
    named = named if named.is_absolute() else REPO_ROOT / named
    here = Path(sys.prefix).resolve()
    if named.exists() and Path(named.parent.parent).resolve() == here:
        return []
    return ["--app", f"{sys.executable} infra/app.py"]


def cdk_synth(outdir: Path, *context: str, check: bool = True) -> subprocess.CompletedProcess:
    """``cdk synth -o outdir`` from the repository root; ``context``: e.g. ``"-c", "stage=prod"``."""
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CDK_DISABLE_VERSION_CHECK": "1"}
    result = subprocess.run(
        [
            *cdk_cli(),
            "synth",
            "--quiet",
            "--no-notices",
            "--no-version-reporting",
            *app_command(),
            "-o",
            str(outdir),
            *context,
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"cdk synth failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


def _synth(outdir: Path) -> None:
    cdk_synth(outdir)


#: The cloud assembly of an earlier ``make synth`` (``QUAY_CDK_ASSEMBLY=cdk.out``): the suite
#: reads it instead of synthesizing (about 14 s). It must be of the tree under test.
ASSEMBLY_ENV = "QUAY_CDK_ASSEMBLY"


def session_assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cloud assembly of this test session (default context: stage "dev"): synthesized once,
    by whichever process asks first, into the session's base temporary directory (the xdist
    controller's, shared by its workers) under a lock; the others wait and read it. Both the
    template tests (``assembly``) and the IAM check of every AWS call (tests/conftest.py) use it."""
    if os.environ.get(ASSEMBLY_ENV):
        return Path(os.environ[ASSEMBLY_ENV])
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "quayinfra-cdk.out"
    with open(str(shared) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "manifest.json").exists():
            _synth(shared)
    return shared


@pytest.fixture(scope="session")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthesized cloud assembly directory (:func:`session_assembly`)."""
    return session_assembly(tmp_path_factory)


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
