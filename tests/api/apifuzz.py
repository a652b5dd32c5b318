"""Property-based fuzzing of the room API from its own OpenAPI document, with schemathesis
(issue 10): every operation, valid and invalid data (positive and negative generation modes),
sent either through the handler (a WSGI adapter around ``quay dev``'s API Gateway emulation,
in-process) or through the real HTTP path of a running ``quay dev``.

Each response is checked by schemathesis against the document: never a 5xx, the status one the
route declares, the content type and body schema declared for that status (errors included:
``{error, message, fields}``), the declared headers. Most cases carry a valid token, so they reach
the handler (a run that dies at 401 proves nothing); some carry none or a junk one. Path ids are
sometimes swapped for ids that exist, so the cases get past the 404s too.

:func:`fuzz` returns a :class:`Report`: cases, the status mix per route, how many reached the
handler, and every failure (the check's message and the request).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from quayutec.api.app import openapi_json

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
#: A valid token's case that got this did not reach the handler.
GATEWAY_ONLY = {401}


@dataclass
class Report:
    cases: int = 0
    reached_handler: int = 0
    statuses: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    failures: list[str] = field(default_factory=list)

    def render(self, title: str) -> str:
        lines = [
            f"{title}: {self.cases} cases, {self.reached_handler} reached the handler with a valid token, "
            f"{len(self.failures)} failures"
        ]
        for route in sorted(self.statuses):
            mix = ", ".join(f"{s}: {n}" for s, n in sorted(self.statuses[route].items()))
            lines.append(f"  {route:55} {mix}")
        return "\n".join(lines)

    @property
    def five_xx(self) -> int:
        return sum(n for mix in self.statuses.values() for s, n in mix.items() if s >= 500)


def gateway_wsgi(gateway: Any) -> Callable:
    """A WSGI application around :class:`quaylocal.dev.Gateway` (what ``quay dev`` serves over HTTP)."""

    def app(environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        headers = [(k[5:].replace("_", "-").title(), v) for k, v in environ.items() if k.startswith("HTTP_")]
        if environ.get("CONTENT_TYPE"):
            headers.append(("Content-Type", environ["CONTENT_TYPE"]))
        path = environ.get("PATH_INFO", "/").encode("latin-1").decode("utf-8", "replace")
        from urllib.parse import quote

        target = quote(path, safe="/:@!$&'()*+,;=-._~") + (
            f"?{environ['QUERY_STRING']}" if environ.get("QUERY_STRING") else ""
        )
        result = gateway.handle(environ["REQUEST_METHOD"], target, headers, body)
        start_response(
            f"{result.status} X", [(k, v) for k, v in result.headers.items() if k.lower() not in ("content-length",)]
        )
        return [result.body]

    return app


def load_schema() -> Any:
    return schemathesis.openapi.from_dict(json.loads(openapi_json()))


def fuzz(
    *,
    cases: int,
    token: str,
    ids: dict[str, list[str]],
    app: Callable | None = None,
    base_url: str | None = None,
    seed_value: int | None = 10,
) -> Report:
    """About ``cases`` generated requests spread over every operation, sent to the WSGI ``app``
    or to ``base_url`` over HTTP."""
    schema = load_schema()
    if app is not None:
        schema.app = app
    operations = [r.ok() for r in schema.get_all_operations()]
    per_op = max(2, -(-cases // len(operations)) + 1)
    report = Report()
    counter = iter(range(10**9))

    def runner(op: Any) -> Callable[[], None]:
        strategy = op.as_strategy(generation_mode=GenerationMode.POSITIVE) | op.as_strategy(
            generation_mode=GenerationMode.NEGATIVE
        )
        route = f"{op.method.upper()} {op.path}"

        @settings(
            max_examples=per_op,
            deadline=None,
            database=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],
        )
        @given(case=strategy)
        def run(case: Any) -> None:
            n = next(counter)
            for name in list(case.path_parameters or {}):
                known = ids.get(name)
                if known and n % 3 != 0:
                    case.path_parameters[name] = known[n % len(known)]
            # the token decides, not what the generator put in Authorization
            headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
            auth = "none" if n % 10 == 9 else "junk" if n % 20 == 4 else "valid"
            if auth == "junk":
                headers["Authorization"] = "Bearer qyt_junk_token"
            elif auth == "valid":  # else no token: the gateway's 401
                headers["Authorization"] = f"Bearer {token}"
            case.headers = headers
            response = case.call(base_url=base_url) if base_url else case.call()
            report.cases += 1
            report.statuses[route][response.status_code] += 1
            if auth == "valid" and response.status_code not in GATEWAY_ONLY:
                report.reached_handler += 1
            try:
                case.validate_response(response, checks=CHECKS)
            except Exception as exc:  # noqa: BLE001 - collected, all reported at the end
                report.failures.append(f"{route} -> {response.status_code}: {' '.join(str(exc).split())[:600]}")

        return seed(seed_value)(run) if seed_value is not None else run

    for op in operations:
        runner(op)()
    return report
