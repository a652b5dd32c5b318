"""Failures raised by the Stainless-generated SDKs (``anthropic``, ``openai``), as
:class:`ProviderFailure`.

Both SDKs raise ``APIStatusError`` (with ``.response``) for a 4xx/5xx, ``APITimeoutError`` for a
timeout and ``APIConnectionError`` for a refused or dropped connection. The failure keeps the
provider's original body (``response.text``), never the SDK's wrapper message.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .call_policy import CONNECTION, TIMEOUT
from .failures import build_failure
from .models import ProviderFailure


def failure_from_sdk_error(
    provider: str, sdk: ModuleType, exc: BaseException, secret: str, request_id_header: str
) -> ProviderFailure | None:
    """The failure for an SDK exception, or ``None`` when ``exc`` is not an SDK API error."""
    if isinstance(exc, sdk.APITimeoutError):
        return build_failure(
            provider=provider,
            status=None,
            headers=None,
            body_text="",
            request_id=None,
            secret=secret,
            error_type=TIMEOUT,
            error_code=type(exc).__name__,
            message="request timed out (client timeout)",
        )
    if isinstance(exc, sdk.APIConnectionError):
        return build_failure(
            provider=provider,
            status=None,
            headers=None,
            body_text="",
            request_id=None,
            secret=secret,
            error_type=CONNECTION,
            error_code=type(exc).__name__,
            message=f"connection failed ({transport_error_text(exc)})",
        )
    response = getattr(exc, "response", None)
    if isinstance(exc, sdk.APIError) and response is not None:
        return failure_from_response(
            provider,
            response,
            secret,
            request_id_header,
            error_type=_attr_str(exc, "type"),
            error_code=_attr_str(exc, "code"),
        )
    return None


def transport_error_text(exc: BaseException) -> str:
    """What may be said of a transport failure: the class names along its cause chain, never
    their text (an HTTP client's message can quote a request header, e.g. ``Illegal header value
    b'Bearer sk-...\\n'``)."""
    names: list[str] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen and len(names) < 5:
        seen.add(id(cur))
        names.append(type(cur).__name__)
        cur = cur.__cause__ or cur.__context__
    return " <- ".join(names[1:] or names)


def failure_from_response(
    provider: str,
    response: Any,
    secret: str,
    request_id_header: str,
    error_type: str | None = None,
    error_code: str | None = None,
    message: str | None = None,
) -> ProviderFailure:
    """The failure for an ``httpx`` response (error status, or a 2xx that could not be read)."""
    try:
        body_text = response.text
    except Exception:  # noqa: BLE001 - whatever a closed or undecodable body raises, the failure is still classified
        body_text = ""
    headers = dict(response.headers.items())
    return build_failure(
        provider=provider,
        status=response.status_code,
        headers=headers,
        body_text=body_text or "",
        request_id=response.headers.get(request_id_header),
        secret=secret,
        error_type=error_type,
        error_code=error_code,
        message=message,
    )


def _attr_str(obj: Any, name: str) -> str | None:
    value = getattr(obj, name, None)
    return value if isinstance(value, str) and value else None
