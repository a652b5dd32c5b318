"""Companies' API Gateway API keys: each company's throttle identity (docs/design.md §5).

The REST API takes its API keys from the authorizer (``apiKeySource: AUTHORIZER``): the
authorizer answers the caller's company's key value as ``usageIdentifierKey``, and the stage's
one usage plan throttles each key on its own. A key authenticates nothing (the bearer token
does), and is never shown to callers.

* :meth:`ApiKeys.ensure` gives a company its key: found by its name
  (:func:`quayutec.resources.company_api_key_name`) or created, then put in the usage plan. Each
  step is safe to repeat, so a company creation retried after a crash between the key and the
  company item reuses the key it made (GetApiKeys by name), never makes a second one.
* :func:`shared_key_value` is the value of the key operators and companies created before their
  own keys share (read once per process: GetApiKey with its value).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from quayutec import resources as r
from quayutec.dal import aws
from quayutec.errors import Misconfigured


@dataclass(frozen=True)
class ApiKey:
    """An API key: its id (API Gateway's) and value (what the authorizer answers)."""

    id: str
    value: str


class ApiKeys:
    """A stage's company keys in its usage plan ``usage_plan`` (a name). ``client``: an API
    Gateway client (default: the factory's)."""

    def __init__(self, stage: str, usage_plan: str, client: Any | None = None) -> None:
        self.stage = stage
        self.usage_plan = usage_plan
        self._client = client
        self._plan_id: str | None = None

    @property
    def api(self) -> Any:
        return self._client or aws.client("apigateway")

    def plan_id(self) -> str:
        """The usage plan's id, found by its name once (GetUsagePlans). Raises Misconfigured
        when the stage has no such plan (the deployment's fault, not the caller's)."""
        if self._plan_id is None:
            found = []
            with aws.transient_errors():
                for page in self.api.get_paginator("get_usage_plans").paginate():
                    found += [p["id"] for p in page.get("items", []) if p.get("name") == self.usage_plan]
            if not found:
                raise Misconfigured(
                    [r.USAGE_PLAN_NAME_ENV], [f"{r.USAGE_PLAN_NAME_ENV} (no usage plan {self.usage_plan!r})"]
                )
            self._plan_id = sorted(found)[0]
        return self._plan_id

    def find(self, company: str) -> ApiKey | None:
        """The company's key, by its exact name (``nameQuery`` matches a prefix), the oldest of
        several (two creations raced); ``None`` when it has none."""
        name = r.company_api_key_name(self.stage, company)
        keys: list[dict[str, Any]] = []
        with aws.transient_errors():
            for page in self.api.get_paginator("get_api_keys").paginate(nameQuery=name, includeValues=True):
                keys += [k for k in page.get("items", []) if k.get("name") == name and k.get("value")]
        if not keys:
            return None
        first = min(keys, key=lambda k: (str(k.get("createdDate", "")), k["id"]))
        return ApiKey(id=first["id"], value=first["value"])

    def ensure(self, company: str) -> ApiKey:
        """The company's key, made if it has none, in the usage plan (a key already there is
        fine). Idempotent: repeat it after any failure. Raises TransientError on throttling,
        Misconfigured without the usage plan."""
        plan = self.plan_id()
        key = self.find(company)
        if key is None:
            with aws.transient_errors():
                made = self.api.create_api_key(
                    name=r.company_api_key_name(self.stage, company),
                    description=f"quayutec {self.stage}: company {company}'s throttle (docs/design.md §5)",
                    enabled=True,
                )
            key = ApiKey(id=made["id"], value=made["value"])
        try:
            with aws.transient_errors():
                self.api.create_usage_plan_key(usagePlanId=plan, keyId=key.id, keyType="API_KEY")
        except ClientError as exc:
            if aws.error_code(exc) != "ConflictException":  # in the plan already: a repeat
                raise
        return key


_SHARED: dict[str, str] = {}
_SHARED_LOCK = threading.Lock()


def shared_key_value(key_id: str, client: Any | None = None) -> str:
    """The value of the shared key ``key_id``: GetApiKey(includeValue) on first use, then from
    this process's cache (the value never changes; a cold start reads it again)."""
    with _SHARED_LOCK:
        if key_id in _SHARED:
            return _SHARED[key_id]
    with aws.transient_errors():
        value = str((client or aws.client("apigateway")).get_api_key(apiKey=key_id, includeValue=True)["value"])
    with _SHARED_LOCK:
        return _SHARED.setdefault(key_id, value)


def forget_shared_keys() -> None:
    """Drop the cached shared key values (tests, the local stack after a restart)."""
    with _SHARED_LOCK:
        _SHARED.clear()
