"""A real `quay dev` process for the tests that go through HTTP (the API, the CLI, the room page,
the docs' walk-throughs): one helper to start it on a free port, wait until it serves, and stop it.

The process records its AWS calls into the suite's call log (``QUAY_CALL_LOG``, tests/conftest.py),
so what it does is checked against the IAM roles like the suite's own calls."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate: Callable[[], Any], timeout_s: float = 60.0, what: str = "condition") -> Any:
    """Poll ``predicate`` every 0.2 s until it returns a true value (returned); AssertionError
    naming ``what`` after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def quay_dev(
    workdir: Path, *args: str, admin_token: str, port: int | None = None, env: dict[str, str] | None = None
) -> Iterator[str]:
    """``quay dev --port P --admin-token T *args`` until it answers ``GET /openapi.json``; yields
    its base URL; SIGTERM (then kill) on exit. Its output goes to ``workdir/quay-dev.log`` (shown
    when it dies early)."""
    from quaycli.client import QuayClient

    port = port or free_port()
    log_path = workdir / "quay-dev.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "quay", "dev", "--port", str(port), "--admin-token", admin_token, *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        probe = QuayClient(url, retries=0, timeout_s=2)

        def up() -> bool:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            try:
                return probe.request("GET", "/openapi.json").status == 200
            except OSError:
                return False

        wait_for(up, 90, "quay dev to serve")
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
