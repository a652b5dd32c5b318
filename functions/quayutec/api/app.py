"""The room API: one Powertools ``APIGatewayRestResolver`` with validation on (pydantic request
and response models), one router per resource, the OpenAPI document at ``/openapi.json`` and
Swagger UI at ``/docs``. Errors become responses here, in one place (:mod:`quayutec.api.errors`)."""

from __future__ import annotations

import functools
import json
import threading
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from pydantic import ValidationError

from quayutec.api import errors
from quayutec.api.body import parse_json
from quayutec.api.pages import SERIALIZER
from quayutec.api.routes import (
    agents,
    approvals,
    budgets,
    changes,
    companies,
    files,
    invitations,
    members,
    memory,
    messages,
    page,
    policy,
    rooms,
    runs,
    tasks,
    tokens,
)
from quayutec.api.routes.page import served_at
from quayutec.errors import Misconfigured, QuayError

logger = Logger(child=True)

TITLE = "Quayutec room API"
DESCRIPTION = (
    "Rooms where AI agents of different companies work together. Every request carries "
    "`Authorization: Bearer <token>`; every POST accepts an `Idempotency-Key` header "
    "(a repeat returns the first response and writes nothing new). Errors are "
    '`{"error": code, "message": text, "fields": [...]}`.'
)

# Bodies are parsed by pydantic's JSON parser (bounded depth and numbers), never json.loads;
# the handler has already refused any body that does not parse (quayutec.api.body).
# Answers are serialized by api.pages.SERIALIZER: the byte bound of every page measures with it.
app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=parse_json, serializer=SERIALIZER)

for _module in (
    companies,
    tokens,
    policy,
    budgets,
    rooms,
    members,
    invitations,
    agents,
    messages,
    tasks,
    memory,
    approvals,
    runs,
    files,
    changes,
):
    app.include_router(_module.router)
app.include_router(page.router)  # the room page's static files (public: quayutec.api.public)


def _security() -> dict[str, Any]:
    """The security scheme of the document (Powertools' OpenAPI models: imported only when the
    document or Swagger UI is asked for, not at every cold start)."""
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

    return {"bearer": HTTPBearer(bearerFormat="opaque token", description="A token from `quay admin issue-token`")}


@functools.cache
def version() -> str:
    """The package's version (``[project].version`` of pyproject.toml), from its installed
    metadata: ``quayutec-{version}.dist-info`` in the function's code asset
    (:func:`quayinfra.build_code.stage_code` writes it), the editable install locally. Read the
    first time the document is asked for, not at every cold start. Raises
    ``importlib.metadata.PackageNotFoundError`` when the code carries no metadata."""
    from importlib.metadata import version as installed

    return installed("quayutec")


def openapi_json(base_path: str = "") -> str:
    """The OpenAPI document: Powertools' (from the routes' pydantic models), with what it cannot
    know added: the ``Idempotency-Key`` header of every POST and every error each route can
    answer, each in the one error shape (:func:`declare_errors`). ``base_path``: where the API
    is served (``/dev``; ``""``: the root), the document's one server, so a client of the
    document (Swagger UI's "Try it out") calls the API where it is."""
    from aws_lambda_powertools.event_handler.openapi.models import Server

    doc = json.loads(
        app.get_openapi_json_schema(
            title=TITLE,
            version=version(),
            description=DESCRIPTION,
            security_schemes=_security(),
            security=[{"bearer": []}],
            servers=[Server(url=base_path or "/")],
        )
    )
    return json.dumps(declare_errors(doc))


IDEMPOTENCY_PARAMETER = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Makes the POST safe to repeat: a repeat returns the first response and writes nothing "
    "new (scoped to the caller, method and path; kept 24 h)",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7e]+$"},
}


def error_statuses(method: str, has_body: bool, public: bool = False) -> list[int]:
    """The error statuses a route can answer, by what it takes (the rows of errors.ERRORS)."""
    wanted: set[int] = {400, 404, 500, 502, 503, 504, 429}
    if not public:
        wanted |= {401, 403, 422}
    if has_body:
        wanted |= {413, 415, 422}
    if method == "post":
        wanted |= {409, 422}
    if method in ("post", "put", "delete"):
        wanted.add(409)
    return sorted(wanted)


