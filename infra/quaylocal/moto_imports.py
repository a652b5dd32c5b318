"""moto's start-up work the local stack does not need: deferred, or done once instead of again.

moto's Step Functions interpreter imports its AWS Batch task integration, which imports
``moto.batch.utils`` (one enum), which runs the ``moto.batch`` package, whose ``__init__``
imports Batch's backend, which imports EC2's: EC2's instance types and region lists (its 550 KB
service model read three times), ~0.4 s of every ``quay demo`` and local stack start, for two
services the runtime never calls. ``moto.batch`` is put in place without running its
``__init__`` (its submodules import as usual), and its one name, ``batch_backends``, is imported
when first asked for (moto's backend lookup asks for it by name: a Batch call still works).

botocore's service models are read once per loader, and moto made several: a new one for each
model its responses read (each listing botocore's data directory again), and a session of its own
whose loader parses every service's model again only to list the service's regions. moto's
responses share one loader (:func:`share_model_loaders`), and its region lists are read through
the default session's loader, which the boto3 clients already filled: ~0.15 s of a demo.

Imported by :mod:`quaylocal.stack` before anything of moto but the top package (pinned moto
version: these seams name private layouts, guarded by tests/run/test_local_engine_start.py).
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from functools import lru_cache
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
    moto.batch = package  # as the import system sets it
    return package


_loader_lock = threading.Lock()
_shared_loader: Any = None


def _one_moto_loader() -> Any:
    """Replacement for moto's ``create_loader`` in ``moto.core.utils``: one loader (its
    search paths and extras are moto's), so botocore's data directory is listed once and each
    model read once."""
    global _shared_loader
    with _loader_lock:
        if _shared_loader is None:
            from moto.core.loaders import create_loader

            _shared_loader = create_loader()
        return _shared_loader


def _session_on_default_loader(cls: type) -> Any:
    """Replacement for moto's ``AccountSpecificBackend.get_session``: a boto3 session (as
    moto's) that reads botocore's data through the default session's loader."""
    import boto3

    session = boto3.Session()
    session._session.register_component(
        "data_loader", boto3._get_default_session()._session.get_component("data_loader")
    )
    return session


def share_model_loaders() -> None:
    """Install :func:`_one_moto_loader` and :func:`_session_on_default_loader` (idempotent)."""
    from moto.core import base_backend
    from moto.core import utils as moto_utils

    moto_utils.create_loader = _one_moto_loader
    if not getattr(base_backend.AccountSpecificBackend.get_session, "_quay_shared", False):
        get_session = lru_cache(_session_on_default_loader)
        get_session._quay_shared = True  # type: ignore[attr-defined]
        base_backend.AccountSpecificBackend.get_session = classmethod(get_session)  # type: ignore[assignment,arg-type]  # an lru_cache as moto's own


defer_batch()
share_model_loaders()
