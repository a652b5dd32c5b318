"""The provider adapters: one model request through the provider's official SDK (design §2.3).

* ``anthropic``: ``anthropic.Anthropic(...).messages.create`` (Anthropic Messages API).
* ``openai``: ``openai.OpenAI(...).chat.completions.create`` (OpenAI Chat Completions API).
* ``openai-compatible``: the same, against the owner's ``base_url``.
* ``bedrock``: boto3 ``bedrock-runtime`` ``converse`` (Amazon Bedrock Runtime Converse API),
  authenticated with a Bedrock API key as a bearer token, or SigV4-signed with the credentials of
  the company's role (``ModelCall.role_arn``, assumed through STS: docs/design.md §5).

SDK retries are off (``max_retries=0``; botocore ``total_max_attempts=1``): a call of
:func:`call_model` is exactly one HTTP request, and the retry policy is
:func:`quayutec.providers.decide_next` alone. Clients are built per call (no client exists at
import time). A warm Lambda reuses its clients (and so their connections: no TLS handshake per
request) per provider, base URL and key (for a ``bedrock`` agent under its company's role: per
role, external id and session, the session's credentials refreshed by botocore before they expire),
in a small LRU (:func:`_sdk_client`); an owner's own
address is resolved, checked and pinned per request, its client never kept. SDKs are imported on
first use, so importing this package stays cheap. Requests do not stream.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from ..tools import TOOL_SPECS
from ._httpsdk import failure_from_response, failure_from_sdk_error, transport_error_text
from .classify import CONNECTION, TIMEOUT, build_failure, scrub_reply
from .egress import AddressRefused, checked_address, pinned_http_client
from .keys import key_problem
from .models import ModelCall, ModelReply, ProviderError, ToolCall

#: Key of Bedrock ``requestMetadata`` that carries the end-user (agent) id.
BEDROCK_END_USER_KEY = "end_user_id"

#: Request-id response headers, per provider kind.
REQUEST_ID_HEADERS = {
    "anthropic": "request-id",
    "openai": "x-request-id",
    "openai-compatible": "x-request-id",
    "bedrock": "x-amzn-requestid",
}


#: The SDK module each provider kind's requests go through (Bedrock's is botocore, loaded already).
SDK_MODULES = {"anthropic": "anthropic", "openai": "openai", "openai-compatible": "openai"}


def load_sdk(provider: str) -> None:
    """Import the SDK ``provider``'s requests use (``anthropic``, ``openai``; nothing for
    ``bedrock``), once per process. The CallModel phase calls it before it measures the run's time
    left: a cold import takes about a second (seconds where no bytecode is shipped), which must not
    come out of the request's timeout after it was computed."""
    import importlib

    name = SDK_MODULES.get(provider)
    if name:
        importlib.import_module(name)


def call_model(call: ModelCall) -> ModelReply:
    """Send exactly one request for ``call`` and return the reply.

    Raises :class:`ProviderError` (``.failure`` classified, see
    :data:`quayutec.providers.classify.RULES`) for an error status, a timeout, a refused or
    dropped connection, or a 2xx body that cannot be read. The key never appears in the error.
    Raises ``ValueError`` (before any request) for a Bedrock endpoint that is plain HTTP to a
    non-loopback host: a key is never sent in clear. The reply is scrubbed of the key (a model
    server can echo the ``Authorization`` header in its text, tool calls or request id).
    """
    adapter = _ADAPTERS[call.provider]
    problem = None if call.role_arn else key_problem(call.api_key.get_secret_value())
    if problem:  # nothing is sent: the HTTP client would refuse the header, quoting it
        _raise(
            call,
            build_failure(
                provider=call.provider,
                status=None,
                headers=None,
                body_text="",
                request_id=None,
                secret=call.api_key.get_secret_value(),
                error_type="invalid_key",
                error_code="InvalidKey",
                message=f"the stored key is not valid: {problem}",
            ),
        )
    if call.owner_base_url and call.base_url:
        try:
            checked_address(call.base_url, allow_loopback=call.allow_loopback)
        except AddressRefused as exc:
            _raise(
                call,
                build_failure(
                    provider=call.provider,
                    status=None,
                    headers=None,
                    body_text="",
                    request_id=None,
                    secret=call.api_key.get_secret_value(),
                    error_type="address_refused",
                    error_code="AddressRefused",
                    message=f"the owner's model address is refused: {exc}",
                ),
            )
    reply = scrub_reply(adapter(call), call.api_key.get_secret_value())
    _count_tokens(call, reply)
    return reply