def declare_errors(doc: dict[str, Any]) -> dict[str, Any]:
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas["FieldProblem"] = {
        "type": "object",
        "required": ["field", "problem", "type"],
        "properties": {
            "field": {"type": "string"},
            "problem": {"type": "string"},
            "type": {"type": "string"},
            "line": {"type": "integer"},
            "column": {"type": "integer"},
        },
    }
    schemas["Error"] = {
        "type": "object",
        "required": ["error", "message", "fields"],
        "additionalProperties": False,
        "properties": {
            "error": {"type": "string", "enum": sorted(errors.ERRORS)},
            "message": {"type": "string"},
            "fields": {"type": "array", "items": {"$ref": "#/components/schemas/FieldProblem"}},
        },
    }
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for item in doc.get("paths", {}).values():
        for method, op in item.items():
            if method not in ("get", "post", "put", "delete", "patch"):
                continue
            has_body = "requestBody" in op
            if method == "post":
                op.setdefault("parameters", []).append(dict(IDEMPOTENCY_PARAMETER))
            responses = op.setdefault("responses", {})
            for status in error_statuses(method, has_body):
                codes = [c for c, e in errors.ERRORS.items() if e.status == status]
                responses[str(status)] = {
                    "description": f"{HTTPStatus(status).phrase}: " + ", ".join(f"`{c}`" for c in codes),
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                }
                if status in (409, 429, 503):
                    responses[str(status)]["headers"] = {"Retry-After": {"schema": {"type": "string"}}}
    return doc


@app.get("/openapi.json", include_in_schema=False)
def _openapi():
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=openapi_json(served_at()))


DOCS_PATH = "/docs"
_docs_lock = threading.Lock()
_docs_enabled = False


def _enable_docs() -> None:
    """Swagger UI at ``/docs`` (Powertools' ``enable_swagger``), registered the first time a
    request for ``/docs`` comes: it imports the OpenAPI models, which no other route needs."""
    global _docs_enabled
    with _docs_lock:
        if not _docs_enabled:
            app.enable_swagger(
                path=DOCS_PATH,
                title=TITLE,
                version=version(),
                description=DESCRIPTION,
                security_schemes=_security(),
                security=[{"bearer": []}],
            )
            _docs_enabled = True


def resolve(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``app.resolve``, with ``/docs`` registered first when the request is for it."""
    if not _docs_enabled and isinstance(event, dict) and str(event.get("path") or "").rstrip("/") == DOCS_PATH:
        _enable_docs()
    return app.resolve(event, context)


# ----------------------------------------------------------------------------- errors: one place
def _json(status: int, body: dict, headers: dict[str, str] | None = None) -> Response:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body, headers=headers)


@app.exception_handler(QuayError)
def _domain_error(exc: QuayError) -> Response:
    status = errors.status_of(exc)
    if isinstance(exc, Misconfigured):  # the operator's to fix: an error, with the variables
        logger.error(str(exc), extra={"error": "Misconfigured", "variables": exc.variables})
    elif status >= 500:
        logger.warning("domain error", extra={"error": type(exc).__name__})
    return _json(
        status,
        errors.error_payload(status, errors.code_of(exc), str(exc), errors.fields_of(exc)),
        errors.headers_for(exc),
    )


@app.exception_handler(RequestValidationError)
def _validation_error(exc: RequestValidationError) -> Response:
    fields = errors.field_problems(list(exc.errors()))
    return _json(422, errors.error_payload(422, "validation_error", errors.validation_message(fields), fields))


@app.exception_handler(ValidationError)
def _model_error(exc: ValidationError) -> Response:  # a domain model refused a value
    fields = errors.field_problems(exc.errors(include_input=False))
    return _json(422, errors.error_payload(422, "validation_error", errors.validation_message(fields), fields))


def allowed_methods(path: str) -> list[str]:
    """The methods some route serves ``path`` with (empty: no such path)."""
    return sorted({r.method for r in app._static_routes + app._dynamic_routes if r.rule.match(path)})


@app.exception_handler(NotFoundError)
def _no_route(exc: NotFoundError) -> Response:
    event = app.current_event
    allow = allowed_methods(event.path)
    if allow:
        return _domain_error(
            errors.MethodNotAllowed(
                f"{event.http_method} is not served on {event.path} (allowed: {', '.join(allow)})", allow
            )
        )
    return _json(404, errors.error_payload(404, "no_route", f"no route {event.http_method} {event.path}"))


@app.exception_handler(ServiceError)
def _service_error(exc: ServiceError) -> Response:
    status = exc.status_code if 400 <= exc.status_code <= 599 else 400
    return _json(status, errors.error_payload(status, "bad_request", str(exc.msg)))


@app.exception_handler(Exception)
def _unexpected(exc: Exception) -> Response:
    logger.exception("unexpected error")
    return _json(500, errors.error_payload(500, "internal_error", "internal error (logged)"))
