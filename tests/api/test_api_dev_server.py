"""`quay dev` end to end over HTTP only (issue 4): a real `quay dev` process on a free port; the
operator creates companies and tokens, people create a room and agents, post, see the agents'
replies appear, decide a held action (owner 200, other company 403), repeat a POST with the same
Idempotency-Key; the `quay` client commands read the same server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from quay.main import app as cli
from quaycli.client import ApiError, QuayClient
from quaydev import quay_dev, wait_for

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

ADMIN = "qyt_admin_dev_server_test_0001"
HELD = "acme's launch date"
SCRIPTS = {
    "a1": [
        {
            "reply": {
                "text": "Will remember once acme agrees.",
                "actions": [{"kind": "remember", "text": HELD, "visibility": "company"}],
            }
        }
    ]
}


_wait = wait_for  # (tests/api/test_cli_dev.py imports it from here)


@pytest.fixture(scope="module")
def dev_url(tmp_path_factory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("quay-dev")
    scripts = tmp / "scripts.json"
    scripts.write_text(json.dumps(SCRIPTS))
    with quay_dev(tmp, "--scripts", str(scripts), admin_token=ADMIN) as url:
        yield url


def test_quay_dev_over_http(dev_url: str) -> None:
    admin = QuayClient(dev_url, ADMIN)
    admin.create_company("acme", ["ann"])
    admin.create_company("bolt", ["bob"])
    ann = QuayClient(dev_url, admin.issue_token("acme", "ann")["token"])
    bob = QuayClient(dev_url, admin.issue_token("bolt", "bob")["token"])
    with pytest.raises(ApiError) as refused:
        QuayClient(dev_url, "qyt_wrong_token_000000000000").room("room-0")
    assert refused.value.status == 401

    ann.set_policy("acme", {"actions": {"remember": "ask"}})
    r1 = ann.create_room("r1", ["bolt"])["id"]  # the service generates the id; "r1" is its name
    bob.accept(r1)  # bolt is invited (design §5): bob accepts
    ann.register_agent("a1", "anthropic", "claude-local", api_key="sk-acme-local", instructions="Be brief.")
    bob.register_agent("b1", "openai", "gpt-local", api_key="sk-bolt-local")
    ann.add_agent(r1, "a1")
    bob.add_agent(r1, "b1")

    # a post wakes b1 (echo reply from the local provider server)
    ann.post(r1, "hello @b1, are you there?")
    reply = _wait(
        lambda: [m for m in bob.transcript(r1) if m["kind"] == "reply" and m["author"]["id"] == "bolt.b1"],
        60,
        "b1's reply",
    )
    assert reply[0]["text"].startswith("echo:")

    # a1 declares a held action: only acme decides it
    ann.post(r1, "@a1 please remember the launch date")
    pending = _wait(lambda: ann.approvals(r1), 60, "a1's approval request")
    assert bob.approvals(r1) == []
    approval_id = pending[0]["id"]
    assert pending[0]["fields"] == {"text": HELD, "visibility": "company"}  # what a yes writes, for acme only
    denied = bob.request("POST", f"/rooms/{r1}/approvals/{approval_id}/approve")
    assert denied.status == 404 and denied.body["error"] == "not_found"  # to bolt, acme's held action does not exist
    approved = ann.request("POST", f"/rooms/{r1}/approvals/{approval_id}/approve")
    assert approved.status == 200 and approved.body["status"] == "approved"
    run_id = pending[0]["run_id"]
    _wait(lambda: ann.run(run_id)["run"]["status"] == "completed", 60, "the approved run to complete")
    assert HELD in [m["text"] for m in ann.memory(r1)]
    assert HELD not in [m["text"] for m in bob.memory(r1)]
    with pytest.raises(ApiError) as hidden:
        bob.run(run_id)
    assert hidden.value.status == 404

    # the same Idempotency-Key twice: the same response, one message
    first = ann.request("POST", f"/rooms/{r1}/messages", {"text": "exactly once"}, idempotency_key="dev-key-1")
    again = ann.request("POST", f"/rooms/{r1}/messages", {"text": "exactly once"}, idempotency_key="dev-key-1")
    assert first.status == again.status == 201 and first.body == again.body
    assert [m["text"] for m in ann.transcript(r1)].count("exactly once") == 1

    # the client commands read the same server
    runner = CliRunner()
    room = runner.invoke(cli, ["room", r1, "--url", dev_url, "--token", ann.token])
    assert room.exit_code == 0 and "exactly once" in room.output and "echo:" in room.output
    ledger = runner.invoke(cli, ["ledger", run_id, "--url", dev_url, "--token", ann.token])
    assert ledger.exit_code == 0 and "completed" in ledger.output and "remember" in ledger.output
    assert (
        "action 0 remember → memory (company): ask → approved → written (acme policy: rule actions.remember = ask"
        in ledger.output
    )  # the approval's answer and why, as the demo prints it
    costs = [line for line in ledger.output.splitlines() if line.strip().startswith("cost ")]
    assert len(costs) == 1 and costs[0].startswith("  cost $"), costs  # the breakdown's, once
    other = runner.invoke(cli, ["ledger", run_id, "--url", dev_url, "--token", bob.token])
    assert other.exit_code == 1
    post = runner.invoke(cli, ["post", r1, "from the cli", "--json", "--url", dev_url, "--token", bob.token])
    assert post.exit_code == 0 and json.loads(post.output)["author"]["id"] == "bob"
    assert runner.invoke(cli, ["approvals", r1, "--url", dev_url, "--token", ann.token]).exit_code == 0


def test_a_client_closing_its_connection_prints_no_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    """A browser that drops its idle keep-alive connection made ``quay dev`` print socketserver's
    20-line traceback (ConnectionResetError). A closed connection is now silent; any other error
    in a request's handling is still printed."""
    from http.server import BaseHTTPRequestHandler

    from quaylocal.dev import _HttpServer

    server = _HttpServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    try:
        for gone in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe")):
            try:
                raise gone
            except ConnectionError:
                server.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("a real fault")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 1))
        assert "ValueError: a real fault" in capsys.readouterr().err
    finally:
        server.server_close()
