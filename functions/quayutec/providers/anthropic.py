"""The ``anthropic`` adapter: one request through the official SDK,
``anthropic.Anthropic(...).messages.create`` (Anthropic Messages API, ``POST /v1/messages``),
non-streaming, SDK retries off (docs/design.md §2, step 3). The SDK is imported on first use
(``import anthropic`` here is the SDK: imports are absolute).
"""

from __future__ import annotations

from quayutec.providers._httpsdk import failure_from_response, failure_from_sdk_error
from quayutec.providers.base import raise_failure, sdk_client, sdk_kwargs, token_count, tool_call
from quayutec.providers.models import ModelCall, ModelReply
from quayutec.tools import TOOL_SPECS

#: The response header carrying Anthropic's request id.
REQUEST_ID_HEADER = "request-id"


def call_anthropic(call: ModelCall) -> ModelReply:
    """Anthropic Messages API (``POST /v1/messages``), non-streaming, with the tools of design §4."""
    import anthropic

    key = call.api_key.get_secret_value()
    kwargs = sdk_kwargs(call, key)
    failure = None
    with sdk_client(call, anthropic.Anthropic, kwargs, key) as client:
        try:
            raw = client.messages.with_raw_response.create(
                timeout=call.timeout_s,
                model=call.model,
                max_tokens=call.max_tokens,
                system=call.system,
                messages=[{"role": "user", "content": call.user_text}],
                tools=[
                    {"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
                    for t in TOOL_SPECS
                ],
                metadata={"user_id": call.end_user_id},
            )
        except anthropic.APIError as exc:
            failure = failure_from_sdk_error(call.provider, anthropic, exc, key, REQUEST_ID_HEADER)
            if failure is None:
                raise
        if failure is not None:
            raise_failure(call, failure)
        try:
            message = raw.parse()
            if not isinstance(message.content, list):  # the SDK parses without validating
                raise ValueError("reply content is not a list of blocks")
            text = "".join(b.text for b in message.content if getattr(b, "type", None) == "text")
            tools = [
                tool_call(b.id, b.name, b.input) for b in message.content if getattr(b, "type", None) == "tool_use"
            ]
        except Exception:  # noqa: BLE001 - a 2xx we cannot read, however the SDK fails on it, is classified
            failure = failure_from_response(
                call.provider, raw.http_response, key, REQUEST_ID_HEADER, message="reply could not be read"
            )
        if failure is not None:
            raise_failure(call, failure)
    return ModelReply(
        text=text,
        tool_calls=tools,
        request_id=raw.headers.get(REQUEST_ID_HEADER) or getattr(message, "_request_id", None),
        status=raw.status_code,
        stop_reason=message.stop_reason,
        input_tokens=token_count(getattr(getattr(message, "usage", None), "input_tokens", None)),
        output_tokens=token_count(getattr(getattr(message, "usage", None), "output_tokens", None)),
    )
