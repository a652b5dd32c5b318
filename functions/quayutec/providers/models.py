"""Data shapes of one model call (design §2.3): the request, the reply, the failure, the decision.

All durations are in **seconds**. Nothing here holds or prints a provider key in clear text:
``ModelCall.api_key`` is a :class:`pydantic.SecretStr`, and :class:`ProviderError` is built only
from a :class:`ProviderFailure`, whose text fields are scrubbed of the key by the adapters.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from quayutec.tokens import REPLY_MAX_TOKENS

ProviderKind = Literal["anthropic", "openai", "openai-compatible", "bedrock"]

#: Most bytes of a provider's original error body kept in a failure (and so in the ledger).
MAX_ERROR_BODY_BYTES = 4096


class ModelCall(BaseModel):
    """One request to a model provider: what :func:`quayutec.providers.call_model` sends.

    * ``provider`` / ``model``: the agent's provider kind and model id (design §2.3).
    * ``system``: the system prompt; ``user_text``: the single user turn (the assembled room
      context).
    * ``end_user_id``: the agent id. Sent as Anthropic ``metadata.user_id``, OpenAI ``user``,
      Bedrock ``requestMetadata["end_user_id"]``; the local provider server identifies the
      agent by it.
    * ``api_key``: the agent's company key (Anthropic/OpenAI key, or a Bedrock API key used as
      a bearer token). Never logged, never in an exception's text. Empty when ``role_arn`` is set.
    * ``role_arn`` / ``external_id`` / ``role_session``: a ``bedrock`` agent's company role
      (docs/design.md §5): the request is SigV4-signed with the credentials of ``sts:AssumeRole``
      of that role, with that ``ExternalId`` and ``RoleSessionName`` (see
      :mod:`quayutec.providers.roles`), in place of a key. All three or none; ``bedrock`` only.
    * ``base_url``: endpoint override (an operator's or the local server's), or the owner's own
      address for ``openai-compatible`` (required there). ``owner_base_url`` is True when the
      agent's owner supplied it: the call then gets one request (see ``decide_next``).
    * ``timeout_s``: client timeout of this request, seconds (connect and read).
    * ``max_tokens``: the reply's token cap.
    """

    model_config = ConfigDict(frozen=True)

    provider: ProviderKind
    model: str = Field(min_length=1)
    system: str
    user_text: str
    end_user_id: str
    api_key: SecretStr = SecretStr("")
    role_arn: str | None = None
    external_id: str | None = None
    role_session: str | None = None
    base_url: str | None = None
    owner_base_url: bool = False
    #: The deps' ``allow_loopback_model_urls`` (the local engine's only): an owner's address may be
    #: a loopback one.
    allow_loopback: bool = False
    timeout_s: float = Field(gt=0)
    max_tokens: int = Field(default=REPLY_MAX_TOKENS, gt=0)

    @model_validator(mode="after")
    def _compatible_needs_url(self) -> ModelCall:
        if self.provider == "openai-compatible" and not self.base_url:
            raise ValueError("provider 'openai-compatible' needs the owner's base_url")
        role = (self.role_arn, self.external_id, self.role_session)
        if any(role) and not all(role):
            raise ValueError("role_arn, external_id and role_session go together")
        if self.role_arn and self.provider != "bedrock":
            raise ValueError("only a 'bedrock' agent runs under a role")
        return self


class ToolCall(BaseModel):
    """One declared action of a reply: an Anthropic ``tool_use`` block, an OpenAI
    ``tool_calls`` entry or a Bedrock ``toolUse`` block (design §4).

    ``input`` is the parsed arguments when they are a JSON object, else ``None`` (the action is
    then denied as malformed downstream); ``raw_input`` is the arguments as received (JSON text).
    """

    id: str | None
    name: str
    input: dict | None
    raw_input: str


class ModelReply(BaseModel):
    """A successful model response: its text (text blocks joined in order), its tool calls in
    order, the provider's request id (``request-id`` / ``x-request-id`` / ``x-amzn-requestid``),
    the HTTP status and the provider's stop reason (``stop_reason`` / ``finish_reason`` /
    ``stopReason``). ``input_tokens`` / ``output_tokens``: the provider's usage fields
    (Anthropic ``usage.input_tokens`` / ``output_tokens``, OpenAI ``usage.prompt_tokens`` /
    ``completion_tokens``, Bedrock ``usage.inputTokens`` / ``outputTokens``); ``None`` when the
    reply carried none (never guessed)."""

    text: str
    tool_calls: list[ToolCall]
    request_id: str | None
    status: int = 200
    stop_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


class ProviderFailure(BaseModel):
    """A failed request, classified by the provider's own markers (design §2.3).

    * ``status``: HTTP status; ``None`` when no response came (timeout, refused/dropped
      connection).
    * ``error_type`` / ``error_code``: the provider's markers (e.g. ``rate_limit_error`` /
      ``enforced_spend_limit_reached``; ``insufficient_quota``; ``ThrottlingException``). For a
      failure without a response, ``error_type`` is ``"timeout"`` or ``"connection"`` and
      ``error_code`` names the client exception (e.g. ``APITimeoutError``).
    * ``category`` / ``retryable``: the verdict of the classifier table
      (:data:`quayutec.providers.call_policy.RULES`).
    * ``retry_after_s``: the wait the provider named, exact, in seconds (``retry-after-ms`` wins
      over ``retry-after``; an HTTP date in the past is 0); ``retry_after_header`` says where it
      came from, e.g. ``"retry-after: 1.5"``.
    * ``body``: the provider's original error body, at most 4 KiB (UTF-8 bytes).
    """

    status: int | None
    error_type: str | None
    error_code: str | None
    message: str
    request_id: str | None
    category: str
    retryable: bool
    retry_after_s: float | None
    retry_after_header: str | None
    body: str


class ProviderError(Exception):
    """Raised by :func:`call_model` when the request failed; ``.failure`` says how.

    ``str()`` is built from the (key-scrubbed) failure only, never from the SDK's exception,
    and the SDK exception is not chained, so the key cannot reach a log through it.
    """

    def __init__(self, failure: ProviderFailure, provider: str | None = None) -> None:
        self.failure = failure
        self.provider = provider
        status = failure.status if failure.status is not None else "no response"
        kind = "retryable" if failure.retryable else "final"
        who = f"{provider} " if provider else ""
        super().__init__(f"{who}model request failed ({status}, {failure.category}, {kind}): {failure.message}")

    def __reduce__(self) -> tuple:
        return (type(self), (self.failure, self.provider))


class RetryDecision(BaseModel):
    """What to do after a failed request (design §2.3).

    ``retry``: make another request. ``wait_seconds``: whole seconds for the Step Functions
    ``Wait`` before it (the exact wait rounded up), set only when ``retry``. ``reason``: human
    text for the ledger.
    """

    retry: bool
    wait_seconds: int | None
    reason: str
