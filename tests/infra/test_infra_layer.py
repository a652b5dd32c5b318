"""The dependency layer is built from the runtime lock for the Lambda runtime (cp313, aarch64,
glibc 2.34), not for this machine; it carries every third-party module the deployed package
imports, boto3 included, at the versions the suite runs with."""

from __future__ import annotations

import ast
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from infra_helpers import asset_source

from quayutec import resources as R

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = REPO_ROOT / "functions" / "quayutec"
ELF_MAGIC = b"\x7fELF"


@pytest.fixture(scope="module")
def layer_dir(assembly) -> Path:  # the synth has built (or found) it
    from quayinfra.build_layer import ensure_layer

    return ensure_layer()


@pytest.fixture(scope="module")
def site(layer_dir) -> Path:
    return layer_dir / "python"


def test_pydantic_core_is_a_cp313_aarch64_wheel(site):
    (dist,) = site.glob("pydantic_core-*.dist-info")
    tags = [
        line.split(":", 1)[1].strip() for line in (dist / "WHEEL").read_text().splitlines() if line.startswith("Tag:")
    ]
    assert tags
    for tag in tags:
        py, abi, plat = tag.split("-")
        assert (py, abi) == ("cp313", "cp313"), tag
        assert plat.endswith("_aarch64") and plat.startswith("manylinux"), tag
    (so,) = (site / "pydantic_core").glob("_pydantic_core*.so")
    assert so.name == "_pydantic_core.cpython-313-aarch64-linux-gnu.so"


def _elf_machine(path: Path) -> int | None:
    with open(path, "rb") as fh:
        head = fh.read(20)
    if head[:4] != ELF_MAGIC:
        return None
    return int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")


def test_every_native_library_is_aarch64(site):
    from quayinfra.build_layer import ELF_MACHINE_AARCH64

    natives = [p for p in site.rglob("*") if p.is_file() and (p.suffix == ".so" or ".so." in p.name)]
    assert len(natives) >= 3  # pydantic_core, jiter, numpy at least
    wrong = {
        p.relative_to(site).as_posix(): _elf_machine(p)
        for p in natives
        if _elf_machine(p) not in (ELF_MACHINE_AARCH64,)
    }
    assert not wrong
    assert not [p for p in natives if "x86_64" in p.name or "cpython-311" in p.name]


def _layer_versions(site: Path) -> dict[str, str]:
    from packaging.utils import canonicalize_name

    out = {}
    for dist in site.glob("*.dist-info"):
        meta = (dist / "METADATA").read_text(errors="replace")
        fields = dict(line.split(": ", 1) for line in meta.splitlines()[:20] if ": " in line)
        out[canonicalize_name(fields["Name"])] = fields["Version"]
    return out


def test_layer_holds_exactly_the_lock_at_the_versions_the_suite_runs(site):
    """Every locked runtime package: the layer's version (its dist-info) == the lock's == the
    one installed in the virtualenv running these tests (importlib.metadata)."""
    from packaging.markers import default_environment
    from packaging.utils import canonicalize_name

    from quayinfra.build_layer import locked

    def pins(environment=None) -> dict[str, str]:
        return {canonicalize_name(n): v for n, v in (p.split("==") for p in locked(environment=environment))}

    for_lambda, for_here = pins(), pins(default_environment())
    layer = _layer_versions(site)
    assert {"boto3", "botocore", "s3transfer", "numpy", "pydantic-core"} <= set(for_lambda)
    assert layer == for_lambda  # nothing more, nothing less: the lock is the layer
    mismatched = {}
    for name, version in for_here.items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed != version or layer.get(name, version) != version:
            mismatched[name] = {"lock": version, "venv": installed, "layer": layer.get(name)}
    assert not mismatched, f"run `make install` (or `make lock`): {mismatched}"
    assert set(layer) <= set(for_here)  # no package the tests did not run with


def test_the_sdk_is_the_tested_one_not_the_runtimes(site):
    for name in ("boto3", "botocore", "s3transfer"):
        assert (site / name).is_dir()
        (dist,) = site.glob(f"{name}-*.dist-info")
        assert dist.name == f"{name}-{metadata.version(name)}.dist-info"
    assert not (site / "bin").exists()
    # Bytecode only of the runtime's Python (compiled at build when this machine has one): none
    # of the interpreter that ran pip
    assert all(p.name.endswith(".cpython-313.pyc") for p in site.rglob("*.pyc"))


