"""The rough edges a new user hit (issue 24), each pinned: the OpenAPI document's ``servers`` are
where it is served (a deployed stage's ``/{stage}``, quay dev's root), so Swagger UI's "Try it out"
reaches the API; a browser asking for ``/`` is sent to the room page, an API client still gets the
JSON 401."""

from __future__ import annotations

import json
import re

import pytest

from quaylocal.dev import Gateway, direct_invoke
from quayutec.api.app import resolve

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")


@pytest.fixture(scope="module")
def gateway() -> Gateway:
    return Gateway(direct_invoke())


def _stage_event(path: str, stage: str = "dev") -> dict:
    """A deployed REST API's proxy event on its execute-api address: the stage is in the path."""
    return {
        "resource": path,
        "path": path,
        "httpMethod": "GET",
        "headers": {},
        "multiValueHeaders": {},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {"stage": stage, "path": f"/{stage}{path}", "httpMethod": "GET", "resourcePath": path},
        "body": None,
        "isBase64Encoded": False,
    }


def _swagger_servers(html: str) -> list[dict]:
    found = re.search(r'"servers":\s*(\[[^\]]*\])', html)
    assert found, "Swagger UI's page embeds no servers"
    return json.loads(found.group(1))


def test_quay_dev_serves_the_document_for_its_root(gateway: Gateway) -> None:
    doc = json.loads(gateway.handle("GET", "/openapi.json", {}).body)
    assert doc["servers"] == [{"url": "/"}]
    page = gateway.handle("GET", "/docs", {})
    assert page.status == 200
    assert _swagger_servers(page.body.decode()) == [{"url": "/"}]


def test_a_deployed_stage_serves_the_document_for_its_stage() -> None:
    answer = resolve(_stage_event("/openapi.json", "prod"), None)
    assert json.loads(answer["body"])["servers"] == [{"url": "/prod"}]
    page = resolve(_stage_event("/docs", "prod"), None)
    assert _swagger_servers(page["body"]) == [{"url": "/prod"}]


BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def test_a_browser_at_the_root_is_sent_to_the_room_page(gateway: Gateway) -> None:
    answer = gateway.handle("GET", "/", BROWSER)
    assert answer.status == 302 and answer.headers["Location"] == "/app/"
    staged = resolve({**_stage_event("/", "prod"), "headers": BROWSER, "multiValueHeaders": {}}, None)
    location = (staged.get("headers") or {}).get("Location") or staged["multiValueHeaders"]["Location"][0]
    assert staged["statusCode"] == 302 and location == "/prod/app/"


@pytest.mark.parametrize("headers", [{}, {"Accept": "application/json"}, {"Accept": "*/*"}])
def test_an_api_client_at_the_root_keeps_the_json_401(gateway: Gateway, headers: dict) -> None:
    answer = gateway.handle("GET", "/", headers)
    assert answer.status == 401 and answer.headers["Content-Type"].startswith("application/json")
    assert json.loads(answer.body)["error"] == "unauthenticated"
