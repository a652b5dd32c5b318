"""``quay dev`` says what happens after its banner (issue 24, item 7): one plain line per wake, run
start and run end, and nothing of the kind with ``--quiet``."""

from __future__ import annotations

from pathlib import Path

import pytest

from quaycli.client import QuayClient
from quaydev import quay_dev, wait_for

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

ADMIN = "qyt_admin_dev_activity_test_01"


def _play(url: str) -> str:
    admin = QuayClient(url, ADMIN)
    admin.create_company("acme", ["ann"])
    ann = QuayClient(url, admin.issue_token("acme", "ann")["token"])
    room = ann.create_room("harbour")["id"]
    ann.register_agent("a1", "anthropic", "claude-local", api_key="sk-acme-local")
    ann.add_agent(room, "a1")
    ann.post(room, "hello @a1")
    wait_for(lambda: [m for m in ann.transcript(room) if m["kind"] == "reply"], 60, "a1's reply")
    wait_for(lambda: all(r["status"] != "running" for r in ann.runs(room)) and ann.runs(room), 30, "the run's end")
    return room


def _activity(log: Path) -> list[str]:
    return [x for x in log.read_text().splitlines() if x.startswith(("wake ", "run "))]


def test_quay_dev_prints_a_line_per_wake_run_start_and_run_end(tmp_path: Path) -> None:
    with quay_dev(tmp_path, admin_token=ADMIN) as url:
        room = _play(url)
        log = tmp_path / "quay-dev.log"
        lines = wait_for(lambda: (x := _activity(log)) and len(x) >= 3 and x, 10, "three activity lines")
    wake, start, end = lines[:3]
    assert wake.startswith("wake acme.a1 in " + room) and "message" in wake, lines
    assert start.startswith("run ") and " started: acme.a1 in " + room in start, lines
    assert end.startswith("run ") and " ended completed" in end, lines
    assert start.split()[1] == end.split()[1]  # the same run id


def test_quay_dev_quiet_prints_none(tmp_path: Path) -> None:
    with quay_dev(tmp_path, "--quiet", admin_token=ADMIN) as url:
        _play(url)
    assert _activity(tmp_path / "quay-dev.log") == []
