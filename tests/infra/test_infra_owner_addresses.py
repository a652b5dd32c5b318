"""Issue 10 finding 3: loopback owner addresses are a local-stack setting only. The synthesized
template never sets ALLOW_LOOPBACK_MODEL_URLS on any function (so the deployed API refuses
loopback base URLs at registration and CallModel refuses them after DNS resolution), while the
local stack turns it on."""

from __future__ import annotations

import pytest

from quayutec import resources as R


def test_the_deployed_stack_never_allows_loopback_model_urls(resources: dict) -> None:
    functions = {k: v for k, v in resources.items() if v["Type"] == "AWS::Lambda::Function"}
    assert functions
    for logical_id, fn in functions.items():
        env = ((fn.get("Properties") or {}).get("Environment") or {}).get("Variables") or {}
        assert R.ALLOW_LOOPBACK_ENV not in env, logical_id
    assert R.ALLOW_LOOPBACK_ENV not in R.SETTING_DEFAULTS


@pytest.mark.unit
def test_the_local_stack_allows_them_and_its_callers_read_the_setting() -> None:
    from quaylocal.stack import local_environment

    assert local_environment()[R.ALLOW_LOOPBACK_ENV] == "true"
    assert local_environment({R.ALLOW_LOOPBACK_ENV: "false"})[R.ALLOW_LOOPBACK_ENV] == "false"
    for fid in ("ApiFunction", "CallModelFunction"):
        assert R.ALLOW_LOOPBACK_ENV in R.FUNCTIONS_BY_ID[fid].reads
