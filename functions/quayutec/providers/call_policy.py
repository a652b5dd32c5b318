"""The model-call policy (docs/design.md §2, step 3): how a failed request is classified, and
whether another request follows it, after how long.

* :data:`RULES` — the classifier, one table read top to bottom: the first row whose every set
  column matches the failure wins (:func:`classify`). Columns: provider kind(s), HTTP status
  range, the provider's error type, error code and a message pattern. A failure is classified by
  the provider's own markers, never by its status alone (a 429 can be final, a 400 can be a
  spending limit). Sources of the markers: Anthropic API reference "Errors" (error types,
  ``error.details.error_code``), OpenAI API reference "Error codes" (``error.type`` /
  ``error.code``), Amazon Bedrock Runtime API reference "Converse" (exception names, sent as
  ``x-amzn-ErrorType``), AWS STS API reference "AssumeRole" and "Common Errors"
  (``AccessDenied``, ``Throttling``).
* :func:`request_cap` — at most :data:`MAX_REQUESTS` requests per call, one for an owner's own
  model address.
* :func:`decide_next` — another request or not, and the wait before it: the provider's
  ``retry-after`` (:func:`parse_retry_after`) up to :data:`MAX_RETRY_AFTER_S`, else 2 s then 8 s.
* :func:`within_time_left` — a wait (or a request cut short by the run's time left) that the
  run's time limit does not leave room for ends the run as timed out.

The CallModel phase (:mod:`quayutec.logic.phases.call_model`) applies it: it records each
request, calls the adapter and stores the outcome. Pure functions: nothing here talks to the
network or stores anything.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from .models import ProviderFailure, RetryDecision

ALL = frozenset({"anthropic", "openai", "openai-compatible", "bedrock"})
ANTHROPIC = frozenset({"anthropic"})
OPENAI = frozenset({"openai", "openai-compatible"})
BEDROCK = frozenset({"bedrock"})

#: ``error_type`` given to failures that got no HTTP response.
TIMEOUT = "timeout"
CONNECTION = "connection"

#: docs/design.md §2 step 3: requests per call, the longest ``retry-after`` waited for (seconds).
MAX_REQUESTS = 3
#: Requests of a call to an owner's own model address (``base_url``): no retry.
OWNER_URL_REQUESTS = 1
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


# --------------------------------------------------------------------------- the cap, the time left
def request_cap(owner_base_url: bool) -> int:
    """How many requests one model call may make: :data:`MAX_REQUESTS`, or
    :data:`OWNER_URL_REQUESTS` when the agent's owner supplied the base URL (docs/design.md §2)."""
    return OWNER_URL_REQUESTS if owner_base_url else MAX_REQUESTS


def within_time_left(
    failure: ProviderFailure,
    decision: RetryDecision,
    *,
    time_left_s: float,
    timeout_s: float,
    full_timeout_s: float,
) -> str | None:
    """Why the run's time limit ends the call after ``failure``, or ``None`` when it does not.

    ``time_left_s``: the run's active time left now (seconds). ``timeout_s``: the client timeout
    the request was sent with; ``full_timeout_s``: the configured one (``MODEL_TIMEOUT_SECONDS``).
    A request that timed out after a timeout shortened to the run's time left means the limit is
    reached; a wait as long as the time left or longer is not waited for. The run ends as timed
    out with this reason (docs/design.md §2, §3)."""
    if failure.status is None and failure.category == "timeout" and timeout_s < full_timeout_s:
        return f"no reply within {timeout_s:.1f} s, the run's time left: the time limit is reached"
    if decision.retry and decision.wait_seconds is not None and decision.wait_seconds >= time_left_s:
        return f"{decision.reason}, but only {max(0.0, time_left_s):.1f} s of the run's time are left: not waited for"
    return None
