"""moto's import-time work the local stack never uses, deferred until something asks for it.

moto's Step Functions interpreter imports its AWS Batch task integration, which imports
``moto.batch.utils`` (one enum), which runs the ``moto.batch`` package, whose ``__init__``
imports Batch's backend, which imports EC2's: EC2's instance types and region lists (its 550 KB
service model read three times), ~0.4 s of every ``quay demo`` and local stack start, for two
services the runtime never calls. ``moto.batch`` is put in place without running its
``__init__`` (its submodules import as usual), and its one name, ``batch_backends``, is imported
when first asked for (moto's backend lookup asks for it by name: a Batch call still works).

Imported by :mod:`quaylocal.stack` before anything of moto but the top package (pinned moto
version: the seam names one private layout, guarded by tests/run/test_local_engine.py).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any


def _batch_package_attr(name: str) -> Any:
    if name == "batch_backends":
        from moto.batch.models import batch_backends

        return batch_backends
    raise AttributeError(f"module 'moto.batch' has no attribute {name!r}")


def defer_batch() -> ModuleType | None:
    """Put a ``moto.batch`` package in ``sys.modules`` whose ``__init__`` has not run (nothing
    when it is already imported). Returns the module put in place."""
    if "moto.batch" in sys.modules:
        return None
    import moto

    spec = importlib.util.find_spec("moto.batch")
    if spec is None or spec.submodule_search_locations is None:
        return None
    package = importlib.util.module_from_spec(spec)  # __path__, __spec__, ...; __init__ not run
    package.__getattr__ = _batch_package_attr  # type: ignore[method-assign]
    sys.modules["moto.batch"] = package
    moto.batch = package  # type: ignore[attr-defined]  # as the import system sets it
    return package


defer_batch()
