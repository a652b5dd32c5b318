"""Issue 10 finding 3, issue 27 item 3: loopback owner model addresses are the local engine's
switch, passed to the deps its stacks build, never a setting of a deployed function. No function
of the synthesized template carries an ALLOW_LOOPBACK_MODEL_URLS variable, the deployed settings
model has no such field (so nothing in a function's environment can turn it on), and deps built as
a deployed function builds them refuse a loopback base URL at registration and at request time;
the local stack's deps allow it (the local provider server is on 127.0.0.1)."""

from __future__ import annotations

import pytest

from quayutec import resources as R

NAME = "ALLOW_LOOPBACK_MODEL_URLS"


def test_no_deployed_function_carries_a_loopback_switch(resources: dict) -> None:
    functions = {k: v for k, v in resources.items() if v["Type"] == "AWS::Lambda::Function"}
    assert functions
    for logical_id, fn in functions.items():
        env = ((fn.get("Properties") or {}).get("Environment") or {}).get("Variables") or {}
        assert not [k for k in env if "LOOPBACK" in k.upper()], logical_id


@pytest.mark.unit
def test_the_deployed_settings_have_no_loopback_field() -> None:
    from quayutec.settings import FIELD_BY_ENV, Settings, settings_model

    assert NAME not in R.ENVIRONMENT_VARIABLES and NAME not in R.SETTING_DEFAULTS and NAME not in R.OPTIONAL_ENVS
    assert not hasattr(R, "ALLOW_LOOPBACK_ENV")
    assert NAME not in FIELD_BY_ENV and not [f for f in Settings.model_fields if "loopback" in f]
    for fdef in R.FUNCTIONS:
        assert NAME not in fdef.reads, fdef.logical_id
        assert not [f for f in settings_model(fdef.logical_id).model_fields if "loopback" in f], fdef.logical_id
    # Set in the environment anyway, it is ignored: the settings hold no such value.
    assert not hasattr(Settings.model_validate({**_names(), NAME: "true"}), "allow_loopback_model_urls")


def _names() -> dict[str, str]:
    return {t.env_var: t.default_name for t in R.TABLES} | {b.env_var: b.default_name for b in R.BUCKETS}


@pytest.mark.unit
def test_deployed_style_deps_refuse_loopback_and_the_local_engines_allow_it() -> None:
    from quaylocal.stack import LocalStack
    from quayutec import seams
    from quayutec.deps import build_deps
    from quayutec.providers.egress import url_problem
    from quayutec.settings import Settings

    deployed = build_deps(Settings.model_validate({**_names(), NAME: "true"}))  # as a function builds them
    assert deployed.allow_loopback_model_urls is False
    url = "http://127.0.0.1:8999/v1"
    assert url_problem(url, allow_loopback=deployed.allow_loopback_model_urls)
    local = LocalStack()
    assert local.allow_loopback_model_urls is True
    (own,) = [i for i in local.instruments if i.deps is not None]
    assert own.deps is not None and own.deps(deployed).allow_loopback_model_urls is True
    assert url_problem(url, allow_loopback=own.deps(deployed).allow_loopback_model_urls) is None
    assert not [i for i in LocalStack(allow_loopback_model_urls=False).instruments if i.deps is not None]
    assert not seams.is_installed(own)  # installed only while the stack runs
