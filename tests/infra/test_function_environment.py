"""Settings at synth and at cold start: cdk.json's context applies to the tested template, a bad
context value fails synth naming its key, and each function gets (and validates) only the
environment variables it reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from quayutec import resources as R
from quayutec import settings as S
from quayutec.errors import Misconfigured

REPO_ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ cdk.json applies
def test_tested_template_has_cdk_json_feature_flags(resources):
    """@aws-cdk/aws-iam:minimizePolicies (cdk.json) merges statements with the same effect,
    actions and conditions; an app synthesized without cdk.json's context keeps them apart."""
    assert json.loads((REPO_ROOT / "cdk.json").read_text())["context"]["@aws-cdk/aws-iam:minimizePolicies"] is True
    duplicates = []
    for logical_id, res in resources.items():
        if res["Type"] != "AWS::IAM::Policy":
            continue
        seen = set()
        for st in res["Properties"]["PolicyDocument"]["Statement"]:
            actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
            key = (tuple(sorted(actions)), st["Effect"], json.dumps(st.get("Condition"), sort_keys=True))
            if key in seen:
                duplicates.append((logical_id, key))
            seen.add(key)
    assert not duplicates


def test_app_refuses_to_run_outside_the_cdk_cli():
    result = subprocess.run(
        [sys.executable, "infra/app.py"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode != 0 and "CDK CLI" in result.stderr


# ------------------------------------------------------------------ synth-time validation
def _settings(**context):
    from aws_cdk import App

    from quayinfra.config import Settings

    return Settings.from_context(App(context=context).node)


@pytest.mark.parametrize(
    "key, value, env",
    [
        ("recentMessages", "0", "RECENT_MESSAGES"),
        ("memoryLines", "5000", "MEMORY_LINES"),
        ("hopLimit", "many", "HOP_LIMIT"),
        ("filePassages", "-1", "FILE_PASSAGES"),
    ],
)
@pytest.mark.unit
def test_a_value_the_runtime_model_refuses_fails_synth_naming_the_key(key, value, env):
    from quayinfra.config import SettingsError

    with pytest.raises(SettingsError, match=rf"context {key}='{value}' \({env}\)"):
        _settings(**{key: value})
    with pytest.raises(ValidationError):  # the same refusal a function would make at cold start
        S.Settings.model_validate(
            {**{f.alias: "x" for f in S.Settings.model_fields.values() if f.is_required()}, env: value}
        )


# ------------------------------------------------------------------ one model per function
def _full_env() -> dict[str, str]:
    env = {**R.SETTING_DEFAULTS, R.STATE_MACHINE_ENV: "arn:aws:states:r:1:stateMachine:m"}
    for t in R.TABLES:
        env[t.env_var] = t.default_name
    env[R.RUN_DATA_BUCKET.env_var] = R.RUN_DATA_BUCKET.default_name
    env[R.FILES_BUCKET.env_var] = R.FILES_BUCKET.default_name
    env[R.WAKE_QUEUE.env_var] = "https://sqs/q"
    return env


@pytest.mark.parametrize("fdef", R.FUNCTIONS, ids=lambda f: f.logical_id)
@pytest.mark.unit
def test_each_function_validates_only_what_it_reads(fdef):
    model = S.settings_model(fdef.logical_id)
    assert model.__name__ == f"{fdef.logical_id}Settings"
    assert {S.Settings.model_fields[n].alias for n in model.model_fields} == set(fdef.reads)
    env = {k: v for k, v in _full_env().items() if k in R.environment_of(fdef)}
    with S.function_environment({**env, S.HANDLER_ENV: fdef.handler}):
        S.get_settings.cache_clear()
        settings = S.get_settings()
        assert type(settings) is model
    undeclared = set(S.Settings.model_fields) - set(model.model_fields)
    for name in undeclared:  # reading a setting it does not declare fails, locally too
        with pytest.raises(AttributeError):
            getattr(settings, name)
    required = [v for v in fdef.reads if v not in R.OPTIONAL_ENVS]
    assert required
    for missing in required:  # deployed without a variable it reads: fails at cold start
        partial = {k: v for k, v in env.items() if k != missing}
        with S.function_environment({**partial, S.HANDLER_ENV: fdef.handler}):
            S.get_settings.cache_clear()
            with pytest.raises(Misconfigured, match=rf"^misconfigured: {missing} \(missing\)$"):
                S.get_settings()
    S.get_settings.cache_clear()


def _api_event(method: str, path: str, headers: dict[str, str] | None = None, body: str | None = None) -> dict:
    """The Powertools sample REST proxy event (tests/events) for ``method path``, past the authorizer."""
    event = json.loads((REPO_ROOT / "tests" / "events" / "powertools-apiGatewayProxyEvent.json").read_text())
    headers = {"Content-Type": "application/json", **(headers or {})}
    event.update(
        {
            "httpMethod": method,
            "path": path,
            "resource": "/{proxy+}",
            "headers": headers,
            "multiValueHeaders": {k: [v] for k, v in headers.items()},
            "queryStringParameters": None,
            "multiValueQueryStringParameters": None,
            "isBase64Encoded": False,
            "body": body,
        }
    )
    event["requestContext"].update(
        {"httpMethod": method, "path": path, "authorizer": {"company": "acme", "member": "ann", "admin": "false"}}
    )
    return event


@pytest.mark.parametrize("idempotency_key", [None, "k-misconfigured"], ids=["plain", "idempotent"])
@pytest.mark.parametrize("missing", [R.ROOM_TABLE.env_var, R.IDEMPOTENCY_TABLE.env_var])
@pytest.mark.unit
def test_the_api_without_a_setting_says_misconfigured_not_the_callers_fault(missing, idempotency_key, caplog):
    """A deployed API missing a variable it reads answers 500 "misconfigured: NAME" and logs it
    for the operator: never a 422 that blames the caller's request."""
    from quayutec.handlers import api

    fdef = R.FUNCTIONS_BY_HANDLER[api.__name__ + ".handler"]
    env = {k: v for k, v in _full_env().items() if k in R.environment_of(fdef) and k != missing}
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    event = _api_event("POST", "/rooms/r1/messages", headers, json.dumps({"text": "hello"}))
    with S.function_environment({**env, S.HANDLER_ENV: fdef.handler}):
        S.get_settings.cache_clear()
        try:
            out = api.handler(event, _LambdaContext())
        finally:
            S.get_settings.cache_clear()
    assert out["statusCode"] == 500, out
    body = json.loads(out["body"])
    assert body["error"] == "misconfigured"
    assert body["message"] == f"misconfigured: {missing} (missing)"
    assert missing in caplog.text


class _LambdaContext:
    function_name = "ApiFunction"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:ApiFunction"
    aws_request_id = "req-misconfigured"


@pytest.mark.unit
def test_reads_match_the_resources_each_function_touches():
    """A table, bucket or queue a function reads the name of is one its role may use."""
    by_touch = {
        "room": R.ROOM_TABLE.env_var,
        "ledger": R.LEDGER_TABLE.env_var,
        "claims": R.CLAIM_TABLE.env_var,
        "idempotency": R.IDEMPOTENCY_TABLE.env_var,
        "rundata": R.RUN_DATA_BUCKET.env_var,
        "files": R.FILES_BUCKET.env_var,
        "index": R.FILES_BUCKET.env_var,
    }
    for fdef in R.FUNCTIONS:
        touched = {by_touch[t.split(":")[0]] for t in fdef.touches if t.split(":")[0] in by_touch}
        names = {v for v in fdef.reads if v in R.RESOURCE_ENVS} - {R.WAKE_QUEUE.env_var, R.STATE_MACHINE_ENV}
        assert names <= touched, (fdef.logical_id, names - touched)
        assert (R.WAKE_QUEUE.env_var in fdef.reads) == ("queue:send" in fdef.touches)
        assert (R.STATE_MACHINE_ENV in fdef.reads) == ("states:start" in fdef.touches)


@pytest.mark.unit
def test_outside_a_function_the_full_model_applies():
    with S.function_environment(_full_env()):
        S.get_settings.cache_clear()
        assert type(S.get_settings()) is S.Settings
    S.get_settings.cache_clear()
