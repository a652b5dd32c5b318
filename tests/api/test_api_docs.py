"""docs/api.md's error table is what the API answers (issue 10): every row is a code of the
code's one error mapping (quayutec.api.errors.ERRORS) with its status, every code has its row,
and the OpenAPI document declares the same shape for every error of every route."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from quayutec.api.app import openapi_json
from quayutec.api.errors import _CODES, ERRORS, code_of

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
DESIGN = DOC.parent / "design.md"


def _table() -> dict[str, tuple[int, bool]]:
    text = DOC.read_text()
    section = text[text.index("## Errors") :]
    section = section[: section.index("\n## ", 5)]
    rows: dict[str, tuple[int, bool]] = {}
    for line in section.splitlines():
        m = re.match(r"^\| (\d{3}) \| (.+?) \| (.+) \|$", line)
        if m:
            for code in re.findall(r"`([a-z_]+)`", m.group(2)):
                assert code not in rows, f"{code} has two rows"
                rows[code] = (int(m.group(1)), m.group(3).rstrip().endswith("(gateway)"))
    return rows


def test_the_error_table_is_the_codes_error_mapping() -> None:
    rows = _table()
    assert rows == {code: (e.status, e.gateway) for code, e in ERRORS.items()}


def test_every_exception_maps_to_a_documented_code() -> None:
    for cls, code in _CODES:
        assert code in ERRORS, code
        exc = cls.__new__(cls)
        assert code_of(exc) in ERRORS
        assert ERRORS[code].status == getattr(cls, "http_status", ERRORS[code].status), (cls, code)


def test_the_openapi_document_declares_every_error_in_the_one_shape() -> None:
    doc = json.loads(openapi_json())
    assert set(doc["components"]["schemas"]["Error"]["properties"]["error"]["enum"]) == set(ERRORS)
    for path, item in doc["paths"].items():
        for method, op in item.items():
            declared = {int(s) for s in op["responses"] if s.startswith(("4", "5"))}
            assert {400, 404, 429, 500, 502, 503, 504} <= declared, (method, path, declared)
            if "requestBody" in op:
                assert {413, 415, 422} <= declared, (method, path)
            for status in declared:
                schema = op["responses"][str(status)]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/Error"}, (method, path, status)
            if method == "post":
                assert any(p["name"] == "Idempotency-Key" and p["in"] == "header" for p in op["parameters"])


def test_the_openapi_document_cites_only_sections_of_docs_design_md() -> None:
    # The models' docstrings become the schemas' descriptions as they are, with no rewriting:
    # what they cite must be a document the repository holds, named so a reader of the OpenAPI
    # document can find it ("docs/design.md §n"), and a section that exists.
    text = json.dumps(json.loads(openapi_json()), ensure_ascii=False)
    sections = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", DESIGN.read_text(), re.M))
    cited = re.findall(r"docs/design\.md (§\d+(?:\.\d+)?(?:, §\d+(?:\.\d+)?)*)", text)
    assert cited, "the descriptions cite docs/design.md"
    for refs in cited:
        for number in re.findall(r"§(\d+(?:\.\d+)?)", refs):
            assert number in sections, f"docs/design.md has no §{number}"
    # every § in the document is one of those citations: none names a document by a short name
    assert text.count("§") == sum(refs.count("§") for refs in cited), re.findall(
        r".{30}(?<!docs/design\.md )§.{10}", text
    )
    assert (
        "One wake: an agent woken by a message or task event (docs/design.md §3). Carried"
        in json.loads(text)["components"]["schemas"]["Wake"]["description"]
    )
