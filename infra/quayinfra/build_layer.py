"""Build the Lambda dependency layer offline (no Docker): wheels for the Lambda platform.

    python -m quayinfra.build_layer          # or: python infra/quayinfra/build_layer.py

The layer holds exactly the runtime lock, ``requirements/runtime.lock`` (every runtime
dependency of ``[project].dependencies``, transitive included, resolved with
``uv pip compile --universal``: ``make lock``). The same file is what ``make install`` puts in
the virtualenv the tests run with, so the layer carries the versions the suite ran. boto3,
botocore and s3transfer are in it too: the functions use the SDK the tests used, not the one
the Lambda runtime happens to ship (a layer's ``/opt/python`` comes before the runtime's own
packages on ``sys.path``).

Wheels are chosen for the Lambda runtime, not for the Python running this script: CPython 3.13
on Amazon Linux 2023 (glibc 2.34), arm64: ``--python-version 3.13 --implementation cp --abi
cp313 --only-binary=:all:`` and every ``--platform`` that glibc 2.34 accepts
(``manylinux_2_34_aarch64`` down to ``manylinux_2_17_aarch64`` / ``manylinux2014_aarch64``;
pip does not expand a ``manylinux_2_X`` tag to the older ones itself). Without
``--python-version``/``--abi`` pip would pick pydantic-core for the local Python, which imports
here and fails on AWS. The lock's environment markers are evaluated for that target here
(pip would evaluate them for this machine), and pip installs the pins with ``--no-deps``.

The result is cached in ``.build/layer/``: ``python/`` (the files, for inspection and tests),
``layer.zip`` (the asset CDK uploads, written deterministically) and a stamp. Its modules are
compiled to bytecode with a CPython of the runtime's version when the machine has one
(:func:`compile_bytecode`; the stamp says whether it did). It is rebuilt only
when the lock or the target platform changes; concurrent callers (pytest-xdist workers, the
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
import zipfile
from contextlib import contextmanager
from pathlib import Path

from packaging.requirements import Requirement

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCK_FILE = REPO_ROOT / "requirements" / "runtime.lock"
BUILD_DIR = REPO_ROOT / ".build"
LAYER_DIR = BUILD_DIR / "layer"
STAMP_NAME = ".stamp.json"
ZIP_NAME = "layer.zip"  # the CDK asset: <layer dir>/layer.zip

# The Lambda target. Keep in step with quayinfra.config.LAMBDA_RUNTIME / LAMBDA_ARCHITECTURE
# (tests/infra/test_infra_layer.py checks they agree).
PYTHON_VERSION = "3.13"
ABI = "cp313"
ARCH = "aarch64"
GLIBC = (2, 34)  # Amazon Linux 2023, the OS of the python3.12+ Lambda runtimes
PLATFORM = f"manylinux_{GLIBC[0]}_{GLIBC[1]}_{ARCH}"  # the newest tag the runtime accepts
#: Every manylinux tag glibc 2.34 runs, newest first (PEP 600; manylinux2014 = manylinux_2_17).
PLATFORMS: tuple[str, ...] = (
    *(f"manylinux_2_{minor}_{ARCH}" for minor in range(GLIBC[1], 16, -1)),
    f"manylinux2014_{ARCH}",
)
ELF_MACHINE_AARCH64 = 183  # e_machine of every native library in the layer

#: The Lambda runtime's environment, for the lock's markers (PEP 508).
TARGET_MARKERS = {
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "python_version": PYTHON_VERSION,
    "python_full_version": f"{PYTHON_VERSION}.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "os_name": "posix",
    "platform_machine": ARCH,
}

BUILD_FORMAT = 5  # bump to force a rebuild when this script's output changes

#: Where a CPython of the runtime's version may be found to compile the layer's bytecode (an
#: explicit QUAY_RUNTIME_PYTHON first, then PATH, then pyenv's versions).
RUNTIME_PYTHON_ENV = "QUAY_RUNTIME_PYTHON"


def runtime_python() -> str | None:
    """A CPython ``PYTHON_VERSION`` interpreter on this machine, or None. Bytecode is specific to
    the minor version only (the same magic number on every 3.13.x and every architecture), so
    any 3.13 compiles what the aarch64 runtime loads."""
    candidates = [os.environ.get(RUNTIME_PYTHON_ENV) or "", shutil.which(f"python{PYTHON_VERSION}") or ""]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates += [str(p) for p in sorted(pyenv.glob(f"versions/{PYTHON_VERSION}*/bin/python{PYTHON_VERSION}"))]
    for exe in filter(None, candidates):
        try:
            out = subprocess.run(
                [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except OSError:
            continue
        if out.returncode == 0 and out.stdout.strip() == PYTHON_VERSION:
            return exe
    return None


def compile_bytecode(site: Path, python: str | None = None) -> str | None:
    """Compile every module of ``site`` with the runtime's Python (``unchecked-hash`` .pyc: the
    zip's fixed timestamps would invalidate timestamp-checked ones, and Lambda's read-only file
    system could not rewrite them, so without this every cold start compiles every imported
    module from source). Returns the interpreter used, or None when no CPython
    ``PYTHON_VERSION`` is on this machine (the layer then ships source only)."""
    python = python or runtime_python()
    if python is None:
        return None
    # A few files of some packages are not Python 3.13 (templates, py2 fixtures): compileall
    # reports them and goes on; they were never importable anyway.
    subprocess.run(
        [python, "-m", "compileall", "-q", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(site)],
        check=False,
    )
    return python


def locked(lock_file: Path = LOCK_FILE, environment: dict[str, str] | None = None) -> list[str]:
    """The lock's pins (``name==version``) whose markers hold in ``environment`` (default: the
    Lambda runtime), sorted."""
    env = TARGET_MARKERS if environment is None else environment
    out: list[str] = []
    for raw in lock_file.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        (spec,) = req.specifier  # a lock pins every package exactly
        if spec.operator != "==":
            raise ValueError(f"{lock_file}: {line!r} is not an exact pin")
        out.append(f"{req.name}=={spec.version}")
    return sorted(out)


def requirements() -> list[str]:
    """What the layer installs: the lock, for the Lambda runtime."""
    return locked()


def pip_command(target: Path, reqs: list[str]) -> list[str]:
    platforms = [arg for tag in PLATFORMS for arg in ("--platform", tag)]
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--no-deps",
        *platforms,
        "--implementation",
        "cp",
        "--python-version",
        PYTHON_VERSION,
        "--abi",
        ABI,
        "--only-binary=:all:",
        "--target",
        str(target),
        *reqs,
    ]


def build_key(reqs: list[str]) -> str:
    blob = json.dumps(
        {"format": BUILD_FORMAT, "reqs": reqs, "py": PYTHON_VERSION, "abi": ABI, "platforms": PLATFORMS},
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
    """Remove what only a local install needs: console scripts and bytecode caches."""
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts, unusable in a layer
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def write_zip(site: Path, zip_path: Path) -> str:
    """Zip ``site`` as ``python/...`` (the layer layout), deterministically: sorted entries,
    fixed timestamps, so the same files give the same bytes and the same CDK asset hash.
    Returns the zip's sha256."""
    with zipfile.ZipFile(zip_path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for path in sorted(p for p in site.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(f"python/{path.relative_to(site).as_posix()}", date_time=(1980, 1, 1, 0, 0, 0))
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
        return not force and current is not None and current.get("key") == key and (layer_dir / ZIP_NAME).is_file()

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
            compiled_with = compile_bytecode(site)
            zip_sha = write_zip(site, tmp / ZIP_NAME)
            seconds = round(time.monotonic() - started, 1)
            (tmp / STAMP_NAME).write_text(
                json.dumps(
                    {
                        "key": key,
                        "zip_sha256": zip_sha,
                        "requirements": reqs,
                        "platform": PLATFORM,
                        "platforms": list(PLATFORMS),
                        "python_version": PYTHON_VERSION,
                        "abi": ABI,
                        "build_seconds": seconds,
                        "bytecode": (
                            f"cpython-{ABI[2:]} unchecked-hash"
                            if compiled_with
                            else f"none: no CPython {PYTHON_VERSION} on the build machine"
                        ),
                    },
                    indent=2,
                )
            )
            if layer_dir.exists():
                shutil.rmtree(layer_dir)
            tmp.rename(layer_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        log(f"layer built in {seconds} s")
        if not compiled_with:
            log(
                f"no CPython {PYTHON_VERSION} here (PATH or {RUNTIME_PYTHON_ENV}): the layer ships source, which "
                "Lambda compiles on every cold start (its /opt is read-only); see docs/deploy.md step 1"
            )
    return layer_dir


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = ensure_layer(force="--force" in argv)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
