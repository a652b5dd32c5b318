"""The deployed code's one instrumentation seam (issue 13 item 5, issue 27 item 3): the deployed
package carries no test tooling, only these calls, and hooks are installed explicitly, never on
import.

What the deployed code calls:

* :func:`hook_client` — with every boto3 client :mod:`quayutec.dal.aws` builds (before its first
  call): the call announcement (each call is told to the call observers) and the client hooks;
* :func:`observe` — a client built elsewhere (the files API's URL signer): the announcement only;
* :func:`announce` — a call no botocore event announces (a presigned POST is signed locally);
* :func:`part` — around each part of a merged phase (``with part("claim"): ...``);
* :func:`hook_deps` — with the default deps of a function (:func:`quayutec.deps.default_deps`).

What installs hooks, as :class:`Instruments` (:func:`install` / :func:`uninstall`):

* in Lambda, only the cost line (:mod:`quayutec.cost.line`: a call observer counting a run phase's
  calls and a client hook asking DynamoDB for consumed capacity), when it first counts;
* locally, the engine (``quaylocal``: the call recorder the IAM check reads; its stack's
  dependencies, e.g. loopback model addresses allowed) and the lab (``quaylab``: fault points on
  writes and around parts, STS trust policies), each when it builds a stack or is armed, and
  removed again when done.

With no hook installed, a ``part`` costs one empty check and a call one empty loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

#: Called with each client :func:`hook_client` sees, e.g. to register botocore event handlers on it.
ClientHook = Callable[[Any], None]
#: A context-manager factory entered around each part of a merged phase, given its name.
PartHook = Callable[[str], AbstractContextManager[None]]
#: Called as ``observer(service_id, operation_name, params)`` before every API call of an observed
#: client (botocore's ``provide-client-params`` event), and for each :func:`announce`.
CallObserver = Callable[[str, str, dict[str, Any]], None]
#: Given a function's default :class:`quayutec.deps.Deps`, returns the deps to use instead.
DepsHook = Callable[[Any], Any]


@dataclass(frozen=True, eq=False)
class Instruments:
    """Hooks installed and removed together (compared by identity). ``name`` says whose they are."""

    name: str
    client: ClientHook | None = None
    call: CallObserver | None = None
    part: PartHook | None = None
    deps: DepsHook | None = None


_lock = threading.Lock()
_installed: tuple[Instruments, ...] = ()
#: Move whenever the installed client hooks (deps hooks) change: quayutec.dal.aws rebuilds its
#: cached clients (quayutec.deps its default deps) when theirs has moved since they were built.
_client_generation = 0
_deps_generation = 0


def install(instruments: Instruments) -> None:
    """Install ``instruments`` (again: nothing). Clients built from now on carry its client hook
    (:mod:`quayutec.dal.aws` drops the ones it built before)."""
    global _installed
    if instruments in _installed:  # the cost line's every count: no lock
        return
    with _lock:
        if instruments in _installed:
            return
        _installed = (*_installed, instruments)
        _moved(instruments)


def uninstall(instruments: Instruments) -> None:
    """Remove ``instruments`` (not installed: nothing)."""
    global _installed
    with _lock:
        if instruments not in _installed:
            return
        _installed = tuple(i for i in _installed if i is not instruments)
        _moved(instruments)


def _moved(instruments: Instruments) -> None:
    global _client_generation, _deps_generation
    _client_generation += instruments.client is not None
    _deps_generation += instruments.deps is not None


@contextmanager
def installed(*instruments: Instruments) -> Iterator[None]:
    """Install ``instruments`` for the block (those installed before it stay installed after it)."""
    fresh = [i for i in instruments if i not in _installed]
    for i in fresh:
        install(i)
    try:
        yield
    finally:
        for i in reversed(fresh):
            uninstall(i)


def is_installed(instruments: Instruments) -> bool:
    return instruments in _installed


def client_generation() -> int:
    """A number that changes whenever the installed client hooks do."""
    return _client_generation


def deps_generation() -> int:
    """A number that changes whenever the installed deps hooks do."""
    return _deps_generation


# ----------------------------------------------------------------------------- what the code calls
def _announce(params: dict[str, Any], model: Any, **_: Any) -> None:
    observers = [i.call for i in _installed if i.call is not None]
    if observers:
        service = model.service_model.service_id.hyphenize()
        for observer in observers:
            observer(service, model.name, params)


def observe(client: Any) -> Any:
    """Hook ``client`` so every call it makes is announced to the call observers (one botocore
    handler; also fired by ``generate_presigned_url``, so a presigned URL counts as the action it
    grants). Returns the client."""
    client.meta.events.register("provide-client-params", _announce, unique_id="quay-call-observer")
    return client


def hook_client(client: Any) -> Any:
    """:func:`observe` ``client`` and run the client hooks on it. Returns it."""
    observe(client)
    for i in _installed:
        if i.client is not None:
            i.client(client)
    return client


def announce(service: str, operation: str, params: dict[str, Any]) -> None:
    """Tell the call observers about a call no botocore event announces (a presigned POST is
    signed locally: it grants ``operation`` on ``params``' resource to whoever holds it)."""
    for i in _installed:
        if i.call is not None:
            i.call(service, operation, params)


@contextmanager
def part(name: str) -> Iterator[None]:
    """One part of a merged phase (``claim_and_read`` runs ``claim`` then ``load_context``),
    named for the phase it was before the merge. Inert unless a part hook is installed."""
    hooks = [i.part for i in _installed if i.part is not None]
    if not hooks:
        yield
        return
    with ExitStack() as stack:
        for hook in hooks:
            stack.enter_context(hook(name))
        yield


def hook_deps(deps: Any) -> Any:
    """``deps`` (a function's default deps) through the deps hooks, in the order installed."""
    for i in _installed:
        if i.deps is not None:
            deps = i.deps(deps)
    return deps
