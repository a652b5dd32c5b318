"""The public routes of the deployed API (issue 12): the room page's static files (``GET /app``,
``GET /app/{asset}``), the OpenAPI document and Swagger UI have no authorizer, exactly as
:data:`quayutec.api.public.PUBLIC_ROUTES` (also used by ``quay dev``) says; every other method
keeps the bearer-token authorizer. The Lambda code asset ships the page's files."""

from __future__ import annotations

from quayutec.api.public import PUBLIC_ROUTES
from quayutec.api.routes.page import STATIC_DIR


def _paths(resources: dict) -> dict[str, str]:
    """logical id of each AWS::ApiGateway::Resource -> its full path."""
    api_resources = {k: v["Properties"] for k, v in resources.items() if v["Type"] == "AWS::ApiGateway::Resource"}

    def path_of(logical_id: str) -> str:
        props = api_resources[logical_id]
        parent = props["ParentId"]
        prefix = (
            path_of(parent["Ref"])
            if isinstance(parent, dict) and "Ref" in parent and parent["Ref"] in api_resources
            else ""
        )
        return f"{prefix}/{props['PathPart']}"

    return {k: path_of(k) for k in api_resources}


def _methods(resources: dict) -> list[tuple[str, str, dict]]:
    paths = _paths(resources)
    out = []
    for props in (v["Properties"] for v in resources.values() if v["Type"] == "AWS::ApiGateway::Method"):
        ref = props["ResourceId"]
        path = paths[ref["Ref"]] if isinstance(ref, dict) and "Ref" in ref else "/"
        out.append((props["HttpMethod"], path, props))
    return out


def test_public_routes_have_no_authorizer_and_every_other_method_keeps_it(resources) -> None:
    methods = _methods(resources)
    public = {(m, p) for m, p, props in methods if props.get("AuthorizationType") == "NONE"}
    assert public == set(PUBLIC_ROUTES)
    assert ("GET", "/app") in public and ("GET", "/app/{asset}") in public
    for method, path, props in methods:
        if (method, path) in public:
            assert "AuthorizerId" not in props
            continue
        assert props.get("AuthorizationType") == "CUSTOM", (method, path)
        assert "AuthorizerId" in props, (method, path)
    # nothing but GET on the page's resources (no POST /app/... reaches the function untokened)
    assert {m for m, p, _ in methods if p.startswith("/app")} == {"GET"}


def test_the_code_asset_ships_the_page_files(assembly, resources) -> None:
    """The API function's code asset (as CDK staged it from quayinfra.build_code) holds the page."""
    api_fn = next(v for k, v in resources.items() if v["Type"] == "AWS::Lambda::Function" and k == "ApiFunction")
    key = api_fn["Properties"]["Code"]["S3Key"]
    asset_hash = (key if isinstance(key, str) else key["Fn::Sub"]).split("/")[-1].split(".")[0]
    staged = assembly / f"asset.{asset_hash}"
    assert (staged / "quayutec" / "handlers" / "api.py").is_file(), staged
    wanted = sorted(p.name for p in STATIC_DIR.iterdir())
    assert sorted(p.name for p in (staged / "quayutec" / "api" / "static" / "app").iterdir()) == wanted
