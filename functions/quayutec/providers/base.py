"""What the provider adapters share (docs/design.md §2, step 3): reading a tool call and a usage
count from what an SDK hands over, the client arguments of the Anthropic and OpenAI SDKs, and the
SDK clients kept across warm invocations.

A warm Lambda reuses its clients (and so their connections: no TLS handshake per request) per
provider, base URL and key (for a ``bedrock`` agent under its company's role: per role, external
id and session, the session's credentials refreshed by botocore before they expire), in a small
LRU (:func:`cached_client`); an owner's own address is resolved, checked and pinned per request,
its client never kept (:func:`sdk_client`). No client exists at import time and no SDK is
imported here.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from quayutec.providers.egress import AddressRefused, pinned_http_client
from quayutec.providers.failures import build_failure
from quayutec.providers.models import ModelCall, ProviderError, ProviderFailure, ToolCall


def token_count(value: Any) -> int | None:
    """A usage field as a count: a non-negative integer, else ``None`` (absent or unreadable)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


#: How deep a tool call's arguments may nest (objects and arrays) to be read as arguments.
MAX_ARGUMENT_DEPTH = 32


def nested_within(value: Any, depth: int) -> bool:
    """Whether ``value``'s objects and arrays nest at most ``depth`` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            if level > depth:
                return False
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return True


def tool_call(id_: Any, name: Any, raw: Any) -> ToolCall:
    """A :class:`ToolCall` from arguments received either as JSON text or as a parsed value.

    What the SDKs hand over unvalidated is taken as it comes, never raised on: a name that is
    not a string is ``""`` and an id that is not one ``None`` (the rights check denies the action
    as malformed, design §4); arguments that do not parse, nesting too deep for the parser
    included, are ``input=None`` (denied the same way), while the rest of the reply stands.
    So are arguments nested deeper than :data:`MAX_ARGUMENT_DEPTH` (an action's are one object
    of strings): every later step walks them recursively."""
    if isinstance(raw, str):
        raw_text = raw
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):
            parsed = None
    else:
        parsed = raw
        try:
            raw_text = json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
        except (ValueError, TypeError, RecursionError):
            raw_text = ""
    if not nested_within(parsed, MAX_ARGUMENT_DEPTH):
        parsed = None
    return ToolCall(
        id=id_ if isinstance(id_, str) else None,
        name=name if isinstance(name, str) else "",
        input=parsed if isinstance(parsed, dict) else None,
        raw_input=raw_text,
    )


def sdk_kwargs(call: ModelCall, key: str) -> dict[str, Any]:
    """Client arguments of the Anthropic and OpenAI SDKs: no SDK retries, the call's timeout
    (seconds), the base URL; an owner's address is resolved, checked and pinned for this request
    (design §5), and a refused one ends the call as a final ``address_refused`` failure."""
    kwargs: dict[str, Any] = {"api_key": key, "max_retries": 0, "timeout": call.timeout_s}
    if call.base_url:
        kwargs["base_url"] = call.base_url
    if call.owner_base_url and call.base_url:
        try:
            kwargs["http_client"] = pinned_http_client(
                call.base_url, timeout_s=call.timeout_s, allow_loopback=call.allow_loopback
            )
        except AddressRefused as exc:
            raise_failure(
                call,
                build_failure(
                    provider=call.provider,
                    status=None,
                    headers=None,
                    body_text="",
                    request_id=None,
                    secret=key,
                    error_type="address_refused",
                    error_code="AddressRefused",
                    message=f"the owner's model address is refused: {exc}",
                ),
            )
    return kwargs


def raise_failure(call: ModelCall, failure: ProviderFailure) -> None:
    """Raise :class:`ProviderError` for ``failure`` (not chained: the SDK's exception may quote
    request headers)."""
    raise ProviderError(failure, provider=call.provider) from None


# --------------------------------------------------------------------------- client reuse
#: SDK clients kept across warm invocations (bounded LRU). Keyed by provider, base URL and the
#: SHA-256 of the key (never the key itself: nothing of it is logged or shown); a rotated key
#: gets a new client and the old one ages out.
CLIENT_CACHE_SIZE = 8
_CLIENTS: OrderedDict[tuple, Any] = OrderedDict()
_CLIENTS_LOCK = threading.Lock()


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def cached_client(cache_key: tuple, make: Callable[[], Any]) -> Any:
    """The client of ``cache_key``, built by ``make`` on a miss (LRU of :data:`CLIENT_CACHE_SIZE`)."""
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(cache_key)
        if client is not None:
            _CLIENTS.move_to_end(cache_key)
            return client
    client = make()  # outside the lock: building a client may be slow
    with _CLIENTS_LOCK:
        client = _CLIENTS.setdefault(cache_key, client)  # a concurrent miss keeps the first one
        _CLIENTS.move_to_end(cache_key)
        while len(_CLIENTS) > CLIENT_CACHE_SIZE:
            _CLIENTS.popitem(last=False)  # not closed: a request may still be using it
    return client


def clear_clients() -> None:
    """Forget the kept SDK clients and role sessions (tests; a process that changed its endpoints)."""
    from quayutec.providers import roles

    with _CLIENTS_LOCK:
        _CLIENTS.clear()
    roles.clear_sessions()


@contextmanager
def sdk_client(call: ModelCall, sdk_class: Any, kwargs: dict[str, Any], key: str) -> Iterator[Any]:
    """An Anthropic/OpenAI SDK client for ``call``: the kept one of its provider, base URL and
    key; for an owner's own address a client of this request only (its connection is pinned to
    the address checked for this request, design §5), closed after it. The timeout is the
    request's (passed with the request: a kept client serves calls with other timeouts)."""
    if "http_client" in kwargs:
        with sdk_class(**kwargs) as client:
            yield client
        return
    yield cached_client((call.provider, kwargs.get("base_url"), key_digest(key)), lambda: sdk_class(**kwargs))
