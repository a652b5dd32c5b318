"""The room page's static files (issue 12, design §9) as the API serves them, through quay dev's
gateway: public (no token) with a strict Content-Security-Policy and no inline script or style;
every other route still needs the token; the page's code builds DOM from text only and uses
relative URLs."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from quaylocal.dev import Gateway, direct_invoke
from quayutec.api.public import PUBLIC_ROUTES, is_public
from quayutec.api.routes.page import STATIC_DIR, content_security_policy, upload_origins

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")


@pytest.fixture(scope="module")
def gateway() -> Gateway:
    return Gateway(direct_invoke())


def _directives(csp: str) -> dict[str, list[str]]:
    return {p.split()[0]: p.split()[1:] for p in (x.strip() for x in csp.split(";")) if p}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_text += data


def test_the_page_is_public_with_a_strict_policy(gateway: Gateway) -> None:
    page = gateway.handle("GET", "/app/", {})  # no Authorization header
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    csp = _directives(page.headers["Content-Security-Policy"])
    assert csp["default-src"] == ["'self'"]
    assert csp["script-src"] == ["'self'"] and csp["style-src"] == ["'self'"]
    assert csp["connect-src"][0] == "'self'"
    assert csp["object-src"] == ["'none'"] and csp["frame-ancestors"] == ["'none'"] and csp["base-uri"] == ["'none'"]
    assert (
        "unsafe" not in page.headers["Content-Security-Policy"] and "*" not in page.headers["Content-Security-Policy"]
    )
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert page.headers["X-Frame-Options"] == "DENY" and page.headers["Referrer-Policy"] == "no-referrer"

    tags = _Tags()
    tags.feed(page.body.decode())
    assert tags.script_text.strip() == "", "inline script"
    assert not [t for t, _ in tags.tags if t == "style"], "inline <style>"
    for tag, attrs in tags.tags:
        assert "style" not in attrs, f"style attribute on <{tag}>"
        assert not [a for a in attrs if a.startswith("on")], f"inline handler on <{tag}>"
        for name in ("src", "href", "action"):
            url = attrs.get(name)
            if url is not None and not url.startswith("#"):
                assert not re.match(r"^([a-z]+:|/)", url), f"<{tag} {name}={url}> is not relative"
    assert [a["src"] for t, a in tags.tags if t == "script"] == ["app.js"]

    assert [a["href"] for t, a in tags.tags if t == "link" and a.get("rel") == "icon"] == ["icon.svg"]
    pages = (("app.js", "text/javascript"), ("app.css", "text/css"), ("index.html", "text/html"))
    for name, kind in (*pages, ("icon.svg", "image/svg+xml")):
        asset = gateway.handle("GET", f"/app/{name}", {})
        assert asset.status == 200 and asset.headers["Content-Type"].startswith(kind), name
        assert "Content-Security-Policy" in asset.headers and asset.headers["X-Content-Type-Options"] == "nosniff"


def test_app_without_slash_redirects_relatively(gateway: Gateway) -> None:
    moved = gateway.handle("GET", "/app", {})
    assert moved.status == 308 and moved.headers["Location"] == "app/"  # /{stage}/app -> /{stage}/app/


@pytest.mark.parametrize(
    ("path", "statuses"),
    [
        ("/app/nope.js", (401, 404)),
        ("/app/.hidden.js", (401, 404)),
        ("/app/public.py", (401, 404)),
        ("/app/..%2Fpublic.py", (401, 404)),
        ("/app/app.js%00.css", (400,)),  # a NUL in the path is refused before any route (handlers.api)
    ],
)
def test_only_shipped_files_are_served(gateway: Gateway, path: str, statuses: tuple[int, ...]) -> None:
    answer = gateway.handle("GET", path, {})
    assert answer.status in statuses, (path, answer.status)
    assert b"import" not in answer.body


def test_every_other_route_still_needs_the_token(gateway: Gateway) -> None:
    for method, path in (
        ("GET", "/rooms"),
        ("POST", "/app/"),
        ("GET", "/app/x/y"),
        ("GET", "/runs/r1"),
        ("POST", "/rooms"),
    ):
        assert not is_public(method, path)
        assert gateway.handle(method, path, {}).status == 401, (method, path)
    assert {p for _, p in PUBLIC_ROUTES} == {"/", "/openapi.json", "/docs", "/app", "/app/{asset}"}


@pytest.mark.unit
def test_upload_origin_is_the_only_extra_connect_source() -> None:
    assert _directives(content_security_policy())["connect-src"] == ["'self'"]
    origins = upload_origins({"FILES_BUCKET": "quayutec-dev-files", "AWS_REGION": "eu-west-1"})
    assert origins == ["https://quayutec-dev-files.s3.eu-west-1.amazonaws.com"]
    assert _directives(content_security_policy(origins))["connect-src"] == ["'self'", *origins]
    assert upload_origins({"FILES_BUCKET": "bad bucket; script-src *", "AWS_REGION": "eu-west-1"}) == []


@pytest.mark.unit
def test_the_page_code_writes_text_only_and_relative_urls() -> None:
    code = (STATIC_DIR / "app.js").read_text()
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        'setTimeout("',
        "localStorage",
        ".style.",
    ):
        assert sink not in code, sink
    assert "sessionStorage" in code and "Authorization" in code
    assert not re.search(r"""["'`](https?:)?//""", code), "an absolute URL in app.js"
    assert not re.search(r"""fetch\(\s*["'`]/""", code), "a root-relative fetch in app.js"
    assert {p.name for p in Path(STATIC_DIR).iterdir()} == {"index.html", "app.js", "app.css", "icon.svg"}


@pytest.mark.unit
def test_the_page_writes_no_glyph_a_font_may_lack() -> None:
    """Issue 24 item 6: ⏸, ✓, ✗ and ■ showed as empty boxes in fonts without them. The page's
    files hold only text every font has (ASCII, Latin-1, general punctuation: · … → “ ”); its
    icons are inline SVG, and the service's note glyphs are matched by escapes, never written."""
    for path in STATIC_DIR.iterdir():
        rare = sorted(
            {
                c
                for c in path.read_text(encoding="utf-8")
                if ord(c) > 0x2000 and not 0x2010 <= ord(c) <= 0x2027 and c != "→"
            }
        )
        assert rare == [], f"{path.name}: {' '.join(f'U+{ord(c):04X} {c}' for c in rare)}"
    js = (STATIC_DIR / "app.js").read_text()
    assert "createElementNS" in js and 'getElementById("svg-ns").namespaceURI' in js
