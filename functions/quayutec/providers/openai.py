"""The ``openai`` and ``openai-compatible`` adapter: one request through the official SDK,
``openai.OpenAI(...).chat.completions.create`` (OpenAI Chat Completions API,
``POST /v1/chat/completions``), non-streaming, SDK retries off; ``openai-compatible`` is the same
against the owner's ``base_url`` (docs/design.md §2, step 3). The SDK is imported on first use
(``import openai`` here is the SDK: imports are absolute).
"""

from __future__ import annotations

from typing import Any

from quayutec.providers._httpsdk import failure_from_response, failure_from_sdk_error
from quayutec.providers.base import raise_failure, sdk_client, sdk_kwargs, token_count, tool_call
from quayutec.providers.models import ModelCall, ModelReply, ToolCall
from quayutec.tools import TOOL_SPECS

#: The response header carrying the request id (OpenAI's, and most compatible servers').
REQUEST_ID_HEADER = "x-request-id"


def call_openai(call: ModelCall) -> ModelReply:
    """OpenAI Chat Completions (``POST /v1/chat/completions``), non-streaming, with function
    tools; for ``openai-compatible`` the same against the owner's base URL."""
    import openai

    key = call.api_key.get_secret_value()
    kwargs = sdk_kwargs(call, key)
    params: dict[str, Any] = {
        "model": call.model,
        "messages": [
            {"role": "system", "content": call.system},
            {"role": "user", "content": call.user_text},
        ],
        "tools": [
            {
                "type": "function",
                "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]},
            }
            for t in TOOL_SPECS
        ],
        "user": call.end_user_id,
        "timeout": call.timeout_s,
    }
    # OpenAI's own API wants max_completion_tokens (max_tokens is deprecated and refused by
    # reasoning models); OpenAI-compatible servers commonly know only max_tokens.
    params["max_completion_tokens" if call.provider == "openai" else "max_tokens"] = call.max_tokens
    failure = None
    with sdk_client(call, openai.OpenAI, kwargs, key) as client:
        try:
            raw = client.chat.completions.with_raw_response.create(**params)
        except openai.APIError as exc:
            failure = failure_from_sdk_error(call.provider, openai, exc, key, REQUEST_ID_HEADER)
            if failure is None:
                raise
        if failure is not None:
            raise_failure(call, failure)
        try:
            completion = raw.parse()
            if not completion.choices:  # e.g. a compatible server's {"error": ...} sent with 200
                raise ValueError("reply has no choices")
            choice = completion.choices[0]
            msg = choice.message
            text = msg.content or ""
            tools: list[ToolCall] = []
            for tc in msg.tool_calls or []:
                if getattr(tc, "type", None) == "function":
                    tools.append(tool_call(tc.id, tc.function.name, tc.function.arguments or ""))
                elif getattr(tc, "type", None) == "custom":
                    tools.append(tool_call(tc.id, tc.custom.name, tc.custom.input or ""))
            stop = choice.finish_reason
            # Chat Completions' usage names; a compatible server may use the Responses API's.
            usage = getattr(completion, "usage", None)
            tokens_in = token_count(getattr(usage, "prompt_tokens", None))
            tokens_out = token_count(getattr(usage, "completion_tokens", None))
            if tokens_in is None and tokens_out is None:
                tokens_in = token_count(getattr(usage, "input_tokens", None))
                tokens_out = token_count(getattr(usage, "output_tokens", None))
        except Exception:  # noqa: BLE001 - a 2xx we cannot read, however the SDK fails on it, is classified
            failure = failure_from_response(
                call.provider, raw.http_response, key, REQUEST_ID_HEADER, message="reply could not be read"
            )
        if failure is not None:
            raise_failure(call, failure)
    return ModelReply(
        text=text,
        tool_calls=tools,
        request_id=raw.headers.get(REQUEST_ID_HEADER) or getattr(completion, "_request_id", None),
        status=raw.status_code,
        stop_reason=stop,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
    )
