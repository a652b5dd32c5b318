"""The room page (design §9): static files shipped in the package (``quayutec/api/static/app``),
served at ``GET /app/`` and ``GET /app/{asset}`` without the authorizer (:mod:`quayutec.api.public`).
The page holds no data; it calls the API with the bearer token the person signs in with.

Every answer carries a strict Content-Security-Policy: scripts, styles and connections from this
origin only, no inline script or style, no framing. ``connect-src`` adds the room-files bucket's
S3 origin when the function has a files bucket (uploads go straight to S3 through a presigned URL,
design §8), and the local files endpoint on ``quay dev``."""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.errors import error_payload
from quayutec.api.public import ASSET_NAME

router = APIGatewayRouter()

STATIC_DIR = Path(__file__).resolve().parent.parent / "static" / "app"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
#: The files bucket's name and quay dev's local files endpoint (quayutec.resources: FILES_BUCKET,
#: FILES_ENDPOINT_ENV), read here as plain names.
FILES_BUCKET_ENV = "FILES_BUCKET"
FILES_ENDPOINT_ENV = "FILES_ENDPOINT_URL"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]$")
_ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$")


def upload_origins(env: dict[str, str] | None = None) -> list[str]:
    """Where the page may send room files besides its own origin: the files bucket's regional S3
    origin (presigned PUT URLs), and ``quay dev``'s local files endpoint when it has one."""
    env = dict(os.environ) if env is None else env
    out: list[str] = []
    bucket, region = env.get(FILES_BUCKET_ENV, ""), env.get("AWS_REGION", "")
    if _BUCKET.match(bucket) and _REGION.match(region):
        out.append(f"https://{bucket}.s3.{region}.amazonaws.com")
    endpoint = env.get(FILES_ENDPOINT_ENV, "").rstrip("/")
    parts = urlsplit(endpoint)
    origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""
    if origin and _ORIGIN.match(origin):
        out.append(origin)
    return out


def content_security_policy(extra_connect: list[str] | tuple[str, ...] = ()) -> str:
    connect = " ".join(("'self'", *extra_connect))
    return "; ".join(
        (
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            f"connect-src {connect}",
            "font-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        )
    )


def security_headers() -> dict[str, str]:
    return {
        "Content-Security-Policy": content_security_policy(upload_origins()),
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
        "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
    }


def _shipped() -> frozenset[str]:
    """The names of the files the package ships in the page's folder (read once, at import)."""
    if not STATIC_DIR.is_dir():
        return frozenset()
    return frozenset(
        path.name
        for path in STATIC_DIR.iterdir()
        if path.is_file() and re.fullmatch(ASSET_NAME, path.name) and path.suffix in CONTENT_TYPES
    )


#: The only names :func:`_asset` answers (and caches): any other name is a 404 without a look at
#: the disk, and never an entry in a cache (unauthenticated requests for made-up names must not
#: grow a warm function's memory).
SHIPPED_ASSETS = _shipped()


@cache
def _load(name: str) -> tuple[str, str]:
    """(content type, text) of a shipped file; called with names of :data:`SHIPPED_ASSETS` only,
    so the cache holds at most that many entries."""
    path = STATIC_DIR / name
    return CONTENT_TYPES[path.suffix], path.read_text(encoding="utf-8")


def _asset(name: str) -> tuple[str, str] | None:
    """(content type, text) of a shipped file, or None (never a path outside the folder)."""
    if name not in SHIPPED_ASSETS:
        return None
    return _load(name)


def _serve(name: str) -> Response:
    found = _asset(name)
    headers = security_headers()
    if found is None:
        return Response(
            status_code=404,
            content_type="application/json",
            headers=headers,
            body=error_payload(404, "not_found", f"no file {name!r} in the room page"),
        )
    kind, text = found
    headers["Cache-Control"] = "no-cache"
    return Response(status_code=200, content_type=kind, body=text, headers=headers)


def served_at() -> str:
    """The path prefix the current request came under: ``/{stage}`` on a deployed stage's
    execute-api address (API Gateway puts the stage in ``requestContext.path``), ``""`` at a
    root (a custom domain; ``quay dev``). Swagger UI's page (Powertools) uses the same rule."""
    ctx = router.current_event.request_context
    stage, path = ctx.stage or "", ctx.path or ""
    if stage and stage != "$default" and (path == f"/{stage}" or path.startswith(f"/{stage}/")):
        return f"/{stage}"
    return ""


def _wants_html(accept: str) -> bool:
    """Whether an ``Accept`` header names HTML (a browser's navigation), not just ``*/*``."""
    return any(
        part.split(";")[0].strip().lower() in ("text/html", "application/xhtml+xml") for part in accept.split(",")
    )


# (No return annotations: Powertools would build a response model of them.)
@router.get("/", include_in_schema=False)
def root():
    """``/``: a browser (``Accept`` names ``text/html``) is redirected (302) to the room page,
    ``{served_at}/app/``; any other client gets the gateway's JSON 401 ``unauthenticated``, as
    before the root was public (every data route needs the token)."""
    accept = str(router.current_event.headers.get("Accept") or router.current_event.headers.get("accept") or "")
    if _wants_html(accept):
        target = f"{served_at()}/app/"
        return Response(
            status_code=302,
            content_type="text/plain; charset=utf-8",
            body=target,
            headers={**security_headers(), "Location": target, "Vary": "Accept"},
        )
    return Response(
        status_code=401,
        content_type="application/json",
        headers={"Vary": "Accept"},
        body=error_payload(401, "unauthenticated", "Unauthorized"),
    )


@router.get("/app", include_in_schema=False)
def page_index():
    """``/app/``: the page. ``/app`` (Powertools matches both here): a redirect to ``app/``, relative,
    so it works under ``/{stage}/`` on API Gateway (/dev/app -> /dev/app/), and the page's own
    relative URLs resolve inside the folder."""
    path = str(router.current_event.path or "")
    if not path.endswith("/"):
        return Response(
            status_code=308,
            content_type="text/plain; charset=utf-8",
            body="app/",
            headers={**security_headers(), "Location": "app/"},
        )
    return _serve("index.html")


@router.get("/app/<asset>", include_in_schema=False)
def page_asset(asset: str):
    return _serve(asset)
