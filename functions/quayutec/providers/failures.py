"""A failed model request as a :class:`ProviderFailure`: the provider's error markers read from
its body, the verdict of :data:`quayutec.providers.call_policy.RULES`, the wait it names, every
text field scrubbed of the key (docs/design.md §2).

Pure functions: nothing here talks to the network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .call_policy import classify, parse_retry_after
from .keys import scrubber
from .models import MAX_ERROR_BODY_BYTES, ProviderFailure


def truncate_body(text: str, limit: int = MAX_ERROR_BODY_BYTES) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (never splitting a character)."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


def _str_or_none(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    text = str(value).strip()
    return text or None


def error_markers(provider: str, body_text: str) -> tuple[str | None, str | None, str | None]:
    """``(error_type, error_code, message)`` read defensively from a provider's error body.

    Anthropic: ``{"type": "error", "error": {"type", "message", "details": {"error_code"}}}``.
    OpenAI: ``{"error": {"message", "type", "param", "code"}}``. Bedrock:
    ``{"message"}`` plus ``__type`` / ``code`` (the exception name is usually only in the
    ``x-amzn-ErrorType`` header, read by botocore). A body that is not JSON (an HTML proxy page)
    gives no markers.
    """
    try:
        body = json.loads(body_text) if body_text else None
    except (ValueError, RecursionError):
        return None, None, None
    if not isinstance(body, dict):
        return None, None, None
    err = body.get("error")
    if isinstance(err, dict):
        details = err.get("details")
        if not isinstance(details, dict):
            details = {}
        code = details.get("error_code", err.get("error_code", err.get("code", body.get("error_code"))))
        return _str_or_none(err.get("type")), _str_or_none(code), _str_or_none(err.get("message"))
    if isinstance(err, str):  # some OpenAI-compatible servers: {"error": "text"}
        return _str_or_none(body.get("type")), _str_or_none(body.get("code")), err
    etype = body.get("__type") or body.get("type") or body.get("code")
    if isinstance(etype, str) and ":" in etype:  # "ThrottlingException:http://internal..."
        etype = etype.split(":", 1)[0]
    if isinstance(etype, str) and "#" in etype:  # "com.amazon.coral#ThrottlingException"
        etype = etype.rsplit("#", 1)[1]
    message = body.get("message", body.get("Message"))
    return _str_or_none(etype), None, _str_or_none(message)


def build_failure(
    *,
    provider: str,
    status: int | None,
    headers: Mapping[str, str] | None,
    body_text: str,
    request_id: str | None,
    secret: str,
    error_type: str | None = None,
    error_code: str | None = None,
    message: str | None = None,
    now: datetime | None = None,
) -> ProviderFailure:
    """A classified :class:`ProviderFailure` from a raw response (or from no response).

    Markers found in the body win; ``error_type`` / ``error_code`` / ``message`` passed in
    fill what the body lacks (e.g. the Bedrock exception name from ``x-amzn-ErrorType``).
    Every text field (the request id too: a header the provider chose) is scrubbed of ``secret``.
    """
    b_type, b_code, b_message = error_markers(provider, body_text)
    etype = b_type or error_type
    ecode = b_code or error_code
    msg = b_message or message
    if not msg:
        snippet = " ".join(_strip_tags(body_text).split())[:300]
        msg = f"HTTP {status}: {snippet}" if status is not None else "no response"
    rule = classify(provider, status, etype, ecode, msg)
    wait, header = parse_retry_after(headers, now=now) if status is not None else (None, None)
    clean = scrubber(secret)
    return ProviderFailure(
        status=status,
        error_type=clean(etype or "") or None,
        error_code=clean(ecode or "") or None,
        message=clean(msg),
        request_id=clean(request_id or "") or None,
        category=rule.category,
        retryable=rule.retryable,
        retry_after_s=wait,
        retry_after_header=header,
        body=truncate_body(clean(body_text or "")),
    )


def _strip_tags(text: str) -> str:
    return re.sub(r"<[^>]*>", " ", text or "")
