"""Classifying a failed model request, and the retry decision after it (design §2.3).

The verdict comes from one table, :data:`RULES`, read top to bottom: the first row whose every
set column matches the failure wins. Columns: provider kind(s), HTTP status range, the
provider's error type, error code and a message pattern. A failure is classified by the
provider's own markers, never by its status alone (a 429 can be final, a 400 can be a spending
limit). Sources of the markers: Anthropic API reference "Errors" (error types, ``error.details.
error_code``), OpenAI API reference "Error codes" (``error.type`` / ``error.code``), Amazon
Bedrock Runtime API reference "Converse" (exception names, sent as ``x-amzn-ErrorType``), AWS STS
API reference "AssumeRole" and "Common Errors" (``AccessDenied``, ``Throttling``).

Pure functions: nothing here talks to the network.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from .keys import scrub_value, scrubber
from .models import MAX_ERROR_BODY_BYTES, ModelReply, ProviderFailure, RetryDecision, ToolCall

ALL = frozenset({"anthropic", "openai", "openai-compatible", "bedrock"})
ANTHROPIC = frozenset({"anthropic"})
OPENAI = frozenset({"openai", "openai-compatible"})
BEDROCK = frozenset({"bedrock"})

#: ``error_type`` given to failures that got no HTTP response.
TIMEOUT = "timeout"
CONNECTION = "connection"

#: design §2.3 numbers.
MAX_REQUESTS = 3
MAX_RETRY_AFTER_S = 20.0
DEFAULT_WAITS_S = {2: 2, 3: 8}  # request number about to be made -> seconds to wait before it


@dataclass(frozen=True)
class Rule:
    """One row of the classifier. ``None`` in a column means "any value".

    ``status``: inclusive range, or ``None`` for "no HTTP response" rows only when ``no_response``
    is set. ``error_type`` / ``error_code``: exact markers (alternatives in a tuple), compared
    case-insensitively. ``message``: a regex searched (case-insensitively) in the provider's
    error message.
    """

    name: str
    providers: frozenset[str]
    status: tuple[int, int] | None
    error_type: tuple[str, ...] | None
    error_code: tuple[str, ...] | None
    message: str | None
    category: str
    retryable: bool
    no_response: bool = False

    def matches(
        self, provider: str, status: int | None, error_type: str | None, error_code: str | None, message: str
    ) -> bool:
        if provider not in self.providers:
            return False
        if self.no_response != (status is None):
            return False
        if self.status is not None and (status is None or not self.status[0] <= status <= self.status[1]):
            return False
        if self.error_type is not None and (error_type or "").lower() not in self.error_type:
            return False
        if self.error_code is not None and (error_code or "").lower() not in self.error_code:
            return False
        return self.message is None or re.search(self.message, message or "", re.IGNORECASE) is not None


def _t(*names: str) -> tuple[str, ...]:
    return tuple(n.lower() for n in names)


_2XX = (200, 299)
_4XX = (400, 499)
_5XX = (500, 599)
#: OpenAI's limits per day: "... on tokens per day (TPD): Limit ...", "... requests per day (RPD) ...".
_PER_DAY_OPENAI = r"per day \((TPD|RPD)\)|(tokens|requests) per day"

# fmt: off
#: The classifier (first match wins). name, providers, status, error type, error code,
#: message pattern -> category, retryable.
RULES: tuple[Rule, ...] = (
    # --- a bedrock agent's company role (docs/design.md §5): STS AssumeRole failed, no model request
    #     was sent (error_code "AssumeRole"). Refused: final, the run fails naming the role;
    #     throttled: retryable like a rate limit (STS answers Throttling with 400).
    Rule("sts-access-denied", BEDROCK, None, _t("AccessDenied"), _t("AssumeRole"), None, "role_denied", False),
    Rule("sts-throttling", BEDROCK, _4XX, _t("Throttling", "ThrottlingException", "RequestLimitExceeded"),
         _t("AssumeRole"), None, "rate_limit", True),
    Rule("sts-other-4xx", BEDROCK, _4XX, None, _t("AssumeRole"), None, "role_denied", False),
    # --- final although the status looks retryable, or a spending limit behind a 400 -------
    Rule("anthropic-credit-balance", ANTHROPIC, (400, 400), None, None, r"credit balance is too low",
         "spend_limit", False),
    Rule("anthropic-enforced-spend-limit", ANTHROPIC, (429, 429), _t("rate_limit_error"),
         _t("enforced_spend_limit_reached"), None, "spend_limit", False),
    Rule("anthropic-contract-spend-limit", ANTHROPIC, (429, 429), None, _t("contract_spend_limit_reached"), None,
         "spend_limit", False),
    Rule("anthropic-billing-402", ANTHROPIC, (402, 402), None, None, None, "spend_limit", False),
    Rule("openai-insufficient-quota-type", OPENAI, _4XX, _t("insufficient_quota"), None, None, "quota", False),
    Rule("openai-insufficient-quota-code", OPENAI, _4XX, None, _t("insufficient_quota"), None, "quota", False),
    Rule("openai-spend-limit-code", OPENAI, _4XX, None,
         _t("credit_balance_exhausted", "billing_hard_limit_reached", "billing_not_active", "spend_limit_reached"),
         None, "spend_limit", False),
    Rule("openai-request-too-large", OPENAI, (429, 429), None, None, r"request too large", "request_too_large", False),
    Rule("bedrock-daily-token-quota", BEDROCK, (429, 429), _t("ThrottlingException"), None,
         r"per day|daily", "quota", False),
    Rule("bedrock-service-quota", BEDROCK, _4XX, _t("ServiceQuotaExceededException"), None, None, "quota", False),
    # a limit per day is a used-up quota, not a rate limit to wait out (also inside a 200 body)
    Rule("openai-per-day-limit", OPENAI, (200, 499), None, None, _PER_DAY_OPENAI, "quota", False),
    Rule("anthropic-daily-rate-limit", ANTHROPIC, (200, 499), None, None, r"daily rate limit|per day", "quota", False),
    Rule("bedrock-daily-quota-any-type", BEDROCK, (200, 499), None, None, r"tokens per day|daily (token )?quota",
         "quota", False),
    # --- an error object inside a 2xx body: classified by its type, like the same error as a status
    Rule("error-in-2xx-overloaded", ALL, _2XX,
         _t("overloaded_error", "ModelNotReadyException", "ServiceUnavailableException"), None, None,
         "overloaded", True),
    Rule("error-in-2xx-server-error", ALL, _2XX, _t("api_error", "server_error", "InternalServerException",
                                                    "ModelStreamErrorException"), None, None, "server_error", True),
    Rule("error-in-2xx-rate-limit", ALL, _2XX, _t("rate_limit_error", "rate_limit_exceeded", "requests", "tokens",
                                                  "ThrottlingException"), None, None, "rate_limit", True),
    Rule("error-in-2xx-timeout", ALL, _2XX, _t("timeout_error", "ModelTimeoutException"), None, None, "timeout", True),
    Rule("error-in-2xx-auth", ALL, _2XX, _t("authentication_error", "permission_error", "invalid_api_key",
                                            "AccessDeniedException", "UnrecognizedClientException"), None, None,
         "auth", False),
    Rule("error-in-2xx-quota", ALL, _2XX, _t("insufficient_quota", "billing_error"), None, None, "quota", False),
    Rule("error-in-2xx-not-found", ALL, _2XX, _t("not_found_error", "model_not_found", "ResourceNotFoundException"),
         None, None, "model_not_found", False),
    Rule("error-in-2xx-invalid-request", ALL, _2XX, _t("invalid_request_error", "ValidationException",
                                                       "request_too_large"), None, None, "bad_request", False),
    # --- retryable: rate limits, overload, server errors, timeouts ---------------------------
    Rule("bedrock-model-not-ready", BEDROCK, (429, 429), _t("ModelNotReadyException"), None, None, "overloaded", True),
    Rule("rate-limit", ALL, (429, 429), None, None, None, "rate_limit", True),
    Rule("overloaded-529", ALL, (529, 529), None, None, None, "overloaded", True),
    Rule("server-error-5xx", ALL, _5XX, None, None, None, "server_error", True),
    Rule("request-timeout-408", ALL, (408, 408), None, None, None, "timeout", True),
    # --- refused before any request was sent (issue 10): a stored key that cannot be a header
    #     value, an owner address that is not public after DNS resolution: final
    Rule("no-request-invalid-key", ALL, None, _t("invalid_key"), None, None, "auth", False, no_response=True),
    Rule("no-request-address-refused", ALL, None, _t("address_refused"), None, None, "address_refused", False,
         no_response=True),
    Rule("no-response-timeout", ALL, None, _t(TIMEOUT), None, None, "timeout", True, no_response=True),
    Rule("no-response-connection", ALL, None, None, None, None, "connection", True, no_response=True),
    # --- final: the request itself is refused -----------------------------------------------
    Rule("key-rejected-401", ALL, (401, 401), None, None, None, "auth", False),
    Rule("forbidden-403", ALL, (403, 403), None, None, None, "auth", False),
    Rule("unknown-model-404", ALL, (404, 404), None, None, None, "model_not_found", False),
    Rule("bedrock-invalid-model-id", BEDROCK, (400, 400), _t("ValidationException"), None,
         r"model identifier is invalid", "model_not_found", False),
    Rule("too-large-413", ALL, (413, 413), None, None, None, "request_too_large", False),
    Rule("other-4xx", ALL, _4XX, None, None, None, "bad_request", False),
    Rule("unexpected-status", ALL, (0, 999), None, None, None, "unexpected", False),
)
# fmt: on


def classify(provider: str, status: int | None, error_type: str | None, error_code: str | None, message: str) -> Rule:
    """The first row of :data:`RULES` matching the failure (the table ends with catch-alls)."""
    for rule in RULES:
        if rule.matches(provider, status, error_type, error_code, message):
            return rule
    raise AssertionError("RULES has no catch-all row")  # pragma: no cover


# --------------------------------------------------------------------------- retry-after
def parse_retry_after(
    headers: Mapping[str, str] | None, now: datetime | None = None
) -> tuple[float | None, str | None]:
    """The wait a response names, exact, in seconds, and the header it came from.

    ``retry-after-ms`` (milliseconds) wins over ``retry-after``, which may be an integer or
    decimal number of seconds or an HTTP date (RFC 9110 §10.2.3); a date in the past is 0.
    Unparseable or negative values are ignored. Returns ``(None, None)`` when none applies.
    """
    if not headers:
        return None, None
    lower = {str(k).lower(): str(v).strip() for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        value = _number(ms)
        if value is not None:
            return value / 1000.0, f"retry-after-ms: {ms}"
    raw = lower.get("retry-after")
    if raw is None:
        return None, None
    value = _number(raw)
    if value is not None:
        return value, f"retry-after: {raw}"
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None, None
    if when is None:
        return None, None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    return max(0.0, (when - now).total_seconds()), f"retry-after: {raw}"


def _number(text: str) -> float | None:
    if not re.fullmatch(r"\d+(\.\d+)?", text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _fmt_seconds(value: float) -> str:
    return f"{value:g}"


# --------------------------------------------------------------------------- decision
def decide_next(failure: ProviderFailure, requests_made: int, one_request_only: bool) -> RetryDecision:
    """Whether to make another request after ``failure`` (design §2.3), and the wait before it.

    ``requests_made``: requests of this call made so far, including the failed one (1..3).
    ``one_request_only``: the agent's owner supplied the base URL.

    * a final failure: no retry (``"final: <category>"``);
    * an owner base URL: no retry, whatever the failure (``"owner base URL: one request"``);
    * the 3rd request was the last;
    * ``retry-after`` of at most 20 s (tested on the exact value): wait it, rounded up to whole
      seconds; above 20 s: the call fails here;
    * no ``retry-after``: 2 s before the 2nd request, 8 s before the 3rd.
    """
    if requests_made < 1:
        raise ValueError("requests_made counts the failed request: at least 1")
    if not failure.retryable:
        return RetryDecision(retry=False, wait_seconds=None, reason=f"final: {failure.category}")
    if one_request_only:
        return RetryDecision(retry=False, wait_seconds=None, reason="owner base URL: one request")
    if requests_made >= MAX_REQUESTS:
        return RetryDecision(
            retry=False,
            wait_seconds=None,
            reason=f"{failure.category}: request {requests_made} of {MAX_REQUESTS} was the last",
        )
    next_request = requests_made + 1
    if failure.retry_after_s is not None:
        exact = failure.retry_after_s
        header = failure.retry_after_header or "retry-after"
        if exact > MAX_RETRY_AFTER_S:
            return RetryDecision(
                retry=False,
                wait_seconds=None,
                reason=f"{header} -> {_fmt_seconds(exact)} s > {_fmt_seconds(MAX_RETRY_AFTER_S)} s: not waited for",
            )
        wait = math.ceil(exact)
        return RetryDecision(
            retry=True, wait_seconds=wait, reason=f"{header} -> wait {wait} s before request {next_request}"
        )
    wait = DEFAULT_WAITS_S[next_request]
    return RetryDecision(retry=True, wait_seconds=wait, reason=f"default wait {wait} s before request {next_request}")


# --------------------------------------------------------------------------- building failures
def truncate_body(text: str, limit: int = MAX_ERROR_BODY_BYTES) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (never splitting a character)."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore")


def scrub(text: str | None, secret: str) -> str:
    """``text`` with every occurrence of ``secret`` replaced, in every encoding it may take
    (raw, JSON-escaped, URL-encoded, HTML-escaped, hex, base64, any letter case:
    :func:`quayutec.providers.keys.encodings`), so a key never leaves an adapter. A second line of
    defence: no exception text that may echo request headers is used in the first place."""
    if not text:
        return text or ""
    return scrubber(secret)(text)


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


# --------------------------------------------------------------------------- scrubbing answers
#: A UTF-16 surrogate code point: in a Python string only when a JSON text escaped one alone
#: (``"\\ud800"``), which no UTF-8 store, the room or the ledger, can hold.
_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_reply(reply: ModelReply, secret: str) -> ModelReply:
    """``reply`` with every form of ``secret`` removed from its text, every string of its tool
    calls (name, id, arguments: keys and values, and the raw arguments) and its request id and
    stop reason. A model server the owner runs sees the key (it is sent the ``Authorization``
    header) and can echo it anywhere in its answer, which the run would post in the room and
    keep in the ledger (design §5). In the same strings, a lone surrogate becomes U+FFFD (the
    replacement character): stored as sent, it failed every write of the run (design §4: model
    output never crashes a run)."""
    scrub = scrubber(secret)

    def clean(text: str) -> str:
        return _SURROGATE.sub("\ufffd", scrub(text))

    return reply.model_copy(
        update={
            "text": clean(reply.text),
            "tool_calls": [
                ToolCall(
                    id=clean(c.id) if c.id else c.id,
                    name=clean(c.name),
                    input=scrub_value(c.input, clean) if c.input is not None else None,
                    raw_input=clean(c.raw_input),
                )
                for c in reply.tool_calls
            ],
            "request_id": clean(reply.request_id) if reply.request_id else reply.request_id,
            "stop_reason": clean(reply.stop_reason) if reply.stop_reason else reply.stop_reason,
        }
    )


def scrub_failure(failure: ProviderFailure, secret: str) -> ProviderFailure:
    """``failure`` with every form of ``secret`` removed from its text fields (the adapters build
    failures scrubbed already: this is the same rule applied where the failure is stored)."""
    clean = scrubber(secret)
    return failure.model_copy(
        update={
            name: clean(value)
            for name in ("error_type", "error_code", "message", "request_id", "body", "retry_after_header")
            if isinstance(value := getattr(failure, name), str)
        }
    )
