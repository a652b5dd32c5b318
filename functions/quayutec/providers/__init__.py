"""Model calls (design §2.3): provider adapters through the official SDKs, the failure
classifier and the retry decision. One module per provider kind (:mod:`.anthropic`,
:mod:`.openai` for ``openai`` and ``openai-compatible``, :mod:`.bedrock`), what they share in
:mod:`.base`, the kinds and :func:`call_model` in :mod:`.registry`.

Use::

    from quayutec.providers import ModelCall, call_model, decide_next, ProviderError

    try:
        reply = call_model(call)                # exactly one HTTP request
    except ProviderError as err:
        decision = decide_next(err.failure, requests_made, call.owner_base_url)
        # decision.retry / decision.wait_seconds (a Step Functions Wait) / decision.reason

* :func:`call_model` — one request, SDK retries off; raises :class:`ProviderError`.
* :mod:`quayutec.providers.call_policy` — the model-call policy: :data:`RULES`, the classifier
  table (provider markers -> category, retryable); :func:`decide_next`, at most 3 requests per
  call, ``retry-after`` up to 20 s (exact value), rounded up, otherwise 2 s then 8 s; an
  owner-supplied base URL gets one request (:func:`call_policy.request_cap`).
* :mod:`quayutec.providers.roles` — a ``bedrock`` agent's company role (docs/design.md §5): the
  ARN shape, the external id, the assumed-role sessions kept and refreshed across calls.
"""

from .bedrock import BEDROCK_END_USER_KEY
from .call_policy import MAX_REQUESTS, MAX_RETRY_AFTER_S, RULES, Rule, classify, decide_next, parse_retry_after
from .models import (
    ModelCall,
    ModelReply,
    ProviderError,
    ProviderFailure,
    ProviderKind,
    RetryDecision,
    ToolCall,
)
from .registry import REQUEST_ID_HEADERS, call_model, load_sdk

__all__ = [
    "BEDROCK_END_USER_KEY",
    "MAX_REQUESTS",
    "MAX_RETRY_AFTER_S",
    "REQUEST_ID_HEADERS",
    "RULES",
    "ModelCall",
    "ModelReply",
    "ProviderError",
    "ProviderFailure",
    "ProviderKind",
    "RetryDecision",
    "Rule",
    "ToolCall",
    "call_model",
    "classify",
    "decide_next",
    "load_sdk",
    "parse_retry_after",
]
