"""Issue 10, findings 7 and 10: untrusted text in terminal output has its control and escape
characters made visible (`quay room`, `quay ledger`, `quay approvals`, the demo's rendering), and
every CLI error is one line on stderr with a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quay.main import app as cli
from quaycli.client import QuayClient
from quaycli.terminal import visible

QUAY = [sys.executable, "-m", "quay"]
HOSTILE = (
    "title\x1b]0;pwned\x07 clear\x1b[2J clip\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07 "
    "csi\x9b31m fake\nline rtl\u202eexe.txt"
)


def _no_raw_controls(text: str) -> None:
    for bad in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert bad not in text, repr(text)


@pytest.mark.unit
def test_visible_shows_escapes_and_keeps_text() -> None:
    shown = visible(HOSTILE)
    _no_raw_controls(shown)
    assert "\\x1b]0;pwned\\x07" in shown and "\\x1b[2J" in shown and "\\x9b" in shown and "\\u202e" in shown
    assert "\\x0a" in shown and "\n" not in shown  # a one-line field cannot fake a line
    assert visible("a\nb", newlines=True) == "a\nb" and visible("é日本\t") == "é日本\t"


@pytest.mark.unit
def test_quay_room_ledger_and_approvals_print_untrusted_text_visibly(monkeypatch: pytest.MonkeyPatch) -> None:
    msg = {
        "id": "m1",
        "created_at": "2026-01-01T00:00:00Z",
        "kind": "message",
        "text": HOSTILE,
        "author": {"kind": "person", "id": "eve\x1b[8m", "company": "evil\x07"},
        "to": [],
    }
    run = {
        "run_id": "run-1",
        "agent_id": "a1",
        "company": "acme",
        "room_id": "r1",
        "status": "failed_before_reply",
        "wake_id": "w1",
        "hop": 0,
        "started_at": "2026",
        "ended_at": None,
        "error_class": "ModelCallFailed",
        "error_message": HOSTILE,
    }
    request = {
        "n": 1,
        "sent_at": "2026-01-01T00:00:00Z",
        "provider": "openai-compatible",
        "status": 500,
        "outcome": "error",
        "error_type": "x\x1b[2J",
        "message": HOSTILE,
        "category": "server_error",
        "retryable": True,
        "decision": HOSTILE,
    }
    approval = {"id": "run-1:0", "agent_id": "a1", "summary": HOSTILE, "status": "pending", "created_at": "2026"}
    monkeypatch.setattr(QuayClient, "transcript", lambda self, room: [msg])
    monkeypatch.setattr(QuayClient, "run", lambda self, run_id: {"run": run, "requests": [request], "actions": []})
    monkeypatch.setattr(QuayClient, "approvals", lambda self, room, status="pending": [approval])
    monkeypatch.setattr(
        QuayClient,
        "room",
        lambda self, room: {
            "id": room,
            "name": "n\x1b[2J",
            "members": ["acme"],
            "agents": [{"id": "a1", "company": "acme"}],
        },
    )
    runner = CliRunner()
    for args in (["room", "r1"], ["room", "show", "r1"], ["ledger", "run-1"], ["approvals", "r1"]):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, (args, result.output)
        _no_raw_controls(result.output)
        assert "\\x1b" in result.output, (args, result.output)
    shown = runner.invoke(cli, ["room", "show", "r1", "--json"])  # JSON: the same strings, escaped
    assert shown.exit_code == 0 and "\\u001b" in shown.output and "\\u202e" in shown.output
    _no_raw_controls(shown.output)
    assert json.loads(shown.output)["messages"][0]["text"] == HOSTILE


@pytest.mark.unit
def test_the_demo_rendering_shows_untrusted_text_visibly() -> None:
    from quaycli.render import action_line, request_line

    line = request_line(
        {
            "n": 1,
            "sent_at": "",
            "provider": "openai",
            "status": 500,
            "outcome": "error",
            "error_type": "t\x1b[2J",
            "category": "server_error",
            "decision": HOSTILE,
        }
    )
    _no_raw_controls(line)
    assert "\n" not in line
    action = action_line(
        {
            "index": 2,
            "kind": "create_task",
            "target": "task for b1",
            "decision": "ask",
            "approval": "approved",
            "outcome": "written",
            "reason": "acme policy: rule x = ask",
            "outcome_note": HOSTILE,
        }
    )
    _no_raw_controls(action)
    assert "\n" not in action
    assert action.startswith(
        "action 2 create_task → task for b1: ask → approved → written (acme policy: rule x = ask; title"
    )


# ----------------------------------------------------------------------------- finding 10
def _quay(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*QUAY, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd, stdin=subprocess.DEVNULL
    )


def _one_line_error(p: subprocess.CompletedProcess, *words: str) -> str:
    """A failed ``quay``: non-zero exit, no traceback, one line on stderr holding ``words``
    (returned)."""
    assert p.returncode != 0, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_a_url_that_is_not_a_url_is_one_line() -> None:
    _one_line_error(_quay("room", "X", "--url", "not-a-url"), "--url", "not-a-url")
    _one_line_error(_quay("post", "X", "hi", "--url", "http://[::1"), "--url")


def test_bootstrap_token_without_region_or_credentials_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        {
            "AWS_CONFIG_FILE": str(tmp_path / "none"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
            "AWS_EC2_METADATA_DISABLED": "true",
            "HOME": str(tmp_path),
            # never AWS: anything that still tried to send would hit a closed local port
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        }
    )
    _one_line_error(_quay("admin", "bootstrap-token", "--table", "quayutec-room", env=env), "region")
    env["AWS_DEFAULT_REGION"] = "eu-west-1"
    _one_line_error(_quay("admin", "bootstrap-token", "--table", "quayutec-room", env=env), "credentials")


def test_dev_with_malformed_scripts_or_settings_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "scripts.yaml"
    bad.write_text("a1:\n  - reply: {text: [unclosed\n   bad: : :\n")
    _one_line_error(_quay("dev", "--port", "0", "--scripts", str(bad)), "--scripts")
    _one_line_error(_quay("dev", "--port", "0", "--setting", "HOP_LIMIT=abc"), "HOP_LIMIT")
    _one_line_error(_quay("dev", "--port", "0", "--setting", "BOGUS=1"), "BOGUS", "not a runtime setting")


def test_dev_on_a_taken_port_or_with_a_bad_admin_token_is_one_line() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        _one_line_error(_quay("dev", "--port", port), f"127.0.0.1:{port} is in use", "--port")
    _one_line_error(_quay("dev", "--port", "0", "--admin-token", "short"), "--admin-token", "16 to 512")


def test_usage_errors_are_one_line_too() -> None:
    """Options in the wrong place, an unknown command: one line naming where to look, exit 2."""
    assert "--help" in _one_line_error(
        _quay("--token", "x", "room", "list"), "No such option: --token", "options go after it"
    )
    assert _quay("--version").stdout.strip() == _quay("version").stdout.strip() != ""
    assert _quay("--token", "x", "room", "list").returncode == 2
    _one_line_error(_quay("no-such-command"), "no-such-command", "--help")
    assert "Usage: " in _quay("room").stdout and "COMMAND" in _quay("room").stdout  # no arguments: its help


@pytest.mark.unit
def test_a_messages_own_lines_stay_lines_in_quay_room(monkeypatch: pytest.MonkeyPatch) -> None:
    msg = {
        "id": "m1",
        "created_at": "2026-01-01T00:00:00Z",
        "kind": "reply",
        "text": "Plan agreed.\n\nheld: x\x1b[2J",
        "author": {"kind": "agent", "id": "acme.a1", "company": "acme"},
        "to": [],
    }
    monkeypatch.setattr(QuayClient, "transcript", lambda self, room: [msg])
    monkeypatch.setattr(QuayClient, "approvals", lambda self, room, status="pending": [])
    monkeypatch.setattr(QuayClient, "room", lambda self, room: {"id": room, "members": ["acme"], "agents": []})
    out = CliRunner().invoke(cli, ["room", "r1"]).output
    assert "[reply]: Plan agreed.\n    \n    held: x\\x1b[2J" in out and "\\x0a" not in out
