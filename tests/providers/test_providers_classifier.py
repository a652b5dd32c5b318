"""The classifier table (design §2.3): one case per row, plus the "never by status alone" cases."""

from __future__ import annotations

import pytest

from quayutec.providers import RULES, classify
from quayutec.providers.failures import build_failure, error_markers, truncate_body

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

# row name -> (provider, status, error type, error code, message, category, retryable)
ROW_CASES: dict[str, tuple] = {
    # A bedrock agent's company role (docs/design.md §5): STS AssumeRole's own errors.
    "sts-access-denied": (
        "bedrock",
        403,
        "AccessDenied",
        "AssumeRole",
        "User: arn:aws:sts::1:assumed-role/r/s is not authorized to perform: sts:AssumeRole",
        "role_denied",
        False,
    ),
    "sts-throttling": ("bedrock", 400, "Throttling", "AssumeRole", "Rate exceeded", "rate_limit", True),
    "sts-other-4xx": (
        "bedrock",
        400,
        "RegionDisabledException",
        "AssumeRole",
        "STS is not activated",
        "role_denied",
        False,
    ),
    "anthropic-credit-balance": (
        "anthropic",
        400,
        "invalid_request_error",
        None,
        "Your credit balance is too low to access the Anthropic API. "
        "Please go to Plans & Billing to upgrade or purchase credits.",
        "spend_limit",
        False,
    ),
    "anthropic-enforced-spend-limit": (
        "anthropic",
        429,
        "rate_limit_error",
        "enforced_spend_limit_reached",
        "You have reached your specified API usage limits.",
        "spend_limit",
        False,
    ),
    "anthropic-contract-spend-limit": (
        "anthropic",
        429,
        "rate_limit_error",
        "contract_spend_limit_reached",
        "The organization has reached the spend limit of its contract.",
        "spend_limit",
        False,
    ),
    "anthropic-billing-402": (
        "anthropic",
        402,
        "billing_error",
        "linked_organization_spend_limit_reached",
        "Payment required.",
        "spend_limit",
        False,
    ),
    "openai-insufficient-quota-type": (
        "openai",
        429,
        "insufficient_quota",
        None,
        "You exceeded your current quota, please check your plan and billing details.",
        "quota",
        False,
    ),
    "openai-insufficient-quota-code": (
        "openai-compatible",
        429,
        "invalid_request_error",
        "insufficient_quota",
        "You exceeded your current quota.",
        "quota",
        False,
    ),
    "openai-spend-limit-code": (
        "openai",
        429,
        "invalid_request_error",
        "credit_balance_exhausted",
        "Your credit balance is exhausted.",
        "spend_limit",
        False,
    ),
    "openai-request-too-large": (
        "openai",
        429,
        "tokens",
        "rate_limit_exceeded",
        "Request too large for gpt-4.1 in organization org-abc on tokens per min (TPM): Limit 30000, Requested 45000.",
        "request_too_large",
        False,
    ),
    "bedrock-daily-token-quota": (
        "bedrock",
        429,
        "ThrottlingException",
        None,
        "Too many tokens per day, please wait before trying again.",
        "quota",
        False,
    ),
    "bedrock-service-quota": (
        "bedrock",
        400,
        "ServiceQuotaExceededException",
        None,
        "Your request exceeds the service quota.",
        "quota",
        False,
    ),
    "openai-per-day-limit": (
        "openai",
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for gpt-4.1 in organization org-abc on requests per day (RPD): Limit 10000, Used 10000.",
        "quota",
        False,
    ),
    "anthropic-daily-rate-limit": (
        "anthropic",
        429,
        "rate_limit_error",
        None,
        "This request would exceed your organization's daily rate limit of 1,000,000 input tokens.",
        "quota",
        False,
    ),
    "bedrock-daily-quota-any-type": (
        "bedrock",
        400,
        "ServiceUnavailableException",
        None,
        "You have reached your daily token quota.",
        "quota",
        False,
    ),
    "error-in-2xx-overloaded": ("anthropic", 200, "overloaded_error", None, "Overloaded", "overloaded", True),
    "error-in-2xx-server-error": (
        "openai-compatible",
        200,
        "server_error",
        None,
        "internal error",
        "server_error",
        True,
    ),
    "error-in-2xx-rate-limit": ("anthropic", 200, "rate_limit_error", None, "slow down", "rate_limit", True),
    "error-in-2xx-timeout": ("bedrock", 200, "ModelTimeoutException", None, "timed out", "timeout", True),
    "error-in-2xx-auth": ("anthropic", 200, "authentication_error", None, "invalid x-api-key", "auth", False),
    "error-in-2xx-quota": ("openai", 200, "insufficient_quota", None, "quota", "quota", False),
    "error-in-2xx-not-found": ("anthropic", 200, "not_found_error", None, "model: x", "model_not_found", False),
    "error-in-2xx-invalid-request": ("openai", 200, "invalid_request_error", None, "bad", "bad_request", False),
    "bedrock-model-not-ready": (
        "bedrock",
        429,
        "ModelNotReadyException",
        None,
        "The model is not ready to serve requests.",
        "overloaded",
        True,
    ),
    "rate-limit": (
        "anthropic",
        429,
        "rate_limit_error",
        None,
        "Number of request tokens has exceeded your per-minute rate limit",
        "rate_limit",
        True,
    ),
    "overloaded-529": ("anthropic", 529, "overloaded_error", None, "Overloaded", "overloaded", True),
    "server-error-5xx": ("openai", 503, "server_error", None, "The server is overloaded", "server_error", True),
    "request-timeout-408": ("bedrock", 408, "ModelTimeoutException", None, "Model timed out.", "timeout", True),
    "no-request-invalid-key": (
        "openai",
        None,
        "invalid_key",
        "InvalidKey",
        "the stored key is not valid",
        "auth",
        False,
    ),
    "no-request-address-refused": (
        "openai-compatible",
        None,
        "address_refused",
        "AddressRefused",
        "the owner's model address is refused",
        "address_refused",
        False,
    ),
    "no-response-timeout": ("anthropic", None, "timeout", "APITimeoutError", "request timed out", "timeout", True),
    "no-response-connection": (
        "openai",
        None,
        "connection",
        "APIConnectionError",
        "connection refused",
        "connection",
        True,
    ),
    "key-rejected-401": ("anthropic", 401, "authentication_error", None, "invalid x-api-key", "auth", False),
    "forbidden-403": ("bedrock", 403, "AccessDeniedException", None, "not authorized", "auth", False),
    "unknown-model-404": ("anthropic", 404, "not_found_error", None, "model: claude-nope", "model_not_found", False),
    "bedrock-invalid-model-id": (
        "bedrock",
        400,
        "ValidationException",
        None,
        "The provided model identifier is invalid.",
        "model_not_found",
        False,
    ),
    "too-large-413": (
        "anthropic",
        413,
        "request_too_large",
        None,
        "Request exceeds the maximum allowed size",
        "request_too_large",
        False,
    ),
    "other-4xx": (
        "openai",
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "This model's maximum context length is 128000 tokens.",
        "bad_request",
        False,
    ),
    "unexpected-status": ("openai", 200, None, None, "reply could not be read", "unexpected", False),
}


