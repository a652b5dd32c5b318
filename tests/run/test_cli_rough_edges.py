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
