"""Bearer tokens of API callers (design §5), stored hashed (sha256) in the room table.

Item layout (pk / sk):

* ``TOKEN#{sha256 of the token}`` / ``META`` — who the token is: company, member (a person of
  the company), ``admin``; ``revoked`` once revoked. The token itself is never stored.
* ``COMPANY#{company}`` / ``TOKEN#{token_id}`` — the company's tokens, for listing and revoking
  (``token_id`` is the first 16 hex digits of the hash: it identifies, it cannot authenticate).
  Admin tokens are listed under ``COMPANY#_admin``.

The authorizer reads one item per request (a consistent ``GetItem`` on the hash); nothing here
ever compares plain tokens.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from botocore.exceptions import ClientError
from pydantic import BaseModel

from quayutec.dal import keys
from quayutec.dal.aws import dynamodb, is_condition_failure, paginate_query, transient_errors
from quayutec.models import now_iso

TOKEN_PREFIX = "qyt_"
ADMIN_BUCKET = "_admin"  # the pseudo-company admin tokens are listed under
_MAX_TOKEN_LEN = 512


class Principal(BaseModel):
    """Who a token authenticates: a person of a company, or an operator (``admin``)."""

    token_id: str
    company: str | None = None
    member: str
    admin: bool = False
    created_at: str = ""
    revoked: bool = False


class TokenInfo(BaseModel):
    """What may be shown about a token (never the token, never its full hash)."""

    token_id: str
    company: str | None = None
    member: str
    admin: bool = False
    created_at: str
    revoked: bool = False


def new_token() -> str:
    """A fresh bearer token (256 bits of randomness)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_id_of(digest: str) -> str:
    return digest[:16]


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, or ``None`` when the value
    is missing or not of that form."""
    if not header or len(header) > _MAX_TOKEN_LEN + 16:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


class TokenStore:
    """Issue, look up, list and revoke tokens. ``client``: a DynamoDB client taking Python values."""

    def __init__(self, table_name: str, client: Any | None = None) -> None:
        self.table = table_name
        self._client = client

    @property
    def db(self) -> Any:
        return self._client or dynamodb()

    def issue(
        self,
        company: str | None,
        member: str,
        *,
        admin: bool = False,
        token: str | None = None,
        audit: dict[str, Any] | None = None,
    ) -> tuple[str, Principal]:
        """Create a token for ``member`` of ``company`` (or an operator token with ``admin``).
        Returns the token (shown once) and its principal. ``token``: use this value (local dev
        stacks with a fixed operator token) instead of a fresh random one. ``audit``: an audit
        entry's ``Put`` written in the same transaction (:func:`quayutec.dal.audit.audit_put`)."""
        if token is not None and (
            len(token) < 16 or len(token) > _MAX_TOKEN_LEN or not token.isprintable() or " " in token
        ):
            raise ValueError("a token has 16 to 512 printable characters and no spaces")
        token = token or new_token()
        digest = token_hash(token)
        principal = Principal(
            token_id=token_id_of(digest), company=company, member=member, admin=admin, created_at=now_iso()
        )
        item = {
            **keys.token_key(digest),
            "type": "token",
            **principal.model_dump(mode="json", exclude_none=True),
        }
        index = {
            **keys.company_token_key(company or ADMIN_BUCKET, principal.token_id),
            "type": "company_token",
            "token_hash": digest,
            **principal.model_dump(mode="json", exclude_none=True),
        }
        with transient_errors():
            self.db.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": self.table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}},
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": index,
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    *([audit] if audit is not None else []),
                ]
            )
        return token, principal

    def lookup(self, token: str) -> Principal | None:
        """The principal of a valid (known, not revoked) token, else ``None``."""
        if not token or len(token) > _MAX_TOKEN_LEN or not token.isprintable():
            return None
        digest = token_hash(token)
        with transient_errors():
            item = self.db.get_item(TableName=self.table, Key=keys.token_key(digest), ConsistentRead=True).get("Item")
        if not item or item.get("revoked"):
            return None
        return Principal.model_validate({k: v for k, v in item.items() if k not in ("pk", "sk", "type")})

    def list(self, company: str | None) -> list[TokenInfo]:
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": keys.company_pk(company or ADMIN_BUCKET), ":p": keys.TOKEN_PREFIX},
        )
        return [TokenInfo.model_validate(i) for i in items]

    def revoke(self, company: str | None, token_id: str, audit: dict[str, Any] | None = None) -> bool:
        """Revoke a token of ``company`` by id (and write ``audit`` in the same transaction);
        ``False`` when there is no such token, or it was revoked already."""
        key = keys.company_token_key(company or ADMIN_BUCKET, token_id)
        with transient_errors():
            item = self.db.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
        if not item:
            return False
        if item.get("revoked"):
            return True  # revoked before: nothing to write, nothing to audit again
        try:
            with transient_errors():
                self.db.transact_write_items(
                    TransactItems=[
                        {
                            "Update": {
                                "TableName": self.table,
                                "Key": keys.token_key(item["token_hash"]),
                                "UpdateExpression": "SET revoked = :t",
                                "ConditionExpression": "attribute_exists(pk)",
                                "ExpressionAttributeValues": {":t": True},
                            }
                        },
                        {
                            "Update": {
                                "TableName": self.table,
                                "Key": key,
                                "UpdateExpression": "SET revoked = :t",
                                "ConditionExpression": "attribute_not_exists(revoked) OR revoked = :f",
                                "ExpressionAttributeValues": {":t": True, ":f": False},
                            }
                        },
                        *([audit] if audit is not None else []),
                    ]
                )
        except ClientError as exc:
            if is_condition_failure(exc) or exc.response["Error"]["Code"] == "TransactionCanceledException":
                with transient_errors():  # revoked meanwhile by another request, or gone
                    again = self.db.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
                return bool(again and again.get("revoked"))
            raise
        return True
