"""`quay agent register --role-arn` (docs/design.md §5), played against a real `quay dev` process: a
bedrock agent under its company's role shows the role and the company's external id (for the role's
trust policy), never a key; a role ARN of another shape is a one-line HTTP 400 that says why."""

from __future__ import annotations

import json

import pytest
from test_api_dev_server import ADMIN
from test_api_dev_server import dev_url as dev_url  # the fixture, used by name in the tests' arguments
from typer.testing import CliRunner

from quay.main import app as cli

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

ROLE = "arn:aws:iam::210987654321:role/quayutec-bedrock-fjord"


def _quay(url: str, token: str, *args: str):
    return CliRunner().invoke(cli, [*args, "--url", url, "--token", token])


def test_register_a_bedrock_agent_with_a_role(dev_url: str) -> None:
    assert _quay(dev_url, ADMIN, "admin", "create-company", "fjord", "--person", "finn").exit_code == 0
    made = _quay(dev_url, ADMIN, "admin", "issue-token", "fjord", "finn", "--json")
    finn = json.loads(made.stdout)["token"]
    args = ("agent", "register", "f1", "--provider", "bedrock", "--model", "amazon.nova-micro-v1:0")
    out = _quay(dev_url, finn, *args, "--role-arn", ROLE)
    assert out.exit_code == 0, out.output
    [line] = out.stdout.strip().splitlines()
    assert line.startswith(
        "fjord.f1  (fjord)  bedrock amazon.nova-micro-v1:0  role " + ROLE + "  external id quayutec-"
    )
    listed = json.loads(_quay(dev_url, finn, "agent", "list", "--json").stdout)
    [f1] = listed["agents"]  # a listing's --json is the API's listing shape
    assert f1["role_arn"] == ROLE and f1["external_id"] in line and f1["key_stored"] is False

    bad = _quay(dev_url, finn, "agent", "register", "f2", "--provider", "bedrock", "--model", "m", "--role-arn", "x")
    lines = [x for x in bad.stderr.splitlines() if x.strip()]
    assert bad.exit_code != 0 and len(lines) == 1 and "HTTP 400" in lines[0] and "role_arn" in lines[0], bad.stderr
