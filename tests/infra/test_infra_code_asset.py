"""The functions' code asset (quayinfra.build_code, issue 13): the deployed package alone,
compiled to unchecked-hash bytecode when an interpreter of the runtime's version is here (this
machine's Python stands in for it below), source only otherwise; staged once per content."""

from __future__ import annotations

import shutil
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from quayinfra import build_code

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


def _tree(tmp_path: Path) -> Path:
    functions = tmp_path / "functions"
    shutil.copytree(
        FUNCTIONS / "quayutec", functions / "quayutec", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    (functions / "quayutec" / "test_local_only.py").write_text("raise SystemExit('a test module shipped')\n")
    (functions / "quayutec" / "__pycache__").mkdir(exist_ok=True)
    (functions / "quayutec" / "__pycache__" / "stale.cpython-311.pyc").write_bytes(b"stale")
    (functions / "quayutec.egg-info").mkdir()
    return functions


def test_source_only_without_the_runtime_python(tmp_path: Path) -> None:
    functions = _tree(tmp_path)
    staged = build_code.stage_code(functions, tmp_path / "code", find_python=False)
    version = build_code.project_version()
    entries = sorted(p.name for p in staged.iterdir())
    assert staged.name.endswith("-src") and entries == ["quayutec", f"quayutec-{version}.dist-info"]
    files = {p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()}
    assert "quayutec/handlers/call_model.py" in files and "quayutec/api/static/app/index.html" in files
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc") or "test_local_only" in f]
    # the same content: the same directory, not staged again
    assert build_code.stage_code(functions, tmp_path / "code", find_python=False) == staged


def test_compiled_with_the_given_python_as_unchecked_hash_bytecode(tmp_path: Path) -> None:
    functions = _tree(tmp_path)
    staged = build_code.stage_code(functions, tmp_path / "code", python=sys.executable)
    assert staged.name.endswith(f"-{build_code.ABI}")
    tag = sys.implementation.cache_tag
    pyc = staged / "quayutec" / "handlers" / "__pycache__" / f"call_model.{tag}.pyc"
    flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
    assert flags == 0b01  # hash-based, check_source off (PEP 552): valid on a read-only file system
    assert not (staged / "quayutec" / "__pycache__" / "stale.cpython-311.pyc").exists()


def test_an_edit_stages_a_new_directory(tmp_path: Path) -> None:
    functions = _tree(tmp_path)
    first = build_code.stage_code(functions, tmp_path / "code", find_python=False)
    (functions / "quayutec" / "seams.py").write_text((functions / "quayutec" / "seams.py").read_text() + "\n# edit\n")
    second = build_code.stage_code(functions, tmp_path / "code", find_python=False)
    assert second != first and (second / "quayutec" / "seams.py").read_text().endswith("# edit\n")


def test_the_asset_carries_the_one_version_of_pyproject(tmp_path: Path) -> None:
    """The deployed code finds its version as an installed package does (the API states it)."""
    staged = build_code.stage_code(_tree(tmp_path), tmp_path / "code", find_python=False)
    pyproject = tomllib.loads((FUNCTIONS.parent / "pyproject.toml").read_text())
    found = [d.version for d in metadata.distributions(path=[str(staged)]) if d.metadata["Name"] == "quayutec"]
    assert found == [pyproject["project"]["version"]]
