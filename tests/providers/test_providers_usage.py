"""Model tokens from each provider's usage fields (design §10): what the local provider server sent
is what the adapter read and what the running invocation's cost line counted; a reply without
usage fields is not guessed; a failed request counts nothing; outside a run phase nothing counts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from quaylocal.provider_server import ProviderServer
from quayutec.cost import line as cost_line
from quayutec.models import TokenCount
from quayutec.providers import ModelCall, ProviderError, call_model

PROVIDERS = ("anthropic", "openai", "openai-compatible", "bedrock")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_usage_fields_of_each_wire_format_are_counted(
    provider: str, server: ProviderServer, make_call: Callable[..., ModelCall]
) -> None:
    server.set_script(
        "agent-1",
        [
            {
                "reply": {
                    "text": "A reply of some length, with an action.",
                    "actions": [{"kind": "remember", "text": "x", "visibility": "room"}],
                }
            },
            {"error": {"status": 503, "body": {"error": {"type": "overloaded_error", "message": "busy"}}}},
            {"reply": {"text": "no usage", "actions": [], "usage": None}},
            {"reply": {"text": "given usage", "actions": [], "usage": {"input": 7000, "output": 321}}},
        ],
    )
    call = make_call(provider, "agent-1")
    with cost_line.counting():
        reply = call_model(call)
        with pytest.raises(ProviderError):
            call_model(call)
        bare = call_model(call)
        given = call_model(call)
        cost = cost_line.so_far(None, 1)
    first = server.requests[0].usage
    assert first["input"] > 100 and first["output"] >= 10  # about 4 characters a token, tools included
    assert (reply.input_tokens, reply.output_tokens) == (first["input"], first["output"])
    assert (bare.input_tokens, bare.output_tokens) == (None, None) and server.requests[2].usage is None
    assert (given.input_tokens, given.output_tokens) == (7000, 321)
    assert cost.tokens == {
        call.model: TokenCount(
            provider=provider, input=first["input"] + 7000, output=first["output"] + 321, replies=2, unreported=1
        )
    }


def test_outside_a_run_phase_nothing_is_counted(server: ProviderServer, make_call: Callable[..., ModelCall]) -> None:
    reply = call_model(make_call("anthropic", "agent-2"))
    assert reply.input_tokens == server.requests[-1].usage["input"]
    with cost_line.counting():
        assert cost_line.so_far(None, 1).tokens == {}
