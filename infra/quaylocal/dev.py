"""``quay dev``: the room API on 127.0.0.1 over HTTP, on the local stack (design §7).

:class:`Gateway` does what API Gateway (REST API, Lambda proxy integration, TOKEN Lambda
authorizer) does in front of the API Lambda: refuse a request without ``Authorization`` (401),
run the authorizer first and apply its policy (401 / 403), pass its context in
``requestContext.authorizer``, build the proxy event (payload v1) and turn the function's answer
into the HTTP response (502 when the function fails). The functions are the deployed handlers,
invoked through the local stack's Lambda (moto, in-process).

:class:`DevServer` runs the local provider server (echo replies unless a script is given), the
local stack (wakes and executions run in the background) and a threaded HTTP server.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import secrets
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from quaylocal import calls, files_endpoint
from quaylocal.stack import ACCOUNT, DEV_BACKGROUND_INVOCATIONS, DEV_RETENTION, REGION, LocalStack, foreground
from quayutec.api.errors import ERRORS, error_payload
from quayutec.api.public import is_public
from quayutec.resources import (
    DEFAULT_COMPANY_THROTTLE_BURST,
    DEFAULT_COMPANY_THROTTLE_RATE,
    STAGE_THROTTLE_BURST,
    STAGE_THROTTLE_RATE,
)
from quayutec.words import count

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
API_FUNCTION = "ApiFunction"
AUTHORIZER_FUNCTION = "AuthorizerFunction"
MAX_PAYLOAD = 10 * 1024 * 1024  # API Gateway's payload limit
#: Lambda's limit on a synchronous invocation's answer (6 MB), measured on the answer as the
#: Python runtime serializes it (the proxy response, its body string escaped once more): a
#: larger answer fails the invocation and the gateway answers 502.
MAX_FUNCTION_ANSWER = 6 * 1024 * 1024
#: The local provider server's recorded requests that ``quay dev`` keeps (the newest).
DEV_KEEP_REQUESTS = 200


def gateway_error(code: str, message: str) -> dict[str, Any]:
    """A gateway's own answer, in the API's error shape ``{error, message, fields}`` (the deployed
    API declares the same as Gateway Responses, infra/quayinfra/api.py)."""
    return error_payload(ERRORS[code].status, code, message)


UNAUTHORIZED = gateway_error("unauthenticated", "Unauthorized")
ACCESS_DENIED = gateway_error("forbidden", "User is not authorized to access this resource")
TOO_LARGE = gateway_error("payload_too_large", "Request Too Long")
THROTTLED = gateway_error("throttled", "Too Many Requests")
INVALID_API_KEY = gateway_error("forbidden", "Forbidden")
AUTHORIZER_FAILED = gateway_error("internal_error", "Internal server error")
FUNCTION_FAILED = gateway_error("bad_gateway", "Internal server error")

#: invoke(logical_id, event) -> (payload, error) with error = the Lambda runtime's error object.
Invoke = Callable[[str, dict[str, Any]], tuple[Any, dict[str, Any] | None]]


@dataclass
class HttpResult:
    status: int
    headers: dict[str, str]
    body: bytes


def _json_result(status: int, body: Any, headers: dict[str, str] | None = None) -> HttpResult:
    return HttpResult(status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(body).encode())


def stack_invoke(stack: LocalStack) -> Invoke:
    """Invoke a function of the local stack through moto's Lambda (the in-process seam)."""

    def invoke(logical_id: str, event: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        # API Gateway invokes the authorizer and the integration itself (a resource-based
        # permission, no role of ours): quaylocal.calls lists these calls, it does not check them.
        # A request's calls go before the background work's (runs, pollers): stack.foreground.
        with calls.owner("local:api-gateway"), foreground():
            resp = stack.client("lambda").invoke(
                FunctionName=stack.function_arns[logical_id], Payload=json.dumps(event).encode()
            )
        payload = json.loads(resp["Payload"].read() or b"null")
        if resp.get("FunctionError"):
            return None, payload if isinstance(payload, dict) else {"errorMessage": str(payload)}
        return payload, None

    return invoke


def preload_handlers() -> None:
    """Import every function's handler module now, in this thread: importing them for the first
    time from the HTTP and pump threads at once can trip over half-initialised modules."""
    from quaylocal.stack import resolve_handler
    from quayutec import resources as r

    for f in r.FUNCTIONS:
        resolve_handler(f.handler)


def direct_invoke(context_factory: Callable[[str], Any] | None = None) -> Invoke:
    """Call the deployed handlers directly in this process (faster than through moto's Lambda;
    for tests), with the Lambda runtime's error shape."""
    import traceback

    from quaylocal.stack import resolve_handler
    from quayutec import resources as r

    def invoke(logical_id: str, event: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        fn = resolve_handler(r.FUNCTIONS_BY_ID[logical_id].handler)
        ctx = context_factory(logical_id) if context_factory else _Context(logical_id)
        try:
            return json.loads(json.dumps(fn(json.loads(json.dumps(event)), ctx))), None
        except Exception as exc:  # noqa: BLE001 - the runtime's error contract
            return None, {
                "errorMessage": str(exc),
                "errorType": type(exc).__name__,
                "stackTrace": traceback.format_exception(exc),
            }

    return invoke


class _Context:
    """The Lambda context fields Powertools reads."""

    def __init__(self, name: str, timeout_s: float = 29.0) -> None:
        self.function_name = f"quayutec-{name}"
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class _TokenBucket:
    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate, self.burst = float(rate_per_s), max(1, int(burst))
        self.tokens = float(self.burst)
        self.at = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens >= 1:
                self.tokens -= 1
                return True
            return False


def _policy_allows(policy: Any, method_arn: str) -> bool:
    """IAM-style evaluation of the authorizer's policy for one method ARN: an explicit Deny wins,
    then an Allow, else deny."""
    statements = (policy or {}).get("Statement") or []
    if isinstance(statements, dict):
        statements = [statements]
    allowed = False
    for s in statements:
        actions = s.get("Action") or []
        actions = [actions] if isinstance(actions, str) else actions
        resources = s.get("Resource") or []
        resources = [resources] if isinstance(resources, str) else resources
        if not any(fnmatch.fnmatchcase("execute-api:Invoke", a) for a in actions):
            continue
        if not any(fnmatch.fnmatchcase(method_arn, r) for r in resources):
            continue
        if s.get("Effect") == "Deny":
            return False
        if s.get("Effect") == "Allow":
            allowed = True
    return allowed


class Gateway:
    """API Gateway's part of a request (see the module docstring)."""

    def __init__(
        self,
        invoke: Invoke,
        *,
        api_id: str = "quaylocal",
        stage: str = "dev",
        rate_limit: tuple[float, int] | None = None,
        company_rate_limit: tuple[float, int] | None = None,
    ) -> None:
        self.invoke = invoke
        #: (requests per second, burst): API Gateway's stage throttling, answered 429 (off: None).
        self._limiter = _TokenBucket(*rate_limit) if rate_limit else None
        #: (requests per second, burst) of each API key the authorizer answers (its
        #: ``usageIdentifierKey``: one per company, docs/design.md §5): the usage plan's throttle,
        #: a token bucket per key after the authorizer, answered 429 as the stage's (off: None).
        self.company_rate_limit = company_rate_limit
        self._key_limiters: dict[str, _TokenBucket] = {}
        self._key_lock = threading.Lock()
        self.api_id = api_id
        self.stage = stage
        # One invocation at a time per function, as in one Lambda sandbox (the handlers keep
        # per-invocation state in module globals: Powertools' resolver and logger): a lock per
        # function, held only around its invocation, so one request's authorizer call does not
        # wait for another's API call, and no lock is held across a whole request.
        self._locks = {AUTHORIZER_FUNCTION: threading.Lock(), API_FUNCTION: threading.Lock()}
        #: The local stack whose room files the gateway serves (files_endpoint; quay dev sets it).
        self.stack: LocalStack | None = None

    def _key_limiter(self, key: str) -> _TokenBucket:
        assert self.company_rate_limit is not None
        with self._key_lock:
            found = self._key_limiters.get(key)
            if found is None:
                found = self._key_limiters[key] = _TokenBucket(*self.company_rate_limit)
            return found

    def method_arn(self, method: str, path: str) -> str:
        return f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{self.api_id}/{self.stage}/{method}{path}"

    def handle(
        self,
        method: str,
        target: str,
        headers: dict[str, str] | list[tuple[str, str]],
        body: bytes = b"",
        source_ip: str = "127.0.0.1",
    ) -> HttpResult:
        method = method.upper()
        pairs = list(headers.items()) if isinstance(headers, dict) else list(headers)
        url = urlsplit(target)
        path = unquote(url.path) or "/"
        if len(body) > MAX_PAYLOAD:
            return _json_result(413, TOO_LARGE)
        if self._limiter is not None and not self._limiter.take():
            return _json_result(429, THROTTLED, {"Retry-After": "1"})
        authorizer_ctx: dict[str, Any] | None = None
        if not is_public(method, path):  # the routes the deployed API serves without the authorizer
            token = next((v for k, v in pairs if k.lower() == "authorization"), "")
            if not token.strip():
                return _json_result(401, UNAUTHORIZED)
            method_arn = self.method_arn(method, path)
            with self._locks[AUTHORIZER_FUNCTION]:
                result, error = self.invoke(
                    AUTHORIZER_FUNCTION, {"type": "TOKEN", "authorizationToken": token, "methodArn": method_arn}
                )
            if error is not None:
                if error.get("errorMessage") == "Unauthorized":
                    return _json_result(401, UNAUTHORIZED)
                return _json_result(500, AUTHORIZER_FAILED, {"x-amzn-ErrorType": "AuthorizerConfigurationException"})
            if not isinstance(result, dict) or not _policy_allows(result.get("policyDocument"), method_arn):
                return _json_result(403, ACCESS_DENIED)
            if self.company_rate_limit is not None:
                # apiKeyRequired with the key from the authorizer: none (or not a string) is 403
                key = result.get("usageIdentifierKey")
                if not isinstance(key, str) or not key:
                    return _json_result(403, INVALID_API_KEY)
                if not self._key_limiter(key).take():
                    return _json_result(429, THROTTLED, {"Retry-After": "1"})
            authorizer_ctx = {**(result.get("context") or {}), "principalId": result.get("principalId")}
        event = self.proxy_event(method, path, url.query, pairs, body, authorizer_ctx, source_ip)
        with self._locks[API_FUNCTION]:
            result, error = self.invoke(API_FUNCTION, event)
        if error is not None or not isinstance(result, dict) or "statusCode" not in result:
            return _json_result(502, FUNCTION_FAILED)
        if len(json.dumps(result, ensure_ascii=False).encode("utf-8", "surrogatepass")) > MAX_FUNCTION_ANSWER:
            return _json_result(502, FUNCTION_FAILED)  # Lambda: "Response payload size exceeded"
        out_headers = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
        for k, values in (result.get("multiValueHeaders") or {}).items():
            if values:
                out_headers[str(k)] = ", ".join(str(v) for v in values)
        raw = result.get("body") or ""
        data = base64.b64decode(raw) if result.get("isBase64Encoded") else str(raw).encode()
        return HttpResult(int(result["statusCode"]), out_headers, data)

    def proxy_event(
        self,
        method: str,
        path: str,
        query: str,
        headers: list[tuple[str, str]],
        body: bytes,
        authorizer: dict[str, Any] | None,
        source_ip: str = "127.0.0.1",
    ) -> dict[str, Any]:
        """The REST API Lambda proxy event (payload format 1.0) of a ``/{proxy+}`` resource."""
        multi_headers: dict[str, list[str]] = {}
        for k, v in headers:
            multi_headers.setdefault(k, []).append(v)
        multi_query = parse_qs(query, keep_blank_values=True) if query else {}
        try:
            text, is_b64 = body.decode("utf-8"), False
        except UnicodeDecodeError:
            text, is_b64 = base64.b64encode(body).decode(), True
        now = datetime.now(UTC)
        ctx: dict[str, Any] = {
            "accountId": ACCOUNT,
            "apiId": self.api_id,
            "domainName": "127.0.0.1",
            "httpMethod": method,
            "identity": {"sourceIp": source_ip, "userAgent": dict(headers).get("User-Agent", "")},
            # quay dev serves the API at its root, as API Gateway does behind a custom domain:
            # the path without the stage (what the API's documents say their server is).
            "path": path,
            "protocol": "HTTP/1.1",
            "requestId": str(uuid.uuid4()),
            "requestTime": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "requestTimeEpoch": int(now.timestamp() * 1000),
            "resourceId": "proxy",
            "resourcePath": "/{proxy+}",
            "stage": self.stage,
        }
        if authorizer is not None:
            ctx["authorizer"] = authorizer
        return {
            "resource": "/{proxy+}",
            "path": path,
            "httpMethod": method,
            "headers": {k: v[-1] for k, v in multi_headers.items()} or None,
            "multiValueHeaders": multi_headers or None,
            "queryStringParameters": {k: v[-1] for k, v in multi_query.items()} or None,
            "multiValueQueryStringParameters": multi_query or None,
            "pathParameters": {"proxy": path.lstrip("/")} if path != "/" else None,
            "stageVariables": None,
            "requestContext": ctx,
            "body": text if body else None,
            "isBase64Encoded": is_b64,
        }


def _handler_class(gateway: Gateway) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "quay-dev"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """The HTTP server's own refusals (a request line or URL too long, headers too large, a
            malformed request) in the API's error shape, not http.server's HTML page."""
            said = message or HTTPStatus(code).phrase
            body = json.dumps(error_payload(code, "bad_request", said)).encode()
            self.close_connection = True
            self.send_response(code, message)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD" and code >= 200 and code not in (204, 304):
                self.wfile.write(body)

        def _serve(self) -> None:
            raw_length = (self.headers.get("Content-Length") or "0").strip()
            length = int(raw_length) if raw_length.isdigit() else -1
            if self.path.startswith(files_endpoint.PREFIX) and gateway.stack is not None:
                if not 0 <= length <= files_endpoint.MAX_BODY:  # room files: S3's own limits, not the API's
                    self.close_connection = True
                    result = HttpResult(*files_endpoint._error(400, "EntityTooLarge", "over the upload limit"))
                else:
                    body = self.rfile.read(length) if length > 0 else b""
                    result = HttpResult(
                        *files_endpoint.handle(gateway.stack, self.command, self.path, dict(self.headers.items()), body)
                    )
            elif length < 0:
                self.close_connection = True
                result = _json_result(400, gateway_error("bad_request", "Content-Length is not a number"))
            elif length > MAX_PAYLOAD:  # not read: the connection is closed after the answer
                self.close_connection = True
                result = _json_result(413, TOO_LARGE)
            else:
                body = self.rfile.read(length) if length > 0 else b""
                try:
                    result = gateway.handle(
                        self.command, self.path, list(self.headers.items()), body, self.client_address[0]
                    )
                except Exception:  # noqa: BLE001 - the gateway itself failed: 502, keep serving
                    result = _json_result(502, FUNCTION_FAILED)
            self.send_response(result.status)
            for k, v in result.headers.items():
                if k.lower() not in ("content-length", "connection"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(result.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(result.body)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve

    return Handler


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closed its connection (a browser's idle keep-alive, a cancelled
        request) is no error of the server: no traceback; anything else as socketserver does."""
        if isinstance(sys.exc_info()[1], ConnectionError):  # reset, aborted, broken pipe
            return
        super().handle_error(request, client_address)


def load_scripts(path: str | Path | None) -> dict[str, list[dict[str, Any]]]:
    """Model scripts per agent id (the scenario ``model_replies`` format), from JSON or YAML."""
    if path is None:
        return {}
    text = Path(path).read_text()
    if str(path).endswith((".yaml", ".yml")):
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError(f"{path}: expected an object of agent id -> list of script entries")
    return data


class ActivityLog:
    """What ``quay dev`` prints after its banner: one plain line per wake the wake queue delivers,
    per run start and per run end (design §3), read from the local stack (the wake bodies it
    keeps) and the run ledger of the rooms woken (``Ledger.runs_in_room``, a set-up call of the
    local tooling, not a function's). :meth:`poll` prints what is new since the last call."""

    def __init__(self, stack: LocalStack, say: Callable[[str], None]) -> None:
        self.stack = stack
        self.say = say
        self._wakes_seen = 0
        self._rooms: dict[str, None] = {}
        self._started: set[str] = set()
        self._ended: set[str] = set()

    def poll(self) -> None:
        from quayutec.deps import default_deps
        from quayutec.models import FINAL_STATUSES, Wake

        received = self.stack.stats.wakes_received
        new = min(received - self._wakes_seen, len(self.stack.wake_bodies))
        self._wakes_seen = received
        for body in list(self.stack.wake_bodies)[len(self.stack.wake_bodies) - new :] if new > 0 else []:
            try:
                w = Wake.model_validate_json(body)
            except ValueError:
                continue
            self._rooms[w.room_id] = None
            self.say(
                f"wake {w.agent_id} in {w.room_id}: {w.cause_kind.replace('_', ' ')} {w.cause_id} "
                f"(by {w.by_kind}, hop {w.hop}, chain {w.chain_id})"
            )
        ledger = default_deps().ledger
        for room in list(self._rooms):
            with calls.owner(calls.SETUP):
                runs = sorted(ledger.runs_in_room(room), key=lambda r: r.started_at)
            for run in runs:
                if run.run_id not in self._started:
                    self._started.add(run.run_id)
                    self.say(f"run {run.run_id} started: {run.agent_id} in {run.room_id} (wake {run.wake_id})")
                if run.status in FINAL_STATUSES and run.run_id not in self._ended:
                    self._ended.add(run.run_id)
                    error = f": {run.error_class}: {run.error_message}" if run.error_class else ""
                    self.say(f"run {run.run_id} ended {run.status}{error} (quay ledger {run.run_id})")


class DevServer:
    """The local dev stack behind an HTTP API. ``admin_token``: the operator token to create
    (default: a fresh random one, see :attr:`admin_token`); ``scripts``: model replies per agent;
    ``settings``: runtime setting overrides (e.g. ``{"HOP_LIMIT": "3"}``)."""

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        admin_token: str | None = None,
        scripts: dict[str, list[dict[str, Any]]] | None = None,
        settings: dict[str, str] | None = None,
        time_scale: float | None = None,
        throttle: bool = False,
    ) -> None:
        from quaylocal.provider_server import ProviderServer

        #: As the deployed stage throttles (``quay dev --throttle``): the stage's overall limit and
        #: each company's own (the defaults, docs/design.md §5); off by default.
        self.throttle = throttle
        self.host = host
        self.port = port
        self.admin_token = admin_token or f"qyt_admin_{secrets.token_urlsafe(24)}"
        self.provider = ProviderServer(scripts=scripts or {}, keys={}, keep_requests=DEV_KEEP_REQUESTS)
        self.settings = dict(settings or {})
        self.time_scale = time_scale
        self.stack: LocalStack | None = None
        self.gateway: Gateway | None = None
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        from quaylocal.scenario import PROVIDER_ENV
        from quayutec.dal.auth import TokenStore
        from quayutec.deps import default_deps

        preload_handlers()
        self.provider.start()
        env = {PROVIDER_ENV[p]: self.provider.base_url(p) for p in PROVIDER_ENV}
        env.update(self.settings)
        self.stack = LocalStack(
            settings=env,
            time_scale=self.time_scale,
            retention=DEV_RETENTION,
            background_invocations=DEV_BACKGROUND_INVOCATIONS,
        )
        self.stack.start()
        try:
            TokenStore(default_deps().room.table).issue(None, "admin", admin=True, token=self.admin_token)
            limits: dict[str, Any] = {}
            if self.throttle:
                limits = {
                    "rate_limit": (STAGE_THROTTLE_RATE, STAGE_THROTTLE_BURST),
                    "company_rate_limit": (DEFAULT_COMPANY_THROTTLE_RATE, DEFAULT_COMPANY_THROTTLE_BURST),
                }
            self.gateway = Gateway(stack_invoke(self.stack), **limits)
            self.gateway.stack = self.stack  # serves the files endpoint
            self._httpd = _HttpServer((self.host, self.port), _handler_class(self.gateway))
            self._point_files_at(f"http://{self.host}:{self._httpd.server_address[1]}")
        except BaseException:
            self.stack.stop()
            self.provider.stop()
            raise
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="quay-dev-http", daemon=True
        )
        self._thread.start()
        return self.url

    def _point_files_at(self, url: str) -> None:
        """The API signs file URLs for this server's files endpoint (quaylocal.files_endpoint)."""
        from quayutec import resources as r

        assert self.stack is not None
        lam = self.stack.client("lambda")
        with calls.owner(calls.SETUP):
            arn = self.stack.function_arns["ApiFunction"]
            env = lam.get_function_configuration(FunctionName=arn)["Environment"]["Variables"]
            lam.update_function_configuration(
                FunctionName=arn,
                Environment={"Variables": {**env, r.FILES_ENDPOINT_ENV: f"{url}{files_endpoint.PREFIX.rstrip('/')}"}},
            )

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self.stack is not None:
            self.stack.stop()
            self.stack = None
        self.provider.stop()

    def __enter__(self) -> DevServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def compat_base_url(self) -> str:
        """The local provider server's OpenAI-compatible address (for an agent's ``base_url``)."""
        return self.provider.base_url("openai-compatible")

    def serve_forever(self, banner: Callable[[str], None] = print, *, quiet: bool = False) -> None:
        """Serve until SIGINT (Ctrl-C) or SIGTERM, then stop everything. After the banner, one
        line per wake, run start and run end (:class:`ActivityLog`) unless ``quiet``."""
        import signal

        def _stop(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt

        for sig in (signal.SIGINT, signal.SIGTERM):  # also when started with SIGINT ignored (`cmd &`)
            signal.signal(sig, _stop)
        self.start()
        banner(f"quay dev: the room API on {self.url} (OpenAPI {self.url}/openapi.json, Swagger UI {self.url}/docs)")
        banner(f"the room page: {self.url}/app/ (sign in with a person's token)")
        banner(f"operator token: {self.admin_token}")
        scripted = ", ".join(f"{a} ({count(len(s), 'reply')})" for a, s in sorted(self.provider.scripts.items()))
        banner(
            f"local model provider: {self.provider.root_url} (echo replies unless scripted); "
            f"openai-compatible base_url: {self.compat_base_url()}"
        )
        if scripted:
            banner(f"scripted agents (--scripts): {scripted}")
        banner("Ctrl-C stops it; everything lives in memory and is gone after.")
        activity = None if quiet or self.stack is None else ActivityLog(self.stack, banner)
        try:
            while True:
                if activity is None:
                    time.sleep(3600)
                    continue
                time.sleep(0.5)
                try:
                    activity.poll()
                except Exception as exc:  # noqa: BLE001 - a report line is never worth stopping the server
                    banner(f"(activity lines: {type(exc).__name__}: {exc})")
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()
