"""`quay demo` as a user runs it: one JSON object on stdout, exit 1 when `expect` fails, exit 2
with the place of the fault for a malformed scenario."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

QUAY = [sys.executable, "-m", "quay"]

SMALL = """
companies:
  - {id: acme, people: [ann]}
agents:
  - {id: helper, company: acme, provider: openai, model: gpt-test, instructions: Be brief.}
room: {id: r1, members: [acme], files: []}
model_replies:
  helper:
    - reply: {text: "Noted.", actions: [{kind: remember, text: "Ann likes tea.", visibility: company}]}
steps:
  - post: {as: ann, text: "@helper remember that I like tea", to: []}
expect:
  replies: {helper: REPLIES}
  open_tasks: 0
  memory_lines: 1
  runs: {completed: 1}
  model_requests: {helper: 1}
"""


def _run(tmp_path: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "room.yaml"
    path.write_text(text)
    return subprocess.run([*QUAY, "demo", "--scenario", str(path), *args], capture_output=True, text=True, timeout=120)


def test_demo_json_matches_expect(tmp_path: Path) -> None:
    proc = _run(tmp_path, SMALL.replace("REPLIES", "1"), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert out == {
        "replies": {"helper": 1},
        "model_requests": {"helper": 1},
        "open_tasks": 0,
        "memory_lines": 1,
        "runs": {"completed": 1, "failed_before_reply": 0, "failed_after_reply": 0, "timed_out": 0, "stopped": 0},
        "expect_ok": True,
        "failures": [],
    }


def test_demo_exits_1_when_expect_fails(tmp_path: Path) -> None:
    proc = _run(tmp_path, SMALL.replace("REPLIES", "2"), "--json")
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["expect_ok"] is False and out["failures"] == ["replies[helper]: expected 2, got 1"]


def test_demo_human_output_shows_room_tasks_memory_ledger(tmp_path: Path) -> None:
    proc = _run(tmp_path, SMALL.replace("REPLIES", "1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    for section in ("== Room r1 ==", "== Tasks ==", "== Memory ==", "== Ledger ==", "expect: OK"):
        assert section in proc.stdout
    assert "helper (acme) reply:" in proc.stdout and "(acme only) Ann likes tea." in proc.stdout


def test_malformed_scenario_is_a_clear_error(tmp_path: Path) -> None:
    bad = SMALL.replace("REPLIES", "1").replace("provider: openai", "provider: carrier-pigeon")
    proc = _run(tmp_path, bad)
    assert proc.returncode == 2
    assert "agents.0.provider" in proc.stderr and "Traceback" not in proc.stderr
    proc = _run(tmp_path, "steps: [")
    assert proc.returncode == 2 and "room.yaml" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.unit
def test_demo_help_names_the_scenario_doc() -> None:
    from typer.testing import CliRunner

    from quay.main import app

    result = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "docs/scenarios.md" in result.output
    assert "shared/" not in result.output and (Path(__file__).resolve().parents[2] / "docs/scenarios.md").is_file()
