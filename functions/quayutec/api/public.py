"""The routes served without the authorizer, defined once: the CDK app
(:mod:`quayinfra.api`) declares them with no authorization, ``quay dev``'s gateway
(:mod:`quaylocal.dev`) skips the authorizer for them and the API handler resolves them without a
caller. Everything else needs the bearer token. Pure data: importing this touches no AWS API.

* ``GET /openapi.json`` and ``GET /docs``: the OpenAPI document and Swagger UI.
* ``GET /``: a browser is redirected to the room page; any other client gets the JSON 401.
* ``GET /app`` (a redirect to ``app/``), ``GET /app/`` and ``GET /app/{asset}``: the room page's
  static files (design §9). The page holds no data: every data call it makes carries the token.
"""

from __future__ import annotations

import re

#: (method, API Gateway resource path). API Gateway matches ``/app/`` to the ``/app`` resource.
PUBLIC_ROUTES: tuple[tuple[str, str], ...] = (
    ("GET", "/"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/app"),
    ("GET", "/app/{asset}"),
)

#: One file name of the room page (no directories, no dot files).
ASSET_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]*\.[a-z0-9]+"
_PATTERNS = tuple(
    (method, re.compile("^" + re.escape(path).replace(re.escape("{asset}"), "[^/]+") + "/?$"))
    for method, path in PUBLIC_ROUTES
)


def is_public(method: str, path: str) -> bool:
    """Whether ``method path`` (a request path, without the stage) is served without the token."""
    method = method.upper()
    return any(m == method and p.match(path) for m, p in _PATTERNS)
