"""The trust policies of companies' Bedrock roles, on the local stack (docs/design.md §5, §7).

moto's STS ``AssumeRole`` always succeeds and ignores ``ExternalId``: it knows no trust policy.
This stands in for them, and for STS's failures, where a test arms it (in-process only, like
:mod:`quaylab.faults`; nothing armed: moto answers as it does):

* :meth:`Trust.trust` — the role's trust policy requires that external id: an ``AssumeRole`` of
  that role with any other (or none) is answered ``403 AccessDenied``, as STS answers it ("User:
  ... is not authorized to perform: sts:AssumeRole on resource: ..."); a role never trusted is
  left to moto (it succeeds).
* :meth:`Trust.fail` — the next ``times`` ``AssumeRole`` calls are answered with that error code
  and HTTP status (``Throttling`` / 400 as STS throttles, ``AccessDenied`` / 403, ...).

The answer replaces the HTTP exchange (botocore's ``before-call`` event, registered on every
client the deployed package builds through the :mod:`quayutec.seams` client hook, installed while
anything is armed): the call is
still announced to the call recorder (so IAM checks it) and raises the ``ClientError`` botocore
makes of such an answer. :attr:`Trust.calls` keeps each ``AssumeRole``'s role, external id and
session name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from quayutec import seams


@dataclass
class Trust:
    """Armed trust policies and scripted STS failures (see the module docstring)."""

    external_ids: dict[str, str] = field(default_factory=dict)  # role ARN -> required external id
    failures: list[tuple[str, int, str]] = field(default_factory=list)  # (code, status, message)
    calls: list[dict[str, str]] = field(default_factory=list)  # RoleArn, ExternalId, RoleSessionName

    def trust(self, role_arn: str, external_id: str) -> None:
        self.external_ids[role_arn] = external_id

    def fail(self, code: str, status: int, message: str = "", times: int = 1) -> None:
        self.failures.extend([(code, status, message or f"injected {code}")] * times)

    def answer(self, body: dict[str, Any]) -> tuple[str, int, str] | None:
        """The error of this ``AssumeRole`` (its query parameters), or ``None`` (moto answers)."""
        arn = str(body.get("RoleArn", ""))
        self.calls.append(
            {k: str(body.get(k, "")) for k in ("RoleArn", "ExternalId", "RoleSessionName")},
        )
        if self.failures:
            return self.failures.pop(0)
        wanted = self.external_ids.get(arn)
        if wanted is not None and body.get("ExternalId") != wanted:
            return (
                "AccessDenied",
                403,
                f"User: arn:aws:sts::123456789012:assumed-role/CallModelRole/fn is not authorized to "
                f"perform: sts:AssumeRole on resource: {arn}",
            )
        return None


_ARMED: list[Trust] = []


@contextmanager
def armed(trust: Trust | None = None) -> Iterator[Trust]:
    """Arm ``trust`` (a new one by default) for the block; yields it. The STS hook
    (:data:`INSTRUMENTS`) is installed while anything is armed (clients built from then on carry
    it: the seam has the deployed package's cached clients rebuilt)."""
    t = trust or Trust()
    _ARMED.append(t)
    seams.install(INSTRUMENTS)
    try:
        yield t
    finally:
        _ARMED.remove(t)
        if not _ARMED:
            seams.uninstall(INSTRUMENTS)


def _before_call(params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]] | None:
    if not _ARMED:
        return None
    body = params.get("body")
    error = _ARMED[-1].answer(body if isinstance(body, dict) else {})
    if error is None:
        return None
    from botocore.awsrequest import AWSResponse

    code, status, message = error
    http = AWSResponse(params.get("url", ""), status, {}, None)
    parsed = {
        "Error": {"Type": "Sender", "Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RequestId": "local-sts-trust"},
    }
    return http, parsed


def _hook(client: Any) -> None:
    if client.meta.service_model.service_name == "sts":
        client.meta.events.register("before-call.sts.AssumeRole", _before_call, unique_id="quay-sts-trust")


#: The STS hook (:mod:`quayutec.seams`), installed by :func:`armed`.
INSTRUMENTS = seams.Instruments("sts trust", client=_hook)
