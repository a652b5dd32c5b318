"""A company's Bedrock role (docs/design.md §5): what its ARN may be, the external id the service
gives the company, and the assumed-role credentials CallModel signs Bedrock requests with.

* :func:`role_arn_problem` — why a text is not a role ARN the service assumes: only
  ``arn:<partition>:iam::<12-digit account>:role/quayutec-bedrock-<rest>`` (no path; the name at
  most 64 characters of ``[A-Za-z0-9+=,.@_-]``), the pattern CallModel's ``sts:AssumeRole`` is
  granted on (``quayutec.resources.BEDROCK_ROLE_ARN_PATTERN``).
* :func:`new_external_id` — a company's external id: ``quayutec-`` + 32 hex digits (128 random
  bits), generated once per company. It is not a secret (AWS IAM User Guide, "Access to AWS
  accounts owned by third parties"): it stops another company from naming this company's role
  (the confused deputy), since no company chooses the id the service sends for it.
* :func:`credentials` — botocore refreshable credentials of ``sts:AssumeRole`` (``ExternalId``
  the company's, ``RoleSessionName`` naming the agent, :data:`SESSION_SECONDS` long), kept per
  (role, external id, session) in a small LRU across warm invocations. botocore refreshes them
  before they expire (15 minutes before: advisory, 10 minutes: mandatory), so a kept session
  never signs a request with expired credentials.
* :func:`failure_from_sts` — an STS error as a classified :class:`ProviderFailure` (provider
  ``bedrock``, ``error_code`` ``AssumeRole``; see the ``sts-*`` rows of
  :data:`quayutec.providers.call_policy.RULES`): ``AccessDenied`` is final, throttling retryable.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections import OrderedDict
from typing import Any

from quayutec.resources import BEDROCK_ROLE_PREFIX

from .failures import build_failure
from .models import ProviderFailure

#: The STS operation named in a failure's ``error_code`` (the classifier's marker of STS errors).
ASSUME_ROLE = "AssumeRole"
#: How long an assumed-role session lasts, seconds: STS's default, and the most a session assumed
#: from another role's session may last (CallModel runs as its own role: role chaining).
SESSION_SECONDS = 3600
#: Sessions kept across warm invocations.
SESSION_CACHE_SIZE = 8

_NAME_CHARS = r"[A-Za-z0-9+=,.@_-]"
_ROLE_ARN = re.compile(
    rf"arn:(?P<partition>aws|aws-cn|aws-us-gov):iam::(?P<account>\d{{12}}):role/(?P<name>{_NAME_CHARS}{{1,64}})"
)
_EXTERNAL_ID = re.compile(r"quayutec-[0-9a-f]{32}")


def role_arn_problem(arn: str) -> str | None:
    """Why ``arn`` is not a Bedrock role ARN the service assumes, or ``None``. The text says the
    expected shape (``arn:aws:iam::<account>:role/quayutec-bedrock-<name>``)."""
    shape = f"arn:aws:iam::<12-digit account>:role/{BEDROCK_ROLE_PREFIX}<name>"
    match = _ROLE_ARN.fullmatch(arn)
    if match is None:
        if arn.startswith("arn:") and ":role/" in arn and "/" in arn.split(":role/", 1)[1]:
            return f"a role with a path is not assumed: give {shape}"
        return f"not an IAM role ARN: give {shape}"
    if not match["name"].startswith(BEDROCK_ROLE_PREFIX) or match["name"] == BEDROCK_ROLE_PREFIX:
        return (
            f"the role's name must start with {BEDROCK_ROLE_PREFIX!r} (the only roles the service may "
            f"assume): give {shape}"
        )
    return None


def new_external_id() -> str:
    """A new external id: ``quayutec-`` + 32 lowercase hex digits."""
    return f"quayutec-{secrets.token_hex(16)}"


def is_external_id(value: str) -> bool:
    """Whether ``value`` has the shape :func:`new_external_id` gives."""
    return _EXTERNAL_ID.fullmatch(value) is not None


def session_name(agent_id: str) -> str:
    """The ``RoleSessionName`` of an agent's session: ``quayutec-<agent id>``, characters outside
    ``[A-Za-z0-9+=,.@_-]`` as ``-``, at most 64 characters (STS's limits). It shows in the
    company's CloudTrail as the session that called Bedrock."""
    return re.sub(r"[^A-Za-z0-9+=,.@_-]", "-", f"quayutec-{agent_id}")[:64]


# --------------------------------------------------------------------------- sessions
_SESSIONS: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
_SESSIONS_LOCK = threading.Lock()


def credentials(role_arn: str, external_id: str, session: str) -> Any:
    """The kept ``botocore.credentials.RefreshableCredentials`` of the role's session, made on a
    miss (nothing is fetched until first used: ``get_frozen_credentials()`` makes the
    ``AssumeRole`` call, and raises its ``botocore.exceptions.ClientError``)."""
    key = (role_arn, external_id, session)
    with _SESSIONS_LOCK:
        creds = _SESSIONS.get(key)
        if creds is not None:
            _SESSIONS.move_to_end(key)
            return creds
    from botocore.credentials import DeferredRefreshableCredentials

    def fetch() -> dict[str, str]:
        from quayutec.dal import aws

        answer = aws.client("sts").assume_role(
            RoleArn=role_arn, RoleSessionName=session, ExternalId=external_id, DurationSeconds=SESSION_SECONDS
        )
        c = answer["Credentials"]
        return {
            "access_key": c["AccessKeyId"],
            "secret_key": c["SecretAccessKey"],
            "token": c["SessionToken"],
            "expiry_time": c["Expiration"].isoformat() if hasattr(c["Expiration"], "isoformat") else c["Expiration"],
        }

    creds = DeferredRefreshableCredentials(refresh_using=fetch, method="quayutec-assume-role")
    with _SESSIONS_LOCK:
        creds = _SESSIONS.setdefault(key, creds)
        _SESSIONS.move_to_end(key)
        while len(_SESSIONS) > SESSION_CACHE_SIZE:
            _SESSIONS.popitem(last=False)
    return creds


def clear_sessions() -> None:
    """Forget the kept sessions (tests)."""
    with _SESSIONS_LOCK:
        _SESSIONS.clear()


def failure_from_sts(exc: Any, role_arn: str) -> ProviderFailure:
    """A botocore ``ClientError`` of ``AssumeRole`` as a classified failure: ``status`` STS's
    HTTP status, ``error_type`` its error code (``AccessDenied``, ``Throttling``, ...),
    ``error_code`` ``AssumeRole``; the message names the role and says what to check."""
    response = exc.response if isinstance(getattr(exc, "response", None), dict) else {}
    err = response.get("Error", {})
    meta = response.get("ResponseMetadata", {})
    code = err.get("Code") or None
    text = err.get("Message") or ""
    hint = ""
    if code == "AccessDenied":
        hint = (
            ": the role's trust policy must let the service's account assume it with the company's "
            "external id (sts:ExternalId), see GET /agents/{agent}"
        )
    return build_failure(
        provider="bedrock",
        status=meta.get("HTTPStatusCode"),
        headers=meta.get("HTTPHeaders") or {},
        body_text="",
        request_id=meta.get("RequestId"),
        secret="",
        error_type=code,
        error_code=ASSUME_ROLE,
        message=f"assuming the company's role {role_arn} failed ({code}){hint}" + (f": {text}" if text else ""),
    )
