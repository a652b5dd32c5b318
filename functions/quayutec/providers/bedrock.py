"""The ``bedrock`` adapter: one request through boto3 ``bedrock-runtime`` ``converse`` (Amazon
Bedrock Runtime Converse API, ``POST /model/{modelId}/converse``), authenticated with a Bedrock
API key as a bearer token, or SigV4-signed with the credentials of the company's role
(``ModelCall.role_arn``, assumed through STS: docs/design.md §5). botocore retries are off
(``total_max_attempts=1``); botocore and boto3 are imported on first use.
"""

from __future__ import annotations

import os
import threading
from typing import Any
from urllib.parse import urlsplit

from quayutec.providers._httpsdk import transport_error_text
from quayutec.providers.base import cached_client, key_digest, raise_failure, token_count, tool_call
from quayutec.providers.call_policy import CONNECTION, TIMEOUT
from quayutec.providers.failures import build_failure
from quayutec.providers.models import ModelCall, ModelReply, ProviderFailure
from quayutec.tools import TOOL_SPECS

#: Key of Bedrock ``requestMetadata`` that carries the end-user (agent) id.
BEDROCK_END_USER_KEY = "end_user_id"
#: The response header carrying Bedrock's request id.
REQUEST_ID_HEADER = "x-amzn-requestid"

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


def call_bedrock(call: ModelCall) -> ModelReply:
    """Amazon Bedrock Runtime Converse (``POST /model/{modelId}/converse``) with a tool config;
    the agent id goes in ``requestMetadata``."""
    from botocore import exceptions as bce
    from botocore.parsers import ResponseParserError

    key = call.api_key.get_secret_value()
    # Kept per endpoint, key (or role session), timeout (botocore sets it per client) and region.
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    creds: Any = None
    if call.role_arn and call.external_id and call.role_session:
        from quayutec.providers import roles

        creds = roles.credentials(call.role_arn, call.external_id, call.role_session)
        identity: tuple = ("role", call.role_arn, call.external_id, call.role_session)
        make = lambda: _bedrock_role_client(call, creds)  # noqa: E731
    else:
        identity = ("key", key_digest(key))
        make = lambda: _bedrock_client(call)  # noqa: E731
    client = cached_client(("bedrock", call.base_url, *identity, call.timeout_s, region), make)
    seen: dict[str, Any] = {}
    _BEDROCK_RAW.seen = seen
    failure = None
    try:
        if creds is not None:  # the session's AssumeRole (first use, or a refresh near expiry) fails here
            try:
                creds.get_frozen_credentials()
            except bce.ClientError as exc:
                raise_failure(call, roles.failure_from_sts(exc, call.role_arn or ""))
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
            from quayutec.providers import roles

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
        raise_failure(call, failure)
    try:
        content = resp["output"]["message"]["content"]
        text = "".join(block["text"] for block in content if "text" in block)
        tools = [
            tool_call(block["toolUse"].get("toolUseId"), block["toolUse"].get("name"), block["toolUse"].get("input"))
            for block in content
            if "toolUse" in block
        ]
    except (KeyError, TypeError):
        raise_failure(
            call, _bedrock_raw_failure(call, seen.get("response") or {}, key, message="reply could not be read")
        )
    meta = resp.get("ResponseMetadata", {})
    return ModelReply(
        text=text,
        tool_calls=tools,
        request_id=meta.get("RequestId") or meta.get("HTTPHeaders", {}).get(REQUEST_ID_HEADER),
        status=meta.get("HTTPStatusCode", 200),
        stop_reason=resp.get("stopReason"),
        input_tokens=token_count((resp.get("usage") or {}).get("inputTokens")),
        output_tokens=token_count((resp.get("usage") or {}).get("outputTokens")),
    )


def _bedrock_raw_failure(call: ModelCall, raw: dict, key: str, **markers: Any) -> ProviderFailure:
    headers = {str(k).lower(): str(v) for k, v in (raw.get("headers") or {}).items()}
    body = raw.get("body") or b""
    body_text = body.decode("utf-8", errors="replace") if isinstance(body, (bytes, bytearray)) else str(body)
    return build_failure(
        provider=call.provider,
        status=raw.get("status_code"),
        headers=headers,
        body_text=body_text,
        request_id=headers.get(REQUEST_ID_HEADER),
        secret=key,
        **markers,
    )


def _bedrock_client_error(call: ModelCall, exc: Any, raw: dict | None, key: str) -> ProviderFailure:
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
