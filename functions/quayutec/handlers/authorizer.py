"""API Gateway Lambda authorizer (TOKEN type; identity source ``Authorization``): the bearer
token is looked up by its sha256 (design §5). A known token gets an Allow policy for the API's
methods and the context ``{company, member, admin}`` that the API handler trusts; anything else
raises ``Unauthorized`` (API Gateway answers 401).

The answer's ``usageIdentifierKey`` (the REST API's ``apiKeySource`` is ``AUTHORIZER``) is the
caller's company's API key, so the stage's usage plan throttles each company on its own
(docs/design.md §5); an operator, or a company created before companies had keys, gets the
shared key (``SHARED_API_KEY_ID``, its value read once per cold start). Without either (a stack
with no usage plan) the answer has no ``usageIdentifierKey``.

The policy covers every method of the stage (``{api}/{stage}/*``) so API Gateway's authorizer
cache (keyed by the token) serves any route; revoking a token takes effect within the cache TTL.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from quayutec.dal.api_keys import shared_key_value
from quayutec.dal.auth import Principal, TokenStore, bearer_token
from quayutec.deps import Deps, default_deps

logger = Logger()


class Unauthorized(Exception):
    """API Gateway turns exactly this message into 401 Unauthorized."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


def stage_wildcard(method_arn: str) -> str:
    """``arn:aws:execute-api:region:account:api/stage/METHOD/path`` -> ``.../api/stage/*``."""
    prefix, _, resource = method_arn.partition(":execute-api:")
    parts = resource.split("/")
    if not prefix or len(parts) < 2:
        return method_arn
    return f"{prefix}:execute-api:{parts[0]}/{parts[1]}/*"


def _token_of(event: dict[str, Any]) -> str | None:
    if event.get("type") == "REQUEST":  # a REQUEST authorizer gets the headers
        headers = {str(k).lower(): v for k, v in (event.get("headers") or {}).items()}
        return bearer_token(headers.get("authorization"))
    return bearer_token(event.get("authorizationToken"))


def usage_identifier_key(d: Deps, principal: Principal) -> str | None:
    """The API key value the usage plan throttles ``principal``'s requests by: its company's own
    key, else the shared one (operators; companies without a key yet), else ``None``."""
    if principal.company:
        own = d.room.company_api_key(principal.company)
        if own:
            return own
    shared = getattr(d.settings, "shared_api_key_id", None)
    return shared_key_value(shared) if shared else None


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext, deps: Deps | None = None) -> dict[str, Any]:
    token = _token_of(event if isinstance(event, dict) else {})
    if token is None:
        raise Unauthorized()
    d = deps or default_deps()
    principal = TokenStore(d.room.table).lookup(token)
    if principal is None:
        logger.debug("token refused")
        raise Unauthorized()
    logger.debug("token accepted", extra={"token_id": principal.token_id, "company": principal.company})
    key = usage_identifier_key(d, principal)
    return {
        **({"usageIdentifierKey": key} if key else {}),
        "principalId": f"{principal.company or '_admin'}/{principal.member}",
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Action": "execute-api:Invoke",
                    "Effect": "Allow",
                    "Resource": stage_wildcard(str(event.get("methodArn", ""))),
                }
            ],
        },
        "context": {
            "company": principal.company or "",
            "member": principal.member,
            "admin": "true" if principal.admin else "false",
            "token_id": principal.token_id,
        },
    }
