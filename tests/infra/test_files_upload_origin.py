"""Uploads from the room page on AWS (issue 12 item 2, design §8): the presigned POST the API signs
goes to the files bucket's regional origin, the page's connect-src names that same origin, and
the bucket's CORS answers the page's cross-origin POST (and the presigned GET)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from infra_helpers import of_type

from quayutec import resources as R
from quayutec.api.routes.page import upload_origins
from quayutec.dal.files import regional_s3


def _api_function(resources) -> dict:
    [fn] = [
        f["Properties"]
        for f in of_type(resources, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "quayutec.handlers.api.handler"
    ]
    return fn


def test_files_bucket_cors_answers_the_pages_upload(resources) -> None:
    rules = resources[R.FILES_BUCKET.logical_id]["Properties"]["CorsConfiguration"]["CorsRules"]
    post = [r for r in rules if "POST" in r["AllowedMethods"]]
    assert post and all("GET" in r["AllowedMethods"] for r in post)
    # any origin: the page's (an execute-api or custom domain) is not known to the bucket, and
    # the signed policy, not the origin, is what grants the upload
    assert post[0]["AllowedOrigins"] == ["*"] and post[0]["AllowedHeaders"] == ["*"]
    for bdef in R.BUCKETS:
        if bdef is not R.FILES_BUCKET:
            assert "CorsConfiguration" not in resources[bdef.logical_id]["Properties"]


def test_api_function_knows_the_files_bucket(resources) -> None:
    env = _api_function(resources)["Environment"]["Variables"]
    assert env[R.FILES_BUCKET.env_var] == {"Ref": R.FILES_BUCKET.logical_id}
    assert "FILES_ENDPOINT_URL" not in env  # quay dev only


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1"])
@pytest.mark.unit
def test_the_signed_upload_url_is_an_origin_the_page_may_connect_to(region: str, monkeypatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example")
    bucket = "quayutec-dev-filesbucket-1a2b3c4d5e6f"  # as CloudFormation names it
    post = regional_s3(region).generate_presigned_post(Bucket=bucket, Key="uploads/r1/f1")
    get = regional_s3(region).generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "uploads/r1/f1"})
    origins = upload_origins({R.FILES_BUCKET.env_var: bucket, "AWS_REGION": region})
    for url in (post["url"], get):
        parts = urlsplit(url)
        assert f"{parts.scheme}://{parts.netloc}" in origins, (url, origins)
    assert origins == [f"https://{bucket}.s3.{region}.amazonaws.com"]
