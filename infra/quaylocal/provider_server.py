"""A local model-provider server for tests and the local dev stack (never deployed; design §7).

It speaks each provider's real wire format, so the real SDKs and provider adapters run
unchanged against it:

* Anthropic Messages ............ ``POST /anthropic/v1/messages``
* OpenAI Chat Completions ....... ``POST /openai/v1/chat/completions``
* OpenAI-compatible ............. ``POST /compat/v1/chat/completions`` (same format)
* Amazon Bedrock Converse ....... ``POST /bedrock/model/{modelId}/converse``

The agent is identified by the end-user id the adapter sends: Anthropic ``metadata.user_id``,
OpenAI ``user`` (or ``safety_identifier``), Bedrock ``requestMetadata["end_user_id"]``.

Scripts (``scripts``: agent id or name -> entries, consumed one per request, in order):

* ``{"reply": {"text": str, "actions": [{"kind": str, ...fields}], "headers": {...}}}`` -> a real
  reply whose actions are tool calls (tool name = kind, input = the other fields), with the
  given response headers (optional; they replace the server's own, e.g. its request id);
* ``{"error": {"status": int, "headers": {...}, "body": dict | str}}`` -> that status, headers and
  body verbatim (a ``str`` body is sent as-is, e.g. an HTML proxy page).
* Local extensions, for tests of the client side: ``"delay_s": float`` on any entry delays the
  response; ``{"drop": true}`` closes the connection without answering.

Every reply carries the provider's usage fields (Anthropic ``usage.input_tokens`` /
``output_tokens``, OpenAI ``usage.prompt_tokens`` / ``completion_tokens``, Bedrock
``usage.inputTokens`` / ``outputTokens``): input tokens about one per 4 characters of the
request's system prompt, messages and tools, output tokens one per 4 characters of the reply's
text and tool calls (at least 1). A reply entry's ``"usage": {"input": n, "output": m}`` sends
those counts instead, ``"usage": null`` sends none (a server that reports no usage). What was
sent is kept in ``RecordedRequest.usage``.

An agent without a script gets a deterministic echo reply (``"echo: "`` + the last line of the
user content, no tool calls) with its @mentions disarmed (``@b1`` is echoed as ``b1``): an echo
that repeated them would wake the agents they name, whose echoes would wake the first again, up
to the hop limit (issue 12 item 6). A request beyond an agent's script gets a final ``400 script
exhausted`` in the provider's error format and the agent id is appended to ``exhausted``. A
request whose key does not match ``keys[agent_id]`` gets ``401`` (Anthropic, OpenAI) or ``403
AccessDeniedException`` (Bedrock, which answers auth failures with 403) and consumes no entry.
Every response carries a request id header (``request-id`` / ``x-request-id`` /
``x-amzn-RequestId``). A SigV4-signed Bedrock request (an agent under its company's role, docs/
design.md §5) is answered like any other; ``RecordedRequest.signed_by`` keeps its access key id.
Thread-safe.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from quaylocal import calls

#: Bedrock ``requestMetadata`` key carrying the agent id (same constant as the adapter's).
BEDROCK_END_USER_KEY = "end_user_id"

PROVIDER_PREFIXES = {
    "anthropic": "/anthropic",
    "openai": "/openai/v1",
    "openai-compatible": "/compat/v1",
    "bedrock": "/bedrock",
}

_ROUTES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^/anthropic/v1/messages/?$"), "anthropic"),
    (re.compile(r"^/openai/v1/chat/completions/?$"), "openai"),
    (re.compile(r"^/compat/v1/chat/completions/?$"), "openai-compatible"),
    (re.compile(r"^/bedrock/model/(?P<model>[^/]+)/converse/?$"), "bedrock"),
]

_REQUEST_ID_HEADER = {
    "anthropic": "request-id",
    "openai": "x-request-id",
    "openai-compatible": "x-request-id",
    "bedrock": "x-amzn-RequestId",
}


@dataclass
class RecordedRequest:
    """One request the server received (the key is never recorded)."""

    agent_id: str | None
    provider: str | None
    path: str
    body: Any
    status: int
    time: float
    request_id: str
    model: str | None = None
    usage: dict[str, int] | None = None  # the tokens the reply reported: {"input": n, "output": m}
    #: A SigV4-signed request (a bedrock agent under its company's role): the access key id of its
    #: ``Authorization: AWS4-HMAC-SHA256 Credential=<id>/...`` header (an id, not a secret).
    signed_by: str | None = None


@dataclass
class _Response:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay_s: float = 0.0
    drop: bool = False
    usage: dict[str, int] | None = None


class ProviderServer:
    """The local provider server (see the module docstring for the behaviour)."""

    def __init__(
        self,
        scripts: dict[str, list[dict]] | None = None,
        keys: dict[str, str] | None = None,
        substitute: Callable[[Any], Any] | None = None,
        keep_requests: int | None = None,
    ) -> None:
        self.scripts: dict[str, list[dict]] = {k: list(v) for k, v in (scripts or {}).items()}
        self.keys: dict[str, str] = dict(keys or {})
        self.substitute = substitute
        #: Every request received, or the newest ``keep_requests`` of them (``quay dev``);
        #: :meth:`count` counts them all either way.
        self.requests: list[RecordedRequest] = []
        self.keep_requests = keep_requests
        self._counts: dict[str | None, int] = {}
        self.exhausted: list[str] = []
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._root: str | None = None

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> str:
        """Start serving on 127.0.0.1 (a free port); returns the root URL."""
        if self._httpd is not None:
            return self._root  # type: ignore[return-value]
        server = self

        class Handler(_Handler):
            owner = server

        httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd = httpd
        self._root = f"http://127.0.0.1:{httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="quay-provider-server", daemon=True
        )
        self._thread.start()
        return self._root

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ProviderServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def root_url(self) -> str:
        if self._root is None:
            raise RuntimeError("provider server not started")
        return self._root

    def base_url(self, provider: str) -> str:
        """The ``base_url`` to give ``call_model`` for a provider kind."""
        return self.root_url + PROVIDER_PREFIXES[provider]

    # ----------------------------------------------------------------- inspection
    def count(self, agent_id: str) -> int:
        """Requests received for ``agent_id`` (every one, whatever was answered)."""
        with self._lock:
            return self._counts.get(agent_id, 0)

    def set_script(self, agent_id: str, entries: list[dict]) -> None:
        """Replace an agent's script (restarting it at its first entry)."""
        with self._lock:
            self.scripts[agent_id] = list(entries)
            self._next[agent_id] = 0

    # ----------------------------------------------------------------- answering
    def _answer(
        self, provider: str, path: str, headers: Any, raw: bytes, model_in_path: str | None
    ) -> tuple[_Response, RecordedRequest]:
        request_id = _new_request_id(provider)
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, ValueError):
            body = None
            response = _error(provider, 400, "invalid_request_error", "request body is not valid JSON", request_id)
            return response, RecordedRequest(
                None, provider, path, raw.decode("utf-8", "replace"), response.status, time.time(), request_id
            )
        sent_id = _agent_id(provider, body)
        model = model_in_path if provider == "bedrock" else (body.get("model") if isinstance(body, dict) else None)
        with self._lock:
            agent_id = self._known_as(sent_id)
            expected = self.keys.get(agent_id) if agent_id is not None else None
            if expected is not None and _presented_key(provider, headers) != expected:
                response = _auth_error(provider, request_id)
            elif agent_id is not None and agent_id in self.scripts:
                index = self._next.get(agent_id, 0)
                script = self.scripts[agent_id]
                if index < len(script):
                    self._next[agent_id] = index + 1
                    response = self._scripted(provider, script[index], model, request_id, body)
                else:
                    self.exhausted.append(agent_id)
                    response = _error(
                        provider,
                        400,
                        "invalid_request_error",
                        f"script exhausted: agent {agent_id} has no reply for request "
                        f"{index + 1} (script has {len(script)})",
                        request_id,
                    )
            else:
                response = _reply(
                    provider,
                    model,
                    f"echo: {_without_mentions(_last_line(provider, body))}",
                    [],
                    request_id,
                    _input_tokens(body),
                )
            record = RecordedRequest(
                sent_id,
                provider,
                path,
                body,
                response.status,
                time.time(),
                request_id,
                model,
                response.usage,
                _sigv4_key_id(headers),
            )
            self.requests.append(record)
            self._counts[agent_id] = self._counts.get(agent_id, 0) + 1
            if self.keep_requests is not None and len(self.requests) > self.keep_requests:
                del self.requests[: len(self.requests) - self.keep_requests]
        return response, record

    def _known_as(self, agent_id: str | None) -> str | None:
        """The name scripts, keys and counts know the agent by: its id, or else its name (an id
        ``acme.a1`` is scripted as ``a1``, as people mention it). Called holding the lock."""
        if agent_id is None or agent_id in self.scripts or agent_id in self.keys:
            return agent_id
        name = agent_id.rsplit(".", 1)[-1]
        return name if name in self.scripts or name in self.keys else agent_id

    def _scripted(self, provider: str, entry: dict, model: str | None, request_id: str, body: Any = None) -> _Response:
        delay = float(entry.get("delay_s", 0) or 0)
        if entry.get("drop"):
            return _Response(status=0, drop=True, delay_s=delay)
        if "error" in entry:
            err = entry["error"]
            status = int(err["status"])
            hdrs = {str(k): str(v) for k, v in (err.get("headers") or {}).items()}
            body = err.get("body", "")
            if isinstance(body, (dict, list)):
                data = json.dumps(body).encode("utf-8")
                ctype = "application/json"
            else:
                data = str(body).encode("utf-8")
                ctype = (
                    "text/html; charset=utf-8" if str(body).lstrip().startswith("<") else "text/plain; charset=utf-8"
                )
            if not any(k.lower() == "content-type" for k in hdrs):
                hdrs["Content-Type"] = ctype
            rid_header = _REQUEST_ID_HEADER[provider]
            if not any(k.lower() == rid_header.lower() for k in hdrs):
                hdrs[rid_header] = request_id
            return _Response(status=status, headers=hdrs, body=data, delay_s=delay)
        reply = entry.get("reply") or {}
        actions = list(reply.get("actions") or [])
        if self.substitute is not None:
            actions = self.substitute(actions)
        usage = reply.get("usage", "auto")
        response = _reply(
            provider,
            model,
            str(reply.get("text", "")),
            actions,
            request_id,
            _input_tokens(body),
            usage=None if usage is None else usage if isinstance(usage, dict) else "auto",
        )
        for name, value in (reply.get("headers") or {}).items():  # e.g. a request id of its own
            response.headers = {k: v for k, v in response.headers.items() if k.lower() != str(name).lower()}
            response.headers[str(name)] = str(value)
        response.delay_s = delay
        return response


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # many agents calling at once must not overflow the listen backlog