def test_every_row_has_a_case_and_names_are_unique() -> None:
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    assert set(names) == set(ROW_CASES)


@pytest.mark.parametrize("row", list(ROW_CASES))
def test_row(row: str) -> None:
    provider, status, etype, ecode, message, category, retryable = ROW_CASES[row]
    rule = classify(provider, status, etype, ecode, message)
    assert rule.name == row
    assert (rule.category, rule.retryable) == (category, retryable)


@pytest.mark.parametrize(
    "case, expected",
    [
        # a 429 is a plain retryable rate limit unless a marker says otherwise
        (("anthropic", 429, "rate_limit_error", "ramp_limit_exceeded", "ramp limit"), ("rate_limit", True)),
        (
            (
                "openai",
                429,
                "requests",
                "rate_limit_exceeded",
                "Rate limit reached for gpt-4.1 in organization org-abc on requests per min (RPM): Limit 500.",
            ),
            ("rate_limit", True),
        ),
        (
            ("bedrock", 429, "ThrottlingException", None, "Too many tokens, please wait before trying again."),
            ("rate_limit", True),
        ),
        # the same message under another provider is not that provider's marker
        (("openai", 400, "invalid_request_error", None, "Your credit balance is too low"), ("bad_request", False)),
        (("anthropic", 429, "rate_limit_error", None, "Request too large"), ("rate_limit", True)),
        # a 5xx of any number is retryable, without any marker
        (("openai-compatible", 599, None, None, ""), ("server_error", True)),
        (("bedrock", 500, "InternalServerException", None, "internal"), ("server_error", True)),
        # markers are compared case-insensitively
        (("openai", 429, "INSUFFICIENT_QUOTA", None, "quota"), ("quota", False)),
        (("anthropic", 403, "permission_error", None, "no access"), ("auth", False)),
        (("anthropic", 422, None, None, "?"), ("bad_request", False)),
    ],
)
def test_markers_not_status_alone(case: tuple, expected: tuple) -> None:
    rule = classify(*case)
    assert (rule.category, rule.retryable) == expected


