"""Seams the local stack hooks into, so the deployed package carries no test tooling (issue 13
item 5): the fault-injection lab (``quaylab.faults``) registers here when it is switched on.
In Lambda the only hook is the cost line's (:mod:`quayutec.cost_line`: a client hook that asks
DynamoDB for consumed capacity); no part hook registers, so each ``part`` costs one empty-list
check.

* client hooks — called with every boto3 client :mod:`quayutec.dal.aws` builds (before its
  first call), e.g. to register botocore event handlers on it;
* part hooks — context-manager factories entered around each part of a merged phase
  (``with part("claim"): ...``), e.g. to fire a fault point at its start and end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any

ClientHook = Callable[[Any], None]
PartHook = Callable[[str], AbstractContextManager[None]]

_client_hooks: list[ClientHook] = []
_part_hooks: list[PartHook] = []


def add_client_hook(hook: ClientHook) -> None:
    """Apply ``hook`` to every client built from now on (:func:`quayutec.dal.aws.reset_clients`
    drops the cached ones so they are rebuilt with it)."""
    if hook not in _client_hooks:
        _client_hooks.append(hook)
        from quayutec.dal import aws

        aws.reset_clients()


def hook_client(client: Any) -> Any:
    """Run the client hooks on ``client``. Returns it."""
    for hook in list(_client_hooks):
        hook(client)
    return client


def add_part_hook(hook: PartHook) -> None:
    if hook not in _part_hooks:
        _part_hooks.append(hook)


@contextmanager
def part(name: str) -> Iterator[None]:
    """One part of a merged phase (``claim_and_read`` runs ``claim`` then ``load_context``),
    named for the phase it was before the merge. Inert unless a part hook is registered."""
    if not _part_hooks:
        yield
        return
    with ExitStack() as stack:
        for hook in list(_part_hooks):
            stack.enter_context(hook(name))
        yield