class _Handler(BaseHTTPRequestHandler):
    owner: ProviderServer
    protocol_version = "HTTP/1.1"
    server_version = "quay-provider-server"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read .requests
        return

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        for pattern, provider in _ROUTES:
            match = pattern.match(path)
            if match:
                model = unquote(match.group("model")) if "model" in pattern.groupindex else None
                # The provider stands outside AWS; the scenario player's substitutions it runs
                # read the room as local tooling (quaylocal.calls owners).
                with calls.owner("local:provider-server"):
                    response, _ = self.owner._answer(provider, path, self.headers, raw, model)
                self._send(response)
                return
        self._send(_not_found(f"no route for POST {path}"))

    def do_GET(self) -> None:
        self._send(_not_found("POST only"))

    def _send(self, response: _Response) -> None:
        if response.delay_s > 0:
            time.sleep(response.delay_s)
        if response.drop:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        try:
            self.send_response(response.status)
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            self.wfile.write(response.body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            self.close_connection = True


# --------------------------------------------------------------------------- wire formats
def _new_request_id(provider: str) -> str:
    if provider == "anthropic":
        return "req_" + uuid.uuid4().hex[:24]
    if provider == "bedrock":
        return str(uuid.uuid4())
    return "req_" + uuid.uuid4().hex


def _agent_id(provider: str, body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    if provider == "anthropic":
        meta = body.get("metadata")
        value = meta.get("user_id") if isinstance(meta, dict) else None
    elif provider == "bedrock":
        meta = body.get("requestMetadata")
        value = meta.get(BEDROCK_END_USER_KEY) if isinstance(meta, dict) else None
    else:
        value = body.get("user") or body.get("safety_identifier")
    return value if isinstance(value, str) and value else None


def _presented_key(provider: str, headers: Any) -> str | None:
    if provider == "anthropic" and headers.get("x-api-key"):
        return headers.get("x-api-key")
    auth = headers.get("Authorization") or ""
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return None


_SIGV4 = re.compile(r"AWS4-HMAC-SHA256\s+Credential=([A-Z0-9]+)/")


def _sigv4_key_id(headers: Any) -> str | None:
    match = _SIGV4.match(headers.get("Authorization") or "")
    return match.group(1) if match else None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return ""


def _last_line(provider: str, body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    messages = body.get("messages") or []
    user_msgs = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not user_msgs:
        return ""
    lines = _text_of(user_msgs[-1].get("content")).rstrip().splitlines()
    return lines[-1] if lines else ""


def _without_mentions(text: str) -> str:
    """``text`` with the ``@`` of each @mention dropped (the room's own mention rule), so an echo
    mentions no agent: ``"@a1 @b1 hello"`` -> ``"a1 b1 hello"``."""
    from quayutec.logic.wakes import MENTION

    while MENTION.search(text):
        text = MENTION.sub(r"\1", text)
    return text


def _json_response(status: int, payload: Any, headers: dict[str, str]) -> _Response:
    return _Response(status, {"Content-Type": "application/json", **headers}, json.dumps(payload).encode("utf-8"))


def _input_tokens(body: Any) -> int:
    """About one token per 4 characters of what the model reads: the system prompt, the
    messages and the tool definitions of the request (the JSON text of each)."""
    if not isinstance(body, dict):
        return 1
    parts = [body.get(k) for k in ("system", "messages", "tools", "toolConfig") if body.get(k) is not None]
    return max(1, len(json.dumps(parts, ensure_ascii=False, separators=(",", ":"))) // 4)


def _reply(
    provider: str,
    model: str | None,
    text: str,
    actions: list,
    request_id: str,
    in_tokens: int = 1,
    usage: dict | str | None = "auto",
) -> _Response:
    """A reply in ``provider``'s format. ``usage``: ``"auto"`` (``in_tokens``, and one output
    token per 4 characters of the text and tool calls), ``{"input": n, "output": m}``, or
    ``None`` (no usage fields at all)."""
    calls = []
    for action in actions:
        if isinstance(action, dict):
            name = str(action.get("kind", ""))
            args = {k: v for k, v in action.items() if k != "kind"}
        else:  # a malformed action is passed on as-is, as a tool call with no name
            name, args = "", action
        calls.append((name, args))
    rid = {_REQUEST_ID_HEADER[provider]: request_id}
    out_tokens = max(1, (len(text) + len(json.dumps([list(c) for c in calls], ensure_ascii=False)) - 2) // 4)
    if isinstance(usage, dict):
        in_tokens, out_tokens = int(usage.get("input", 0)), int(usage.get("output", 0))
    sent = None if usage is None else {"input": in_tokens, "output": out_tokens}
    response = _reply_body(provider, model, text, calls, rid, in_tokens, out_tokens)
    if sent is None:  # a server that reports no usage
        payload = json.loads(response.body)
        payload.pop("usage", None)
        response.body = json.dumps(payload).encode("utf-8")
    response.usage = sent
    return response


def _reply_body(
    provider: str, model: str | None, text: str, calls: list, rid: dict[str, str], in_tokens: int, out_tokens: int
) -> _Response:
    if provider == "anthropic":
        content: list[dict] = [{"type": "text", "text": text}] if text else []
        content += [
            {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24], "name": n, "input": a} for n, a in calls
        ]
        return _json_response(
            200,
            {
                "id": "msg_" + uuid.uuid4().hex[:24],
                "type": "message",
                "role": "assistant",
                "model": model or "local",
                "content": content,
                "stop_reason": "tool_use" if calls else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": in_tokens, "output_tokens": out_tokens},
            },
            rid,
        )
    if provider == "bedrock":
        blocks: list[dict] = [{"text": text}] if text else []
        blocks += [
            {"toolUse": {"toolUseId": "tooluse_" + uuid.uuid4().hex[:20], "name": n, "input": a}} for n, a in calls
        ]
        return _json_response(
            200,
            {
                "output": {"message": {"role": "assistant", "content": blocks}},
                "stopReason": "tool_use" if calls else "end_turn",
                "usage": {"inputTokens": in_tokens, "outputTokens": out_tokens, "totalTokens": in_tokens + out_tokens},
                "metrics": {"latencyMs": 1},
            },
            rid,
        )
    tool_calls = [
        {"id": "call_" + uuid.uuid4().hex[:24], "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for n, a in calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return _json_response(
        200,
        {
            "id": "chatcmpl-" + uuid.uuid4().hex[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model or "local",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if tool_calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": in_tokens,
                "completion_tokens": out_tokens,
                "total_tokens": in_tokens + out_tokens,
            },
        },
        rid,
    )


def _error(
    provider: str,
    status: int,
    error_type: str,
    message: str,
    request_id: str,
    code: str | None = None,
    bedrock_type: str = "ValidationException",
) -> _Response:
    rid = {_REQUEST_ID_HEADER[provider]: request_id}
    if provider == "anthropic":
        payload = {"type": "error", "error": {"type": error_type, "message": message}, "request_id": request_id}
        return _json_response(status, payload, rid)
    if provider == "bedrock":
        return _json_response(status, {"message": message}, {**rid, "x-amzn-ErrorType": bedrock_type})
    return _json_response(status, {"error": {"message": message, "type": error_type, "param": None, "code": code}}, rid)


def _not_found(message: str) -> _Response:
    rid = _new_request_id("openai")
    return _json_response(404, {"message": message}, {"request-id": rid, "x-request-id": rid, "x-amzn-RequestId": rid})


def _auth_error(provider: str, request_id: str) -> _Response:
    if provider == "anthropic":
        return _error(provider, 401, "authentication_error", "invalid x-api-key", request_id)
    if provider == "bedrock":
        return _error(
            provider,
            403,
            "",
            "Authentication failed: the API key is not valid.",
            request_id,
            bedrock_type="AccessDeniedException",
        )
    return _error(
        provider, 401, "invalid_request_error", "Incorrect API key provided.", request_id, code="invalid_api_key"
    )