def _count_tokens(call: ModelCall, reply: ModelReply) -> None:
    """The reply's usage fields join the running invocation's cost line (design §10); outside a
    run phase nothing counts. A failed request has no usage: nothing is counted for it."""
    from quayutec import cost_line

    cost_line.count_tokens(call.provider, call.model, reply.input_tokens, reply.output_tokens)


def _token_count(value: Any) -> int | None:
    """A usage field as a count: a non-negative integer, else ``None`` (absent or unreadable)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


#: How deep a tool call's arguments may nest (objects and arrays) to be read as arguments.
MAX_ARGUMENT_DEPTH = 32


def _nested_within(value: Any, depth: int) -> bool:
    """Whether ``value``'s objects and arrays nest at most ``depth`` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            if level > depth:
                return False
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return True


def _tool_call(id_: Any, name: Any, raw: Any) -> ToolCall:
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
    if not _nested_within(parsed, MAX_ARGUMENT_DEPTH):
        parsed = None
    return ToolCall(
        id=id_ if isinstance(id_, str) else None,
        name=name if isinstance(name, str) else "",
        input=parsed if isinstance(parsed, dict) else None,
        raw_input=raw_text,
    )


def _sdk_kwargs(call: ModelCall, key: str) -> dict[str, Any]:
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
            _raise(
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


def _raise(call: ModelCall, failure) -> None:
    raise ProviderError(failure, provider=call.provider) from None


# --------------------------------------------------------------------------- client reuse
#: SDK clients kept across warm invocations (bounded LRU). Keyed by provider, base URL and the
#: SHA-256 of the key (never the key itself: nothing of it is logged or shown); a rotated key
#: gets a new client and the old one ages out.
CLIENT_CACHE_SIZE = 8
_CLIENTS: OrderedDict[tuple, Any] = OrderedDict()
_CLIENTS_LOCK = threading.Lock()


def _key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _cached_client(cache_key: tuple, make: Callable[[], Any]) -> Any:
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
    from . import roles

    with _CLIENTS_LOCK:
        _CLIENTS.clear()
    roles.clear_sessions()


@contextmanager
def _sdk_client(call: ModelCall, sdk_class: Any, kwargs: dict[str, Any], key: str) -> Iterator[Any]:
    """An Anthropic/OpenAI SDK client for ``call``: the kept one of its provider, base URL and
    key; for an owner's own address a client of this request only (its connection is pinned to
    the address checked for this request, design §5), closed after it. The timeout is the
    request's (passed with the request: a kept client serves calls with other timeouts)."""
    if "http_client" in kwargs:
        with sdk_class(**kwargs) as client:
            yield client
        return
    yield _cached_client((call.provider, kwargs.get("base_url"), _key_digest(key)), lambda: sdk_class(**kwargs))


# --------------------------------------------------------------------------- Anthropic
def _call_anthropic(call: ModelCall) -> ModelReply:
    """Anthropic Messages API (``POST /v1/messages``), non-streaming, with the tools of design §4."""
    import anthropic

    key = call.api_key.get_secret_value()
    kwargs = _sdk_kwargs(call, key)
    failure = None
    with _sdk_client(call, anthropic.Anthropic, kwargs, key) as client:
        try:
            raw = client.messages.with_raw_response.create(
                timeout=call.timeout_s,
                model=call.model,
                max_tokens=call.max_tokens,
                system=call.system,
                messages=[{"role": "user", "content": call.user_text}],
                tools=[
                    {"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
                    for t in TOOL_SPECS
                ],
                metadata={"user_id": call.end_user_id},
            )
        except anthropic.APIError as exc:
            failure = failure_from_sdk_error(call.provider, anthropic, exc, key, REQUEST_ID_HEADERS["anthropic"])
            if failure is None:
                raise
        if failure is not None:
            _raise(call, failure)
        try:
            message = raw.parse()
            if not isinstance(message.content, list):  # the SDK parses without validating
                raise ValueError("reply content is not a list of blocks")
            text = "".join(b.text for b in message.content if getattr(b, "type", None) == "text")
            tools = [
                _tool_call(b.id, b.name, b.input) for b in message.content if getattr(b, "type", None) == "tool_use"
            ]
        except Exception:  # noqa: BLE001 - a 2xx we cannot read, however the SDK fails on it, is classified
            failure = failure_from_response(
                call.provider, raw.http_response, key, "request-id", message="reply could not be read"
            )
        if failure is not None:
            _raise(call, failure)
    return ModelReply(
        text=text,
        tool_calls=tools,
        request_id=raw.headers.get("request-id") or getattr(message, "_request_id", None),
        status=raw.status_code,
        stop_reason=message.stop_reason,
        input_tokens=_token_count(getattr(getattr(message, "usage", None), "input_tokens", None)),
        output_tokens=_token_count(getattr(getattr(message, "usage", None), "output_tokens", None)),
    )


# --------------------------------------------------------------------------- OpenAI
def _call_openai(call: ModelCall) -> ModelReply:
    """OpenAI Chat Completions (``POST /v1/chat/completions``), non-streaming, with function
    tools; for ``openai-compatible`` the same against the owner's base URL."""
    import openai

    key = call.api_key.get_secret_value()
    kwargs = _sdk_kwargs(call, key)
    params: dict[str, Any] = {
        "model": call.model,
        "messages": [
            {"role": "system", "content": call.system},
            {"role": "user", "content": call.user_text},
        ],
        "tools": [
            {
                "type": "function",
                "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]},
            }
            for t in TOOL_SPECS
        ],
        "user": call.end_user_id,
        "timeout": call.timeout_s,
    }
    # OpenAI's own API wants max_completion_tokens (max_tokens is deprecated and refused by
    # reasoning models); OpenAI-compatible servers commonly know only max_tokens.
    params["max_completion_tokens" if call.provider == "openai" else "max_tokens"] = call.max_tokens
    failure = None
    with _sdk_client(call, openai.OpenAI, kwargs, key) as client:
        try:
            raw = client.chat.completions.with_raw_response.create(**params)
        except openai.APIError as exc:
            failure = failure_from_sdk_error(call.provider, openai, exc, key, REQUEST_ID_HEADERS["openai"])
            if failure is None:
                raise
        if failure is not None:
            _raise(call, failure)
        try:
            completion = raw.parse()
            if not completion.choices:  # e.g. a compatible server's {"error": ...} sent with 200
                raise ValueError("reply has no choices")
            choice = completion.choices[0]
            msg = choice.message
            text = msg.content or ""
            tools: list[ToolCall] = []
            for tc in msg.tool_calls or []:
                if getattr(tc, "type", None) == "function":
                    tools.append(_tool_call(tc.id, tc.function.name, tc.function.arguments or ""))
                elif getattr(tc, "type", None) == "custom":
                    tools.append(_tool_call(tc.id, tc.custom.name, tc.custom.input or ""))
            stop = choice.finish_reason
            # Chat Completions' usage names; a compatible server may use the Responses API's.
            usage = getattr(completion, "usage", None)
            tokens_in = _token_count(getattr(usage, "prompt_tokens", None))
            tokens_out = _token_count(getattr(usage, "completion_tokens", None))
            if tokens_in is None and tokens_out is None:
                tokens_in = _token_count(getattr(usage, "input_tokens", None))
                tokens_out = _token_count(getattr(usage, "output_tokens", None))
        except Exception:  # noqa: BLE001 - a 2xx we cannot read, however the SDK fails on it, is classified
            failure = failure_from_response(
                call.provider, raw.http_response, key, "x-request-id", message="reply could not be read"
            )
        if failure is not None:
            _raise(call, failure)
    return ModelReply(
        text=text,
        tool_calls=tools,
        request_id=raw.headers.get("x-request-id") or getattr(completion, "_request_id", None),
        status=raw.status_code,
        stop_reason=stop,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
    )


# --------------------------------------------------------------------------- Bedrock
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
_LOADER_LOCK = threading.Lock()
_LOADER: Any = None


def _shared_loader() -> Any:
    """One botocore data loader for all calls (reading the service model is the slow part of
    building a client); created on first use, never at import time."""
    global _LOADER
    with _LOADER_LOCK:
        if _LOADER is None:
            import botocore.session

            _LOADER = botocore.session.Session().get_component("data_loader")
        return _LOADER


def _bedrock_client(call: ModelCall) -> Any:
    """A ``bedrock-runtime`` client for one call, authenticated by the Bedrock API key.

    The key is sent as ``Authorization: Bearer <key>`` (Bedrock API keys, Amazon Bedrock User
    Guide "Use an API key") by a request hook registered on this client only: no process-wide
    ``AWS_BEARER_TOKEN_BEDROCK`` variable, no SigV4 credential lookup (the client is
    ``UNSIGNED``, so it never probes the environment or instance metadata). botocore's own
    ``bearer`` signer does the same but refuses plain HTTP, which the local provider server
    speaks; the hook allows plain HTTP to a loopback address only.
    """
    import botocore

    client = _bedrock_runtime(call, signature_version=botocore.UNSIGNED)
    bearer = f"Bearer {call.api_key.get_secret_value()}"

    def add_bearer(request: Any, **_: Any) -> None:
        request.headers["Authorization"] = bearer

    client.meta.events.register("request-created.bedrock-runtime.Converse", add_bearer)
    return client


def _bedrock_role_client(call: ModelCall, creds: Any) -> Any:
    """A ``bedrock-runtime`` client for one role session (docs/design.md §5): SigV4-signed with
    ``creds`` (the session's refreshable credentials, :func:`quayutec.providers.roles.credentials`),
    the only credentials its botocore session knows (it never reads the function's own)."""
    from botocore.credentials import CredentialProvider, CredentialResolver

    class _Session(CredentialProvider):
        METHOD = CANONICAL_NAME = "quayutec-assume-role"

        def load(self) -> Any:
            return creds

    return _bedrock_runtime(call, credential_provider=CredentialResolver(providers=[_Session()]))


def _bedrock_runtime(call: ModelCall, signature_version: Any = None, credential_provider: Any = None) -> Any:
    """A ``bedrock-runtime`` client of the call's endpoint, region and timeout, no SDK retries.
    Refuses (``ValueError``) plain HTTP to a host that is not a loopback one: neither a key nor a
    session token is sent in clear."""
    import boto3
    import botocore.session
    from botocore.config import Config

    endpoint = call.base_url or None
    if endpoint is not None:
        parsed = urlsplit(endpoint)
        if parsed.scheme != "https" and (parsed.hostname or "") not in _LOOPBACK_HOSTS:
            raise ValueError(
                "a Bedrock API key or session token is only sent over HTTPS (or plain HTTP to a loopback address)"
            )
    session = botocore.session.Session()
    session.register_component("data_loader", _shared_loader())
    if credential_provider is not None:
        session.register_component("credential_provider", credential_provider)
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=call.timeout_s,
        read_timeout=call.timeout_s,
        **({"signature_version": signature_version} if signature_version is not None else {}),
    )
    client = boto3.session.Session(botocore_session=session).client(
        "bedrock-runtime", region_name=region, endpoint_url=endpoint, config=config
    )
    # The raw response of the calling thread's request (a kept client serves many calls).
    client.meta.events.register("before-parse.bedrock-runtime.Converse", _keep_raw)
    return client


_BEDROCK_RAW = threading.local()


def _keep_raw(response_dict: dict, **_: Any) -> None:
    seen = getattr(_BEDROCK_RAW, "seen", None)
    if seen is not None:
        seen["response"] = response_dict


def _call_bedrock(call: ModelCall) -> ModelReply:
    """Amazon Bedrock Runtime Converse (``POST /model/{modelId}/converse``) with a tool config;
    the agent id goes in ``requestMetadata``."""
    from botocore import exceptions as bce
    from botocore.parsers import ResponseParserError

    key = call.api_key.get_secret_value()
    # Kept per endpoint, key (or role session), timeout (botocore sets it per client) and region.
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    creds: Any = None
    if call.role_arn and call.external_id and call.role_session:
        from . import roles

        creds = roles.credentials(call.role_arn, call.external_id, call.role_session)
        identity: tuple = ("role", call.role_arn, call.external_id, call.role_session)
        make = lambda: _bedrock_role_client(call, creds)  # noqa: E731
    else:
        identity = ("key", _key_digest(key))
        make = lambda: _bedrock_client(call)  # noqa: E731
    client = _cached_client(("bedrock", call.base_url, *identity, call.timeout_s, region), make)
    seen: dict[str, Any] = {}
    _BEDROCK_RAW.seen = seen
    failure = None
    try:
        if creds is not None:  # the session's AssumeRole (first use, or a refresh near expiry) fails here
            try:
                creds.get_frozen_credentials()
            except bce.ClientError as exc:
                _raise(call, roles.failure_from_sts(exc, call.role_arn or ""))
        resp = client.converse(
            modelId=call.model,
            system=[{"text": call.system}],
            messages=[{"role": "user", "content": [{"text": call.user_text}]}],
            inferenceConfig={"maxTokens": call.max_tokens},
            toolConfig={
                "tools": [
                    {
                        "toolSpec": {
                            "name": t["name"],
                            "description": t["description"],
                            "inputSchema": {"json": t["input_schema"]},
                        }
                    }
                    for t in TOOL_SPECS
                ]
            },
            requestMetadata={BEDROCK_END_USER_KEY: call.end_user_id},
        )
    except bce.ClientError as exc:
        if call.role_arn and getattr(exc, "operation_name", None) == "AssumeRole":  # refreshed while signing
            from . import roles

            failure = roles.failure_from_sts(exc, call.role_arn)
        else:
            failure = _bedrock_client_error(call, exc, seen.get("response"), key)
    except (bce.ReadTimeoutError, bce.ConnectTimeoutError) as exc:
        failure = build_failure(
            provider=call.provider,
            status=None,
            headers=None,
            body_text="",
            request_id=None,
            secret=key,
            error_type=TIMEOUT,
            error_code=type(exc).__name__,
            message=f"request timed out ({transport_error_text(exc)})",
        )
    except (bce.HTTPClientError, bce.ConnectionError) as exc:
        failure = build_failure(
            provider=call.provider,
            status=None,
            headers=None,
            body_text="",
            request_id=None,
            secret=key,
            error_type=CONNECTION,
            error_code=type(exc).__name__,
            message=f"connection failed ({transport_error_text(exc)})",
        )
    except ResponseParserError:
        raw = seen.get("response") or {}
        failure = _bedrock_raw_failure(call, raw, key, message="reply could not be read")
    finally:
        _BEDROCK_RAW.seen = None
    if failure is not None:
        _raise(call, failure)
    try:
        content = resp["output"]["message"]["content"]
        text = "".join(block["text"] for block in content if "text" in block)
        tools = [
            _tool_call(block["toolUse"].get("toolUseId"), block["toolUse"].get("name"), block["toolUse"].get("input"))
            for block in content
            if "toolUse" in block
        ]
    except (KeyError, TypeError):
        _raise(call, _bedrock_raw_failure(call, seen.get("response") or {}, key, message="reply could not be read"))
    meta = resp.get("ResponseMetadata", {})
    return ModelReply(
        text=text,
        tool_calls=tools,
        request_id=meta.get("RequestId") or meta.get("HTTPHeaders", {}).get("x-amzn-requestid"),
        status=meta.get("HTTPStatusCode", 200),
        stop_reason=resp.get("stopReason"),
        input_tokens=_token_count((resp.get("usage") or {}).get("inputTokens")),
        output_tokens=_token_count((resp.get("usage") or {}).get("outputTokens")),
    )


def _bedrock_raw_failure(call: ModelCall, raw: dict, key: str, **markers: Any):
    headers = {str(k).lower(): str(v) for k, v in (raw.get("headers") or {}).items()}
    body = raw.get("body") or b""
    body_text = body.decode("utf-8", errors="replace") if isinstance(body, (bytes, bytearray)) else str(body)
    return build_failure(
        provider=call.provider,
        status=raw.get("status_code"),
        headers=headers,
        body_text=body_text,
        request_id=headers.get("x-amzn-requestid"),
        secret=key,
        **markers,
    )


def _bedrock_client_error(call: ModelCall, exc: Any, raw: dict | None, key: str):
    """A botocore ``ClientError`` as a failure. botocore has already read the exception name
    (``x-amzn-ErrorType`` header or ``__type``/``code`` in the body) into ``Error.Code``; the
    raw response (kept by the ``before-parse`` hook) gives the original body and headers."""
    err = exc.response.get("Error", {}) if isinstance(exc.response, dict) else {}
    meta = exc.response.get("ResponseMetadata", {}) if isinstance(exc.response, dict) else {}
    code = err.get("Code")
    if isinstance(code, str) and (code.isdigit() or not code):
        code = None  # botocore's stand-in for a body without markers (e.g. an HTML 502)
    if raw is None:
        raw = {"status_code": meta.get("HTTPStatusCode"), "headers": meta.get("HTTPHeaders", {}), "body": b""}
    return _bedrock_raw_failure(call, raw, key, error_type=code, message=err.get("Message") or None)


_ADAPTERS: dict[str, Callable[[ModelCall], ModelReply]] = {
    "anthropic": _call_anthropic,
    "openai": _call_openai,
    "openai-compatible": _call_openai,
    "bedrock": _call_bedrock,
}
