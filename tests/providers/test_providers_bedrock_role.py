"""A bedrock agent under its company's role (docs/design.md §5): the adapter assumes the role through
STS (moto's, with the trust policies and STS failures of :mod:`quaylab.sts_trust` where armed),
signs Converse with the session's credentials (SigV4, no key), keeps the session across calls and
refreshes it before it expires; STS failures are classified (AccessDenied final, throttling
retryable), and role ARNs are checked for the one shape the service assumes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from moto import mock_aws

from quaylab import sts_trust
from quaylocal.provider_server import ProviderServer
from quayutec.dal import aws
from quayutec.providers import ModelCall, ProviderError, base, call_model, decide_next, roles
from quayutec.providers.call_policy import classify

ROLE = "arn:aws:iam::210987654321:role/quayutec-bedrock-acme"
EXTERNAL_ID = "quayutec-" + "ab" * 16


@pytest.fixture(autouse=True)
def sts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    base.clear_clients()
    aws.reset_clients()
    with mock_aws():
        yield
    base.clear_clients()
    aws.reset_clients()


@pytest.fixture
def role_call(make_call: Callable[..., ModelCall]) -> Callable[..., ModelCall]:
    def factory(agent_id: str = "acme.c1", **overrides: Any) -> ModelCall:
        fields: dict[str, Any] = {
            "api_key": "",
            "role_arn": ROLE,
            "external_id": EXTERNAL_ID,
            "role_session": roles.session_name(agent_id),
        }
        fields.update(overrides)
        return make_call("bedrock", agent_id, **fields)

    return factory


def test_the_role_is_assumed_with_the_external_id_and_converse_is_signed_with_its_session(
    server: ProviderServer, role_call: Callable[..., ModelCall]
) -> None:
    server.set_script("acme.c1", [{"reply": {"text": "from the company's account"}}])
    with sts_trust.armed() as trust:
        trust.trust(ROLE, EXTERNAL_ID)
        reply = call_model(role_call())
    assert reply.text == "from the company's account"
    assert trust.calls == [{"RoleArn": ROLE, "ExternalId": EXTERNAL_ID, "RoleSessionName": "quayutec-acme.c1"}]
    [sent] = server.requests
    assert sent.signed_by and sent.signed_by.startswith("ASIA")  # an assumed role's key, not "testing"


def test_the_session_is_kept_across_calls_and_refreshed_before_it_expires(
    server: ProviderServer, role_call: Callable[..., ModelCall]
) -> None:
    with sts_trust.armed() as trust:
        for i in range(3):
            server.set_script("acme.c1", [{"reply": {"text": f"ok {i}"}}])
            assert call_model(role_call()).text == f"ok {i}"
        assert len(trust.calls) == 1  # one AssumeRole for three requests: the session is kept
        [creds] = roles._SESSIONS.values()
        # 5 minutes from expiry (botocore refreshes from 15 minutes before, must from 10): the next
        # request gets a new session, never a request signed with credentials about to expire.
        creds._expiry_time = datetime.now(UTC) + timedelta(minutes=5)
        server.set_script("acme.c1", [{"reply": {"text": "refreshed"}}])
        assert call_model(role_call()).text == "refreshed"
        assert len(trust.calls) == 2
    keys = {r.signed_by for r in server.requests}
    assert len(keys) == 2 and all(k and k.startswith("ASIA") for k in keys)


def test_another_agent_gets_its_own_session(server: ProviderServer, role_call: Callable[..., ModelCall]) -> None:
    with sts_trust.armed() as trust:
        call_model(role_call("acme.c1"))
        call_model(role_call("acme.c2"))
    assert [c["RoleSessionName"] for c in trust.calls] == ["quayutec-acme.c1", "quayutec-acme.c2"]
    assert "testing" not in repr(list(base._CLIENTS))


def test_a_trust_policy_without_this_external_id_is_a_final_role_denied(
    server: ProviderServer, role_call: Callable[..., ModelCall]
) -> None:
    with sts_trust.armed() as trust:
        trust.trust(ROLE, "quayutec-" + "cd" * 16)  # the role trusts another company's id
        with pytest.raises(ProviderError) as info:
            call_model(role_call())
    f = info.value.failure
    assert (f.status, f.error_type, f.error_code, f.category, f.retryable) == (
        403,
        "AccessDenied",
        "AssumeRole",
        "role_denied",
        False,
    )
    assert ROLE in f.message and "sts:ExternalId" in f.message
    assert not server.requests  # no model request without the role
    assert decide_next(f, 1, False).retry is False


@pytest.mark.parametrize("code", ["Throttling", "ThrottlingException", "RequestLimitExceeded"])
def test_sts_throttling_is_retryable_then_the_call_goes_through(
    code: str, server: ProviderServer, role_call: Callable[..., ModelCall]
) -> None:
    with sts_trust.armed() as trust:
        trust.fail(code, 400, "Rate exceeded")
        with pytest.raises(ProviderError) as info:
            call_model(role_call())
        f = info.value.failure
        assert (f.category, f.retryable, f.error_code) == ("rate_limit", True, "AssumeRole")
        decision = decide_next(f, 1, False)
        assert decision.retry and decision.wait_seconds == 2
        server.set_script("acme.c1", [{"reply": {"text": "second try"}}])
        assert call_model(role_call()).text == "second try"  # a failed fetch keeps no session
    assert len(trust.calls) == 2


def test_other_sts_refusals_are_final_and_its_5xx_retryable() -> None:
    assert classify("bedrock", 400, "RegionDisabledException", "AssumeRole", "").category == "role_denied"
    assert classify("bedrock", 403, "AccessDenied", "AssumeRole", "").retryable is False
    rule = classify("bedrock", 503, "ServiceUnavailable", "AssumeRole", "")
    assert rule.retryable is True
    # Bedrock's own throttling is unchanged by the STS rows.
    assert classify("bedrock", 429, "ThrottlingException", None, "").category == "rate_limit"


def test_a_role_session_token_is_never_sent_in_clear(role_call: Callable[..., ModelCall]) -> None:
    with pytest.raises(ValueError, match="HTTPS"):
        call_model(role_call(base_url="http://bedrock.example.com"))


def test_the_role_fields_go_together_and_only_for_bedrock(make_call: Callable[..., ModelCall]) -> None:
    with pytest.raises(ValueError, match="together"):
        make_call("bedrock", role_arn=ROLE)
    with pytest.raises(ValueError, match="bedrock"):
        make_call("anthropic", role_arn=ROLE, external_id=EXTERNAL_ID, role_session="s1")


@pytest.mark.parametrize(
    ("arn", "says"),
    [
        ("arn:aws:iam::210987654321:role/quayutec-bedrock-acme", None),
        ("arn:aws-cn:iam::210987654321:role/quayutec-bedrock-a.b@c", None),
        ("arn:aws:iam::210987654321:role/admin", "must start with 'quayutec-bedrock-'"),
        ("arn:aws:iam::210987654321:role/quayutec-bedrock-", "must start with"),
        ("arn:aws:iam::210987654321:role/team/quayutec-bedrock-acme", "path"),
        ("arn:aws:iam::21098765432:role/quayutec-bedrock-acme", "not an IAM role ARN"),
        ("arn:aws:iam::210987654321:user/quayutec-bedrock-acme", "not an IAM role ARN"),
        ("arn:aws:sts::210987654321:assumed-role/quayutec-bedrock-acme/s", "not an IAM role ARN"),
        ("quayutec-bedrock-acme", "not an IAM role ARN"),
        ("arn:aws:iam::210987654321:role/quayutec-bedrock-" + "x" * 48, "not an IAM role ARN"),
        ("arn:aws:iam::210987654321:role/quayutec-bedrock-acme\n", "not an IAM role ARN"),
    ],
)
def test_role_arn_shapes(arn: str, says: str | None) -> None:
    problem = roles.role_arn_problem(arn)
    assert (problem is None) if says is None else (problem is not None and says in problem), problem


def test_external_ids_and_session_names() -> None:
    a, b = roles.new_external_id(), roles.new_external_id()
    assert a != b and roles.is_external_id(a) and len(a) == len("quayutec-") + 32
    assert roles.session_name("acme.c1") == "quayutec-acme.c1"
    assert len(roles.session_name("x" * 200)) == 64
