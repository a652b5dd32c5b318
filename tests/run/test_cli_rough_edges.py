"""The CLI's rough edges a new user hit (issue 24), each pinned: ``quay ledger RUN`` says what the
provider said about a failed request, not only ``bad_request (400)``."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from quaylocal.cli import app as cli
from quaylocal.client import QuayClient

PROVIDER_SAID = "max_tokens: 99999 > 8192, which is the maximum allowed for this model"


@pytest.mark.unit
def test_ledger_run_prints_the_providers_error_message(monkeypatch: pytest.MonkeyPatch) -> None:
    run = {
        "run_id": "run-1",
        "agent_id": "acme.a1",
        "company": "acme",
        "room_id": "r1",
        "status": "failed_before_reply",
        "wake_id": "w1",
        "hop": 0,
        "started_at": "2026-01-01T00:00:00Z",
        "error_class": "ModelCallFailed",
        "error_message": "bad_request (400): final error, not retried",
    }
    request = {
        "n": 1,
        "sent_at": "2026-01-01T00:00:01Z",
        "provider": "anthropic",
        "model": "claude-x",
        "status": 400,
        "outcome": "error",
        "error_type": "invalid_request_error",
        "message": PROVIDER_SAID,
        "body": '{"type": "error"}',
        "category": "bad_request",
        "retryable": False,
        "decision": "final error, not retried",
    }
    monkeypatch.setattr(QuayClient, "run", lambda self, run_id: {"run": run, "requests": [request], "actions": []})
    result = CliRunner().invoke(cli, ["ledger", "run-1"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "request 1" in x)
    assert "bad_request" in line and PROVIDER_SAID in line, result.output


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "key", "method", "items"),
    [
        (["approvals", "r1"], "approvals", "approvals", [{"id": "run-1:0"}]),
        (["agent", "list"], "agents", "agents", [{"id": "acme.a1"}]),
        (["file", "list", "r1"], "files", "files", [{"id": "f1"}]),
    ],
)
def test_every_listing_prints_the_apis_listing_shape(
    monkeypatch: pytest.MonkeyPatch, args: list[str], key: str, method: str, items: list[dict]
) -> None:
    """A listing's ``--json`` is the API's own answer: ``{"<kind>": [...]}`` (docs/api.md), the
    same shape as ``quay ledger --room --json`` (``{"runs": [...], "not_started": [...]}``)."""
    import json

    monkeypatch.setattr(QuayClient, method, lambda self, *a, **k: items)
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {key: items}


@pytest.mark.unit
def test_room_list_prints_the_apis_listing_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setattr(QuayClient, "rooms", lambda self: ["room-1"])
    monkeypatch.setattr(QuayClient, "room", lambda self, room: {"id": room, "name": "harbour", "members": ["acme"]})
    result = CliRunner().invoke(cli, ["room", "list", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"rooms": [{"id": "room-1", "name": "harbour", "members": ["acme"]}]}
