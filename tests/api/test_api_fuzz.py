"""Property test of the whole API (issue 4): Hypothesis builds requests from the served OpenAPI
document (every operation, its path and query parameters and its request-body model, valid and
broken: missing, extra and mistyped fields, oversized values, junk bodies, odd ids, odd
Idempotency-Keys) and sends them through the API Gateway emulation to the deployed handlers,
in-process. No request may get a 5xx, and every error is a JSON object naming the error."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

# At collection, before any test starts the local stack's threads: pytest rewrites the asserts
# of schemathesis' modules (a pytest plugin) as they are imported, and CPython 3.11's AST
# validation can fail spuriously when that happens beside running threads
# (python/cpython#106905, "AST constructor recursion depth mismatch"), as it did once in CI.
from apifuzz import fuzz, gateway_wsgi
from apihelpers import World
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quayutec.api.app import openapi_json

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

SPEC = json.loads(openapi_json())
OPERATIONS = sorted((method.upper(), path, op) for path, item in SPEC["paths"].items() for method, op in item.items())
CASES = 500


# Named functions, no lambdas, in the strategies: Hypothesis would parse lambda sources to describe them.
def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=40),
    _containers,
    max_leaves=10,
)


class _Length:
    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def __call__(self, value: str) -> bool:
        return self.low <= len(value) <= self.high


def _merge(pair: tuple[dict, dict]) -> dict:
    return {**pair[1], **pair[0]}


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = SPEC["components"]["schemas"][name]
    return schema


def from_schema(schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values fitting a (JSON Schema) schema, mostly: bounds are kept, patterns drawn from."""
    s = _resolve(schema)
    if "const" in s:
        return st.just(s["const"])
    if "enum" in s:
        return st.sampled_from(s["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in s:
            return st.one_of([from_schema(x, depth) for x in s[key]])
    kind = s.get("type")
    if kind == "string":
        low, high = s.get("minLength", 0), s.get("maxLength", 64)
        options = [st.text(min_size=low, max_size=min(high, 40))]
        if "pattern" in s:
            options.append(st.from_regex(s["pattern"], fullmatch=True).filter(_Length(low, high)))
        if high < 70_000:
            options.append(st.just("x" * (high + 1)))  # one over the limit
        return st.one_of(options)
    if kind == "integer":
        return st.integers(min_value=s.get("minimum"), max_value=s.get("maximum"))
    if kind == "number":
        return st.floats(allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(from_schema(s.get("items", {}), depth + 1), max_size=min(s.get("maxItems", 4), 4))
    if kind == "object" or "properties" in s:
        if depth > 3:
            return st.just({})
        props = s.get("properties", {})
        required = [k for k in props if k in s.get("required", [])]
        optional = {k: from_schema(v, depth + 1) for k, v in props.items() if k not in required}
        base = st.fixed_dictionaries({k: from_schema(props[k], depth + 1) for k in required}, optional=optional)
        extra = s.get("additionalProperties")
        if isinstance(extra, dict):
            return st.tuples(
                base, st.dictionaries(st.text(min_size=1, max_size=10), from_schema(extra, depth + 1), max_size=3)
            ).map(_merge)
        return base
    return json_values


@st.composite
def mutated(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    """A body from the schema, then (often) broken: a field dropped, added or retyped."""
    value = draw(from_schema(schema))
    if isinstance(value, dict) and draw(st.booleans()):
        how = draw(st.sampled_from(["drop", "add", "retype"]))
        if how == "drop" and value:
            value.pop(draw(st.sampled_from(sorted(value))))
        elif how == "add":
            value[draw(st.text(max_size=12))] = draw(json_values)
        elif how == "retype" and value:
            value[draw(st.sampled_from(sorted(value)))] = draw(json_values)
    return value


def _ids(world: World, name: str) -> list[str]:
    """Ids that exist (most requests should get past the 404s), by path parameter."""
    return {
        "room_id": ["r1", "r1", "r-cato"],
        "company_id": ["acme", "bolt", "cato"],
        "agent_id": ["a1", "b1"],
        "task_id": [world.ids["task"]],
        "approval_id": ["run-x:0", "r1:0"],
        "token_id": ["0123456789abcdef"],
        "run_id": ["run-x"],
    }.get(name, ["r1"])


ODD_IDS = ["..", "%2F", "a/b", " ", "\u00e9", "x" * 129, "-lead", "a:b:c", "null"]


@st.composite
def requests(draw: st.DrawFn, world: World) -> dict[str, Any]:
    method, template, op = draw(st.sampled_from(OPERATIONS))
    path = template
    for name in re.findall(r"{(\w+)}", template):
        kind = draw(st.integers(0, 9))
        if kind < 7:
            value = draw(st.sampled_from(_ids(world, name)))
        elif kind < 8:
            value = draw(st.sampled_from(ODD_IDS))
        elif kind < 9:
            value = draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,20}", fullmatch=True))
        else:
            value = draw(st.text(min_size=1, max_size=200))
        path = path.replace("{" + name + "}", quote(value, safe=""))
    query = {}
    for p in op.get("parameters", []):
        if p.get("in") == "query" and draw(st.booleans()):
            query[p["name"]] = str(draw(st.one_of(from_schema(p.get("schema", {})), st.text(max_size=20))))
    if query:
        path += "?" + "&".join(f"{quote(k)}={quote(v, safe='')}" for k, v in query.items())
    raw = b""
    body_schema = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body_schema is not None or draw(st.integers(0, 9)) == 0:
        kind = draw(st.integers(0, 9))
        if kind < 7 and body_schema is not None:
            raw = json.dumps(draw(mutated(body_schema))).encode()
        elif kind < 9:
            raw = json.dumps(draw(json_values)).encode()
        else:
            raw = draw(st.binary(max_size=64))
    headers = {}
    if method == "POST" and draw(st.booleans()):
        headers["Idempotency-Key"] = draw(st.one_of(st.text(max_size=300), st.uuids().map(str)))
    caller = draw(st.sampled_from(["ann", "ann", "bob", "bob", "carl", "admin", "admin", None, "junk"]))
    return {"method": method, "path": path, "raw": raw, "headers": headers, "caller": caller}


def test_no_request_gets_a_5xx(light_world: World, stack_env) -> None:
    stack = stack_env[0]
    seen: dict[int, int] = {}
    succeeded: set[str] = set()  # methods with a 2xx answer

    @settings(
        max_examples=CASES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(req=requests(light_world))
    def check(req: dict[str, Any]) -> None:
        token = light_world.tokens.get(req["caller"], "qyt_junk_token") if req["caller"] else None
        r = light_world.api.call(req["method"], req["path"], token, raw=req["raw"], headers=req["headers"])
        seen[r.status] = seen.get(r.status, 0) + 1
        if r.status < 300:
            succeeded.add(req["method"])
        assert r.status < 500, (req, r.status, r.body)
        if r.status >= 400:
            assert isinstance(r.body, dict) and (r.body.get("error") or r.body.get("message")), (req, r.body)

    with stack.paused():  # runs are not what is tested here: keep moto to the requests
        check()
    print("statuses", sorted(seen.items()), "2xx methods", sorted(succeeded))
    assert sum(seen.values()) >= CASES
    # The requests get past validation to the handlers' success paths, reads and writes alike, and
    # to several distinct errors. (Which 2xx codes show up depends on the draws, which change with
    # every new operation in the document: the methods are what matters.)
    assert "GET" in succeeded and len(succeeded - {"GET"}) >= 2, (succeeded, seen)
    assert len([s for s in seen if s >= 400]) >= 4, seen


# ----------------------------------------------------------------------------- schemathesis (issue 10)
#: Cases of the schemathesis runs: a seeded few in `make test`; `make fuzz` sets QUAY_FUZZ_CASES.
FUZZ_CASES = int(os.environ.get("QUAY_FUZZ_CASES") or 120)
FUZZ_SEED = None if os.environ.get("QUAY_FUZZ_RANDOM") else 10


def _known_ids(world: World) -> dict[str, list[str]]:
    return {
        "room_id": [world.ids.get("room", "r1")],
        "company_id": ["acme"],
        "agent_id": ["a1"],
        "task_id": [world.ids["task"]],
        "run_id": ["run-x"],
        "approval_id": ["run-x:0"],
        "token_id": ["0123456789abcdef"],
    }


def test_schemathesis_through_the_handler(light_world: World, stack_env) -> None:
    """Every operation of the served OpenAPI document, valid and invalid data, through the API
    Gateway emulation to the deployed handler: 0 5xx, every status and body the document
    declares, most cases authenticated (they reach the handler)."""
    stack = stack_env[0]
    with stack.paused():
        report = fuzz(
            cases=FUZZ_CASES,
            token=light_world.tokens["ann"],
            ids=_known_ids(light_world),
            app=gateway_wsgi(light_world.api.gateway),
            seed_value=FUZZ_SEED,
        )
    print("\n" + report.render("schemathesis through the handler"))
    assert report.five_xx == 0 and report.failures == [], "\n".join(report.failures[:20])
    assert report.cases >= FUZZ_CASES * 0.8, report.cases
    assert report.reached_handler >= report.cases * 0.6, (report.reached_handler, report.cases)
    assert len(report.statuses) == len(json.loads(openapi_json())["paths"]) or len(report.statuses) >= 30


FUZZ_HTTP_CASES = int(os.environ.get("QUAY_FUZZ_HTTP_CASES") or 40)
DEV_ADMIN = "qyt_admin_fuzz_http_0001"


@pytest.fixture(scope="module")
def dev_world(tmp_path_factory) -> Iterator[tuple[str, str, dict[str, list[str]]]]:
    """A real `quay dev` process (its HTTP server, gateway and moto Lambda), seeded over HTTP:
    (url, ann's token, ids that exist)."""
    from quaycli.client import QuayClient
    from quaydev import quay_dev

    with quay_dev(
        tmp_path_factory.mktemp("quay-dev-fuzz"), admin_token=DEV_ADMIN, env={"POWERTOOLS_LOG_LEVEL": "CRITICAL"}
    ) as url:
        admin = QuayClient(url, DEV_ADMIN)
        admin.create_company("acme", ["ann"])
        admin.create_company("bolt", ["bob"])
        ann = QuayClient(url, admin.issue_token("acme", "ann")["token"])
        room = ann.create_room("r1", ["bolt"])["id"]
        ann.register_agent("a1", "anthropic", "claude-local", api_key="sk-acme-local-0001")
        ann.add_agent(room, "a1")
        task = ann.call("POST", f"/rooms/{room}/tasks", {"to": "a1", "title": "t"})["id"]
        ids = {
            "room_id": [room],
            "company_id": ["acme"],
            "agent_id": ["a1"],
            "task_id": [task],
            "run_id": ["run-x"],
            "approval_id": ["run-x:0"],
            "token_id": ["0123456789abcdef"],
        }
        yield url, str(ann.token), ids


def test_schemathesis_through_quay_dev_over_http(dev_world) -> None:
    """The same fuzzing through the real HTTP path: `quay dev`'s HTTP server, its API Gateway
    emulation (authorizer first) and the deployed handlers on moto's Lambda."""
    url, token, ids = dev_world
    report = fuzz(cases=FUZZ_HTTP_CASES, token=token, ids=ids, base_url=url, seed_value=FUZZ_SEED)
    print("\n" + report.render("schemathesis through quay dev over HTTP"))
    assert report.five_xx == 0 and report.failures == [], "\n".join(report.failures[:20])
    assert report.cases >= FUZZ_HTTP_CASES * 0.8, report.cases
    assert report.reached_handler >= report.cases * 0.6, (report.reached_handler, report.cases)
