"""The dependency layer is built for the Lambda runtime (cp313, aarch64), not for this machine,
and carries every third-party module the deployed package imports."""

from __future__ import annotations

import ast
import sys
import zipfile
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
    tags = [line.split(":", 1)[1].strip() for line in (dist / "WHEEL").read_text().splitlines()
            if line.startswith("Tag:")]
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

    natives = [p for p in site.rglob("*") if p.is_file()
               and (p.suffix == ".so" or ".so." in p.name)]
    assert len(natives) >= 3  # pydantic_core, jiter, numpy at least
    wrong = {p.relative_to(site).as_posix(): _elf_machine(p) for p in natives
             if _elf_machine(p) not in (ELF_MACHINE_AARCH64,)}
    assert not wrong
    assert not [p for p in natives if "x86_64" in p.name or "cpython-311" in p.name]


def test_runtime_provided_packages_are_left_out(site):
    for name in ("boto3", "botocore", "s3transfer"):
        assert not (site / name).exists()
        assert not list(site.glob(f"{name}-*.dist-info"))
    assert not (site / "bin").exists()
    assert not list(site.rglob("__pycache__"))


def test_zip_is_the_layer_layout_and_is_the_asset(layer_dir, stack_files, template):
    from quayinfra.build_layer import ZIP_NAME, stamp

    zpath = layer_dir / ZIP_NAME
    with zipfile.ZipFile(zpath) as zf:
        names = zf.namelist()
    assert names and all(n.startswith("python/") for n in names)
    assert "python/pydantic_core/_pydantic_core.cpython-313-aarch64-linux-gnu.so" in names
    info = stamp(layer_dir)
    assert info["platform"] == "manylinux2014_aarch64" and info["abi"] == "cp313"
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
    provided = {"boto3", "botocore", "s3transfer"}  # by the Lambda Python runtime
    in_layer = {p.name for p in site.iterdir() if p.is_dir() and not p.name.endswith(
        (".dist-info", ".libs"))} | {p.stem for p in site.glob("*.py")}
    imported = _imported_top_levels(PACKAGE)
    third_party = imported - set(sys.stdlib_module_names) - {"quayutec", "__future__"}
    assert "aws_lambda_powertools" in third_party
    assert third_party - in_layer - provided == set()


def test_layer_requirements_come_from_pyproject():
    from quayinfra.build_layer import requirements

    reqs = requirements()
    names = {r.split("[")[0].split("=")[0].split(">")[0].split("<")[0] for r in reqs}
    assert {"aws-lambda-powertools", "pydantic", "anthropic", "openai", "rank-bm25"} <= names
    assert "boto3" not in names
    assert R.FUNCTIONS  # the layer serves every function
