"""Security probe, the ``quay`` CLI: the client never follows a redirect (it would carry
``Authorization: Bearer`` to another host and turn a POST into a GET): a 3xx is a one-line error
naming the Location, and the host it points to receives nothing. ``quay policy set --file`` reads a
bounded amount (``/dev/zero`` is an error at once, not a hang)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from test_cli_hostile import _one_line_error

from quaycli.client import ApiError, QuayClient

QUAY = [sys.executable, "-m", "quay"]
TOKEN = "qt-secret-token-0123456789"
MIB = 1024 * 1024  # the bound of a policy file


class _Recorder:
    """An HTTP server on 127.0.0.1 that records every request and answers ``status`` (with a
    Location when given)."""

    def __init__(self, status: int = 200, location: str | None = None) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                recorder.requests.append((self.command, self.path, dict(self.headers.items())))
                body = b'{"message": "moved"}'
                self.send_response(recorder.status)
                if recorder.location:
                    self.send_header("Location", recorder.location)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _any

            def log_message(self, *args: object) -> None:
                pass

        self.status, self.location = status, location
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _Recorder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(params=[301, 302, 303, 307, 308])
def redirect(request: pytest.FixtureRequest) -> Iterator[tuple[_Recorder, _Recorder]]:
    """(the API answering a redirect, the other host it points to)"""
    with _Recorder(200) as elsewhere, _Recorder(request.param, elsewhere.url + "/steal") as api:
        yield api, elsewhere


def _quay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*QUAY, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_the_client_never_follows_a_redirect(redirect: tuple[_Recorder, _Recorder]) -> None:
    api, elsewhere = redirect
    client = QuayClient(api.url, TOKEN)
    with pytest.raises(ApiError) as info:
        client.create_room("probe", [])
    assert 300 <= info.value.status < 400
    assert elsewhere.url + "/steal" in str(info.value) and "not followed" in str(info.value)
    with pytest.raises(ApiError):
        client.rooms()
    resp = client.request("POST", "/rooms", {"members": []})
    assert resp.status == api.status and resp.headers.get("Location") == elsewhere.url + "/steal"
    # (GET /rooms asks for a page: ?limit=200, docs/api.md)
    assert [(m, p.split("?")[0]) for m, p, _ in api.requests] == [
        ("POST", "/rooms"),
        ("GET", "/rooms"),
        ("POST", "/rooms"),
    ]
    assert elsewhere.requests == []  # neither the token nor the body went there


def test_the_cli_reports_a_redirect_in_one_line_naming_the_location(redirect: tuple[_Recorder, _Recorder]) -> None:
    api, elsewhere = redirect
    p = _quay("post", "r1", "hello", "--url", api.url, "--token", TOKEN)
    line = _one_line_error(p, str(api.status), elsewhere.url + "/steal")
    assert TOKEN not in line
    p = _quay("room", "list", "--url", api.url, "--token", TOKEN)
    _one_line_error(p, str(api.status), elsewhere.url + "/steal")
    assert [m for m, _, _ in api.requests] == ["POST", "GET"]
    assert elsewhere.requests == []


def test_policy_set_from_dev_zero_is_one_line_at_once() -> None:
    with _Recorder(200) as api:
        p = _quay("policy", "set", "acme", "--file", "/dev/zero", "--url", api.url, "--token", TOKEN)
        _one_line_error(p, "--file", "/dev/zero", "1 MiB")
        assert api.requests == []  # nothing sent


def test_policy_set_from_a_file_over_the_bound_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "policy.yaml"
    big.write_text("default: allow\n" + "#" * MIB + "\n")
    with _Recorder(200) as api:
        _one_line_error(
            _quay("policy", "set", "acme", "--file", str(big), "--url", api.url, "--token", TOKEN), "--file", "1 MiB"
        )
        assert api.requests == []


def test_policy_set_from_a_small_file_is_sent(tmp_path: Path) -> None:
    small = tmp_path / "policy.yaml"
    small.write_text("default: ask\nactions: {remember: deny}\n")
    with _Recorder(200) as api:
        _quay("policy", "set", "acme", "--file", str(small), "--url", api.url, "--token", TOKEN)
        assert [(m, p) for m, p, _ in api.requests] == [("PUT", "/companies/acme/policy")]
