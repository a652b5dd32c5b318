"""The CLI's rough edges a new user hit (issue 24), each pinned: ``quay ledger RUN`` says what the
provider said about a failed request, not only ``bad_request (400)``."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from quay.main import app as cli
from quaycli.client import QuayClient

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


TASK = {
    "id": "task-1",
    "room_id": "r1",
    "title": "Draw the stall map",
    "body": "",
    "to": "acme.a1",
    "created_by": {"kind": "person", "id": "ann", "company": "acme"},
    "status": "open",
    "created_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-01T00:00:00Z",
}
LINE = {
    "id": "mem-1",
    "room_id": "r1",
    "text": "Ann likes tea.",
    "visibility": "company",
    "company": "acme",
    "author": {"kind": "person", "id": "ann", "company": "acme"},
    "created_at": "2026-01-01T00:00:00Z",
}


@pytest.mark.unit
def test_task_list_and_memory_list(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    asked: list[str] = []
    monkeypatch.setattr(QuayClient, "tasks", lambda self, room, status="open": asked.append(status) or [TASK])
    monkeypatch.setattr(QuayClient, "memory", lambda self, room: [LINE])
    runner = CliRunner()
    listed = runner.invoke(cli, ["task", "list", "r1", "--status", "all"])
    assert listed.exit_code == 0, listed.output
    assert 'task-1 [open] "Draw the stall map" for acme.a1 from ann' in listed.output and asked == ["all"]
    assert json.loads(runner.invoke(cli, ["task", "list", "r1", "--json"]).output) == {"tasks": [TASK]}
    memory = runner.invoke(cli, ["memory", "list", "r1"])
    assert memory.exit_code == 0, memory.output
    assert "mem-1 (acme only) Ann likes tea.  by ann (acme)" in memory.output
    assert json.loads(runner.invoke(cli, ["memory", "list", "r1", "--json"]).output) == {"lines": [LINE]}


@pytest.mark.unit
def test_quay_task_room_to_title_still_creates_a_task(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple] = []
    monkeypatch.setattr(QuayClient, "task", lambda self, *a: made.append(a) or TASK)
    result = CliRunner().invoke(cli, ["task", "r1", "a1", "Draw the stall map", "--body", "North quay."])
    assert result.exit_code == 0, result.output
    assert made == [("r1", "a1", "Draw the stall map", "North quay.")]


@pytest.mark.unit
def test_whoami(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setattr(QuayClient, "me", lambda self: {"company": "acme", "member": "ann", "admin": False})
    runner = CliRunner()
    assert runner.invoke(cli, ["whoami"]).output.strip() == "ann of acme"
    assert json.loads(runner.invoke(cli, ["whoami", "--json"]).output) == {
        "company": "acme",
        "member": "ann",
        "admin": False,
    }
