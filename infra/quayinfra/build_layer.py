"""Build the Lambda dependency layer offline (no Docker): wheels for the Lambda platform.

    python -m quayinfra.build_layer          # or: python infra/quayinfra/build_layer.py

The layer holds the runtime dependencies of the deployed package (``[project].dependencies`` of
pyproject.toml, the one list), minus boto3/botocore/s3transfer, which the Lambda Python runtime
provides. Wheels are chosen for the Lambda runtime, not for the Python running this script:
``--platform manylinux2014_aarch64 --implementation cp --python-version 3.13 --abi cp313
--only-binary=:all:`` (without ``--python-version``/``--abi`` pip would pick pydantic-core for the
local Python, which imports here and fails on AWS).

The result is cached in ``.build/layer/``: ``python/`` (the files, for inspection and tests),
``layer.zip`` (the asset CDK uploads, written deterministically) and a stamp. It is rebuilt only when the
requirement list or the target platform changes; concurrent callers (pytest-xdist workers, the
CDK app) serialise on a file lock. Needs PyPI the first time (~30-60 s), then ~0 s.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO_ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = REPO_ROOT / "pyproject.toml"
BUILD_DIR = REPO_ROOT / ".build"
LAYER_DIR = BUILD_DIR / "layer"
STAMP_NAME = ".stamp.json"
ZIP_NAME = "layer.zip"  # the CDK asset: <layer dir>/layer.zip

# The Lambda target. Keep in step with quayinfra.config.LAMBDA_RUNTIME / LAMBDA_ARCHITECTURE.
PYTHON_VERSION = "3.13"
ABI = "cp313"
PLATFORM = "manylinux2014_aarch64"
ELF_MACHINE_AARCH64 = 183  # e_machine of every native library in the layer

# Shipped by the Lambda Python runtime: not put in the layer (they are also the largest).
PROVIDED_BY_RUNTIME = frozenset({"boto3", "botocore", "s3transfer"})

BUILD_FORMAT = 3  # bump to force a rebuild when this script's output changes


def requirements() -> list[str]:
    """pyproject's runtime dependencies, pinned to the versions tested in the venv."""
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    out: list[str] = []
    for spec in deps:
        req = Requirement(spec)
        if canonicalize_name(req.name) in PROVIDED_BY_RUNTIME:
            continue
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            out.append(str(req))  # not installed locally: the range from pyproject
            continue
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            out.append(str(req))  # the venv is stale: trust pyproject
        else:
            out.append(f"{req.name}{extras}=={version}")
    return sorted(out)


def pip_command(target: Path, reqs: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "pip", "install",
        "--quiet", "--disable-pip-version-check", "--no-compile",
        "--platform", PLATFORM,
        "--implementation", "cp",
        "--python-version", PYTHON_VERSION,
        "--abi", ABI,
        "--only-binary=:all:",
        "--target", str(target),
        *reqs,
    ]


def build_key(reqs: list[str]) -> str:
    blob = json.dumps(
        {"format": BUILD_FORMAT, "reqs": reqs, "py": PYTHON_VERSION, "abi": ABI,
         "platform": PLATFORM, "drop": sorted(PROVIDED_BY_RUNTIME)},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


@contextmanager
def _locked():
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with open(BUILD_DIR / "layer.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _prune(site: Path) -> None:
    """Remove what the runtime provides (by each distribution's RECORD) and local-only files."""
    for dist_info in site.glob("*.dist-info"):
        name = canonicalize_name(dist_info.name.removesuffix(".dist-info").split("-", 1)[0])
        if name not in PROVIDED_BY_RUNTIME:
            continue
        record = dist_info / "RECORD"
        for line in record.read_text().splitlines() if record.exists() else []:
            rel = line.split(",", 1)[0]
            if rel:
                (site / rel).unlink(missing_ok=True)
        shutil.rmtree(dist_info, ignore_errors=True)
    for name in PROVIDED_BY_RUNTIME:
        shutil.rmtree(site / name, ignore_errors=True)
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts, unusable in a layer
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def write_zip(site: Path, zip_path: Path) -> str:
    """Zip ``site`` as ``python/...`` (the layer layout), deterministically: sorted entries,
    fixed timestamps, so the same files give the same bytes and the same CDK asset hash.
    Returns the zip's sha256."""
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED,
                         compresslevel=6) as zf:
        for path in sorted(p for p in site.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(f"python/{path.relative_to(site).as_posix()}",
                                   date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if os.access(path, os.X_OK) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with open(path, "rb") as src, zf.open(info, "w") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    digest = hashlib.sha256()
    with open(zip_path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def stamp(layer_dir: Path = LAYER_DIR) -> dict | None:
    try:
        return json.loads((layer_dir / STAMP_NAME).read_text())
    except (FileNotFoundError, ValueError):
        return None


def ensure_layer(layer_dir: Path = LAYER_DIR, *, force: bool = False, log=print) -> Path:
    """Return the layer directory (``python/``, ``layer.zip``), building it if out of date."""
    reqs = requirements()
    key = build_key(reqs)

    def fresh() -> bool:
        current = stamp(layer_dir)
        return (not force and current is not None and current.get("key") == key
                and (layer_dir / ZIP_NAME).is_file())

    if fresh():
        return layer_dir
    with _locked():
        if fresh():
            return layer_dir  # another process built it while we waited
        started = time.monotonic()
        log(f"building Lambda layer ({PLATFORM}, cp{PYTHON_VERSION}) into {layer_dir} ...")
        layer_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="layer.", dir=layer_dir.parent))
        try:
            site = tmp / "python"
            subprocess.run(pip_command(site, reqs), check=True)
            _prune(site)
            zip_sha = write_zip(site, tmp / ZIP_NAME)
            seconds = round(time.monotonic() - started, 1)
            (tmp / STAMP_NAME).write_text(json.dumps(
                {"key": key, "zip_sha256": zip_sha, "requirements": reqs, "platform": PLATFORM,
                 "python_version": PYTHON_VERSION, "abi": ABI, "build_seconds": seconds},
                indent=2))
            if layer_dir.exists():
                shutil.rmtree(layer_dir)
            tmp.rename(layer_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        log(f"layer built in {seconds} s")
    return layer_dir


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = ensure_layer(force="--force" in argv)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