def test_the_layer_ships_the_runtimes_bytecode_when_it_can(layer_dir, site):
    """Issue 13 item 3: compiled .pyc for the runtime's Python (3.13), unchecked-hash (the zip's
    fixed timestamps and Lambda's read-only file system rule out timestamp-checked ones)."""
    from quayinfra.build_layer import runtime_python, stamp

    info = stamp(layer_dir)
    if runtime_python() is None:
        assert info["bytecode"].startswith("none")
        return
    assert info["bytecode"] == "cpython-313 unchecked-hash"
    pyc = site / "pydantic" / "__pycache__" / "main.cpython-313.pyc"
    flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
    assert flags == 0b01  # hash-based, check_source off (PEP 552)


def test_layer_fits_the_lambda_size_limit(layer_dir):
    """250 MB unzipped for a function's code and layers together; keep ~50 MB for the code."""
    total = sum(p.stat().st_size for p in (layer_dir / "python").rglob("*") if p.is_file())
    assert total < 200 * 1024 * 1024, total


@pytest.mark.unit
def test_layer_target_matches_the_function_runtime():
    from quayinfra import build_layer
    from quayinfra.config import LAMBDA_ARCHITECTURE, LAMBDA_RUNTIME

    assert LAMBDA_RUNTIME.name == f"python{build_layer.PYTHON_VERSION}"
    assert "cp" + build_layer.PYTHON_VERSION.replace(".", "") == build_layer.ABI
    assert LAMBDA_ARCHITECTURE.name == "arm64" and build_layer.ARCH == "aarch64"
    # Amazon Linux 2023 (glibc 2.34): every manylinux tag up to 2.34, manylinux2014 included
    assert build_layer.PLATFORMS[0] == "manylinux_2_34_aarch64"
    assert "manylinux_2_28_aarch64" in build_layer.PLATFORMS  # numpy 2.4's aarch64 wheels
    assert build_layer.PLATFORMS[-1] == "manylinux2014_aarch64"


def test_zip_is_the_layer_layout_and_is_the_asset(layer_dir, stack_files, template):
    from quayinfra.build_layer import ZIP_NAME, stamp

    zpath = layer_dir / ZIP_NAME
    with zipfile.ZipFile(zpath) as zf:
        names = zf.namelist()
    assert names and all(n.startswith("python/") for n in names)
    assert "python/pydantic_core/_pydantic_core.cpython-313-aarch64-linux-gnu.so" in names
    info = stamp(layer_dir)
    assert info["platform"] == "manylinux_2_34_aarch64" and info["abi"] == "cp313"
    layers = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::LayerVersion"]
    (layer,) = layers
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    asset = asset_source(stack_files, layer["Properties"]["Content"]["S3Key"])
    assert asset.read_bytes() == zpath.read_bytes()


def _imported_top_levels(package: Path) -> set[str]:
    names: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_layer_carries_every_third_party_import_of_the_package(site):
    in_layer = {p.name for p in site.iterdir() if p.is_dir() and not p.name.endswith((".dist-info", ".libs"))} | {
        p.stem for p in site.glob("*.py")
    }
    imported = _imported_top_levels(PACKAGE)
    third_party = imported - set(sys.stdlib_module_names) - {"quayutec", "__future__"}
    assert {"aws_lambda_powertools", "boto3", "botocore"} <= third_party
    assert third_party - in_layer == set()


@pytest.mark.unit
def test_lock_covers_pyproject_and_pins_everything():
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from quayinfra.build_layer import LOCK_FILE, locked

    pins = dict(p.split("==") for p in locked())
    deps = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for spec in deps:
        req = Requirement(spec)
        version = {canonicalize_name(n): v for n, v in pins.items()}[canonicalize_name(req.name)]
        assert req.specifier.contains(version, prereleases=True), (spec, version)
    assert "--universal" in LOCK_FILE.read_text() or "make lock" in LOCK_FILE.read_text()
    assert R.FUNCTIONS  # the layer serves every function