@pytest.mark.parametrize(
    "provider, status, etype, ecode, message",
    [
        # issue 10 finding 9: OpenAI's, Anthropic's and Bedrock's limits per day are used-up quotas
        (
            "openai",
            429,
            "tokens",
            "rate_limit_exceeded",
            "Rate limit reached for gpt-4o-mini in organization org-x on "
            "tokens per day (TPD): Limit 200000, Used 199000, Requested "
            "1500. Please try again in 7m34s.",
        ),
        ("openai-compatible", 429, "requests", None, "Rate limit reached on requests per day (RPD): Limit 200"),
        ("anthropic", 429, "rate_limit_error", None, "This request would exceed your daily rate limit."),
        ("bedrock", 429, "ThrottlingException", None, "Too many tokens per day, please wait before trying again."),
    ],
)
def test_a_limit_per_day_is_final(provider: str, status: int, etype: str, ecode: str | None, message: str) -> None:
    rule = classify(provider, status, etype, ecode, message)
    assert (rule.category, rule.retryable) == ("quota", False), rule.name


def test_an_error_object_inside_a_200_is_classified_by_its_type() -> None:
    body = '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    f = build_failure(
        provider="anthropic",
        status=200,
        headers={},
        body_text=body,
        request_id="r",
        secret="",
        message="reply could not be read",
    )
    assert (f.category, f.retryable, f.error_type) == ("overloaded", True, "overloaded_error")
    body = '{"error": {"message": "Invalid API key", "type": "invalid_request_error", "code": "invalid_api_key"}}'
    f = build_failure(
        provider="openai-compatible",
        status=200,
        headers={},
        body_text=body,
        request_id=None,
        secret="",
        message="reply could not be read",
    )
    assert (f.category, f.retryable) == ("bad_request", False)


def test_error_markers_of_each_body_shape() -> None:
    anthropic_body = (
        '{"type":"error","error":{"type":"rate_limit_error","message":"over",'
        '"details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_1"}'
    )
    assert error_markers("anthropic", anthropic_body) == ("rate_limit_error", "enforced_spend_limit_reached", "over")
    openai_body = '{"error":{"message":"quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}'
    assert error_markers("openai", openai_body) == ("insufficient_quota", "insufficient_quota", "quota")
    assert error_markers("openai", '{"error":{"message":"m","type":"t","code":429}}') == ("t", "429", "m")
    assert error_markers("bedrock", '{"__type":"com.amazon.coral#ThrottlingException","message":"slow"}') == (
        "ThrottlingException",
        None,
        "slow",
    )
    assert error_markers("openai-compatible", '{"error":"plain text error"}') == (None, None, "plain text error")
    for junk in ("<html><body>502 Bad Gateway</body></html>", "", "[1,2]", "null", "{", '"str"'):
        assert error_markers("anthropic", junk) == (None, None, None)


def test_build_failure_html_502_is_retryable_and_keeps_body() -> None:
    html = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
    f = build_failure(
        provider="anthropic",
        status=502,
        headers={"content-type": "text/html"},
        body_text=html,
        request_id=None,
        secret="sk-secret-key",
    )
    assert (f.category, f.retryable, f.status) == ("server_error", True, 502)
    assert f.body == html
    assert f.message.startswith("HTTP 502: 502 Bad Gateway")


def test_body_truncated_to_4_kib_without_splitting_characters() -> None:
    text = "é" * 5000  # 2 bytes each
    cut = truncate_body(text)
    assert len(cut.encode("utf-8")) == 4096
    assert cut == "é" * 2048
    f = build_failure(provider="openai", status=500, headers={}, body_text="x" * 10000, request_id=None, secret="")
    assert len(f.body) == 4096


def test_build_failure_scrubs_the_key_everywhere() -> None:
    key = "sk-ant-very-secret-0001"
    body = (
        f'{{"error":{{"message":"Incorrect API key provided: {key}","type":"invalid_request_error","code":"{key}"}}}}'
    )
    f = build_failure(provider="openai", status=401, headers={}, body_text=body, request_id="r", secret=key)
    assert key not in f.model_dump_json()
    assert "[redacted]" in f.message and "[redacted]" in f.body
    assert f.category == "auth" and not f.retryable
