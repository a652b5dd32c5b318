"""The provider kinds and :func:`call_model`, their one entry point (docs/design.md §2, step 3).

Each kind's adapter is one module, sending one request through the provider's official SDK:

* ``anthropic``: :mod:`quayutec.providers.anthropic` (Anthropic Messages API);
* ``openai`` and ``openai-compatible`` (the same against the owner's ``base_url``):
  :mod:`quayutec.providers.openai` (OpenAI Chat Completions API);
* ``bedrock``: :mod:`quayutec.providers.bedrock` (Amazon Bedrock Runtime Converse API).

What they share is :mod:`quayutec.providers.base`. SDK retries are off (``max_retries=0``;
botocore ``total_max_attempts=1``): a call of :func:`call_model` is exactly one HTTP request, and
the retry policy is :mod:`quayutec.providers.call_policy` alone. SDKs are imported on first use
(:func:`load_sdk`), so importing this package stays cheap. Requests do not stream.
"""

from __future__ import annotations

from collections.abc import Callable

from quayutec.providers import anthropic, bedrock, openai
from quayutec.providers.base import raise_failure
from quayutec.providers.egress import AddressRefused, checked_address
from quayutec.providers.failures import build_failure
from quayutec.providers.keys import key_problem, scrub_reply
from quayutec.providers.models import ModelCall, ModelReply

#: The adapter of each provider kind.
ADAPTERS: dict[str, Callable[[ModelCall], ModelReply]] = {
    "anthropic": anthropic.call_anthropic,
    "openai": openai.call_openai,
    "openai-compatible": openai.call_openai,
    "bedrock": bedrock.call_bedrock,
}

#: Request-id response headers, per provider kind.
REQUEST_ID_HEADERS = {
    "anthropic": anthropic.REQUEST_ID_HEADER,
    "openai": openai.REQUEST_ID_HEADER,
    "openai-compatible": openai.REQUEST_ID_HEADER,
    "bedrock": bedrock.REQUEST_ID_HEADER,
}


#: The SDK module each provider kind's requests go through (Bedrock's is botocore, loaded already).
SDK_MODULES = {"anthropic": "anthropic", "openai": "openai", "openai-compatible": "openai"}


def load_sdk(provider: str) -> None:
    """Import the SDK ``provider``'s requests use (``anthropic``, ``openai``; nothing for
    ``bedrock``), once per process. The CallModel phase calls it before it measures the run's time
    left: a cold import takes about a second (seconds where no bytecode is shipped), which must not
    come out of the request's timeout after it was computed."""
    import importlib

    name = SDK_MODULES.get(provider)
    if name:
        importlib.import_module(name)


def call_model(call: ModelCall) -> ModelReply:
    """Send exactly one request for ``call`` and return the reply.

    Raises :class:`ProviderError` (``.failure`` classified, see
    :data:`quayutec.providers.call_policy.RULES`) for an error status, a timeout, a refused or
    dropped connection, or a 2xx body that cannot be read. The key never appears in the error.
    Raises ``ValueError`` (before any request) for a Bedrock endpoint that is plain HTTP to a
    non-loopback host: a key is never sent in clear. The reply is scrubbed of the key (a model
    server can echo the ``Authorization`` header in its text, tool calls or request id).
    """
    adapter = ADAPTERS[call.provider]
    problem = None if call.role_arn else key_problem(call.api_key.get_secret_value())
    if problem:  # nothing is sent: the HTTP client would refuse the header, quoting it
        raise_failure(
            call,
            build_failure(
                provider=call.provider,
                status=None,
                headers=None,
                body_text="",
                request_id=None,
                secret=call.api_key.get_secret_value(),
                error_type="invalid_key",
                error_code="InvalidKey",
                message=f"the stored key is not valid: {problem}",
            ),
        )
    if call.owner_base_url and call.base_url:
        try:
            checked_address(call.base_url, allow_loopback=call.allow_loopback)
        except AddressRefused as exc:
            raise_failure(
                call,
                build_failure(
                    provider=call.provider,
                    status=None,
                    headers=None,
                    body_text="",
                    request_id=None,
                    secret=call.api_key.get_secret_value(),
                    error_type="address_refused",
                    error_code="AddressRefused",
                    message=f"the owner's model address is refused: {exc}",
                ),
            )
    reply = scrub_reply(adapter(call), call.api_key.get_secret_value())
    _count_tokens(call, reply)
    return reply


def _count_tokens(call: ModelCall, reply: ModelReply) -> None:
    """The reply's usage fields join the running invocation's cost line (design §10); outside a
    run phase nothing counts. A failed request has no usage: nothing is counted for it."""
    from quayutec.cost import line as cost_line

    cost_line.count_tokens(call.provider, call.model, reply.input_tokens, reply.output_tokens)
