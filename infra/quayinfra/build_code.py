"""The functions' code asset: the deployed package alone, compiled when it can be.

``functions/quayutec`` without caches or tests is staged under ``.build/code/<digest>-<kind>/``
and, when the machine has a CPython of the runtime's version, compiled to ``unchecked-hash``
bytecode with it (:func:`quayinfra.build_layer.compile_bytecode`, as the layer is). Lambda's file
system is read-only: a package shipped as source alone is compiled again on every cold start
(about 25 ms of a phase handler's import on the development machines, measured with
``make bench``'s method). Without that Python the asset is source, as before; the kind in the
directory name (``cp313`` or ``src``) says which.

Beside the package goes ``quayutec-{version}.dist-info/METADATA`` (name and version of
pyproject.toml's ``[project]``), so the deployed code reads its one version with
``importlib.metadata`` as an installed package does (the API's OpenAPI document states it).

The digest covers every staged file's path and bytes, the version and the kind, so an edit or a Python found
later gives a new directory (and a new CDK asset hash); the same tree gives the same one.
Staging is atomic (a temporary directory renamed into place) and serialised with the layer's
build lock, so pytest-xdist workers and the CDK app can synthesize at once.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import tomllib
from pathlib import Path

from .build_layer import ABI, BUILD_DIR, _locked, compile_bytecode, runtime_python
from .config import FUNCTIONS_DIR, REPO_ROOT

CODE_DIR = BUILD_DIR / "code"
PACKAGE = "quayutec"
#: What never ships (caches, tests, packaging metadata): the package's own files do.
IGNORE = (
    "__pycache__",
    "*.pyc",
    "tests",
    "test_*.py",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "*.egg-info",
    ".DS_Store",
)
#: Staged directories kept (the newest); older ones are removed when a new one is staged.
KEEP = 4


def project_version(pyproject: Path = REPO_ROOT / "pyproject.toml") -> str:
    """``[project].version`` of pyproject.toml: the one version of the package. Raises
    OSError, ``tomllib.TOMLDecodeError`` or KeyError when the file is missing or has none."""
    return str(tomllib.loads(pyproject.read_text())["project"]["version"])


def metadata_dir(version: str) -> str:
    """The ``.dist-info`` directory name ``importlib.metadata`` finds the package by."""
    return f"{PACKAGE}-{version}.dist-info"


def _files(package: Path) -> list[Path]:
    """The package's files that ship, sorted (what :data:`IGNORE` leaves)."""
    out: list[Path] = []
    ignore = shutil.ignore_patterns(*IGNORE)
    stack = [package]
    while stack:
        folder = stack.pop()
        names = sorted(p.name for p in folder.iterdir())
        skipped = ignore(str(folder), names)
        for name in names:
            if name in skipped:
                continue
            path = folder / name
            (stack if path.is_dir() else out).append(path)
    return sorted(out)


def source_digest(package: Path, kind: str, files: list[Path] | None = None) -> str:
    """SHA-256 (hex) of ``kind`` and every shipped file's relative path and bytes (``files``:
    :func:`_files` of ``package``, listed by the caller when it has them already)."""
    digest = hashlib.sha256(kind.encode())
    for path in _files(package) if files is None else files:
        digest.update(b"\0" + path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def stage_code(
    functions_dir: Path = FUNCTIONS_DIR,
    code_dir: Path = CODE_DIR,
    *,
    python: str | None = None,
    find_python: bool = True,
) -> Path:
    """The staged asset directory (``quayutec/`` and its ``.dist-info``), staging it when missing.

    ``python``: the interpreter that compiles the bytecode (default: :func:`runtime_python`
    when ``find_python``; none found or ``find_python=False``: source only). Raises OSError
    when the package cannot be read or the directory written."""
    package = functions_dir / PACKAGE
    python = python or (runtime_python() if find_python else None)
    kind = ABI if python else "src"
    files = _files(package)
    version = project_version()
    target = code_dir / f"{source_digest(package, f'{kind} {version}', files)[:20]}-{kind}"
    if target.is_dir():
        return target
    with _locked():
        if target.is_dir():
            return target  # staged by another process while this one waited
        code_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="staging.", dir=code_dir))
        try:
            for path in files:  # the files the digest names, no second walk
                copy = tmp / PACKAGE / path.relative_to(package)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, copy)
            meta = tmp / metadata_dir(version)
            meta.mkdir()
            (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {version}\n")
            if python:
                compile_bytecode(tmp, python)
            tmp.rename(target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        staged = sorted(
            (p for p in code_dir.iterdir() if p.is_dir() and not p.name.startswith("staging.")),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for old in staged[KEEP:]:
            if old != target:
                shutil.rmtree(old, ignore_errors=True)
    return target
