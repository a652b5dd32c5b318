"""The `quay` CLI covers the API (issue 12 item 4), played against one real `quay dev` process
(the module fixture of test_api_dev_server): from an operator token to an approved held action
with the CLI alone. Human output is plain text (untrusted parts made visible, no ``\\u2192``
escapes), ``--json`` is for machines, every error is one line on stderr with a non-zero exit."""

from __future__ import annotations

import json
import socket

import pytest
from test_api_dev_server import ADMIN, HELD, _wait
from test_api_dev_server import dev_url as dev_url  # the fixture, used by name in the tests' arguments
from typer.testing import CliRunner

from quay.main import app as cli

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")


def _quay(url: str, token: str, *args: str, code: int = 0):
    result = CliRunner().invoke(cli, [*args, "--url", url, "--token", token])
    assert result.exit_code == code, (args, result.exit_code, result.output, result.stderr)
    return result


def _json(url: str, token: str, *args: str):
    return json.loads(_quay(url, token, *args, "--json").stdout)


def _one_line_error(result, *words: str) -> None:
    assert result.exit_code != 0 and (result.exception is None or isinstance(result.exception, SystemExit))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_from_operator_token_to_an_approved_held_action_with_the_cli_alone(dev_url: str) -> None:
    url = dev_url
    for company, person in (("cato", "carl"), ("dune", "dora")):
        assert _json(url, ADMIN, "admin", "create-company", company, "--person", person)["id"] == company
    carl = _json(url, ADMIN, "admin", "issue-token", "cato", "carl")["token"]
    dora = _json(url, ADMIN, "admin", "issue-token", "dune", "dora")["token"]

    # the rights policy: text by default, JSON with --json; rules change one at a time
    shown = _quay(url, carl, "policy", "set", "cato", "--action", "remember=ask").stdout
    assert "policy of cato: default allow" in shown and "action remember: ask" in shown
    _quay(url, carl, "policy", "set", "cato", "--agent", "c1:create_task=deny")
    assert _json(url, carl, "policy", "show", "cato") == {
        "default": "allow",
        "actions": {"remember": "ask"},
        "cross_company": {},
        "agents": {"c1": {"create_task": "deny"}},
    }
    # COMPANY is the token's company by default (GET /me); an operator's token names none
    assert _json(url, carl, "policy", "show") == _json(url, carl, "policy", "show", "cato")
    assert _json(url, carl, "spend")["spent_usd"] == 0 and "policy of cato" in _quay(url, carl, "policy", "show").stdout
    assert "name the COMPANY" in _quay(url, ADMIN, "budget", "show", code=2).stderr

    # agents: quay dev runs with test_api_dev_server's SCRIPTS, where a1 declares a remember action
    out = _quay(
        url,
        carl,
        "agent",
        "register",
        "a1",
        "--provider",
        "anthropic",
        "--model",
        "claude-local",
        "--api-key",
        "sk-cato-local",
        "--instructions",
        "Be brief.",
    ).stdout
    assert (
        out.strip() == "cato.a1  (cato)  anthropic claude-local  key stored  context 60,000 tokens"
    )  # ids are scoped: COMPANY.NAME
    _quay(
        url,
        dora,
        "agent",
        "register",
        "d1",
        "--provider",
        "openai",
        "--model",
        "gpt-local",
        "--api-key",
        "sk-dune-local",
    )
    assert [(a["id"], a["name"]) for a in _json(url, carl, "agent", "list")["agents"]] == [("cato.a1", "a1")]
    assert "sk-" not in _quay(url, carl, "agent", "list").stdout  # the key is never shown

    # rooms: the service generates the id; the name is a label
    room = _json(url, carl, "room", "create", "Harbour → launch", "--member", "dune")
    rid = room["id"]
    assert room["name"] == "Harbour → launch" and room["members"] == ["cato"] and room["invited"] == ["dune"]
    # dune is invited (design §5): it sees the invitation, not the room, until dora accepts
    assert _quay(url, dora, "room", "list").stdout.strip() == "no rooms"
    pending = _json(url, dora, "invitations")["invitations"]
    assert [(i["room_id"], i["company"], i["invited_by"]) for i in pending] == [(rid, "dune", "cato")]
    assert f"{rid} (Harbour → launch)  invited by cato" in _quay(url, dora, "invitations").stdout
    unseen = _quay(url, dora, "room", "show", rid, code=1).stderr  # not readable before accepting
    assert "`quay invitations` the rooms your company is invited to" in unseen, unseen
    assert "not accepted the invitation" in _quay(url, dora, "member", "add", rid, "--agent", "d1", code=1).stderr
    assert "members: cato, dune" in _quay(url, dora, "room", "accept", rid).stdout
    _one_line_error(
        CliRunner().invoke(cli, ["room", "accept", rid, "--url", url, "--token", dora]), "HTTP 404", "quay invitations"
    )
    assert _quay(url, dora, "invitations").stdout.strip() == "no invitations"
    listed = _quay(url, dora, "room", "list").stdout
    assert f"{rid}  Harbour → launch  members: cato, dune" in listed and "\\u" not in listed
    # a room asked for by its label is a 404 that says how rooms are named
    _one_line_error(
        CliRunner().invoke(cli, ["room", "Harbour", "--url", url, "--token", carl]), "HTTP 404", "quay room list"
    )
    placed = _quay(url, carl, "member", "add", rid, "--agent", "a1").stdout
    assert "agents: @a1 (cato.a1)" in placed
    _quay(url, dora, "member", "add", rid, "--agent", "d1")
    assert [a["id"] for a in _json(url, dora, "member", "list", rid)["agents"]] == ["cato.a1", "dune.d1"]

    # an @mention wakes the agent; its held action waits for cato's yes
    assert "; wakes cato.a1" in _quay(url, carl, "post", rid, "@a1 please remember the launch date →").stdout
    said = _quay(url, carl, "post", rid, "a note for people, @nobody in particular").stdout
    assert "wakes no agent" in said and f"quay member list {rid}" in said
    _quay(url, dora, "post", rid, "hello @d1")

    def pending():
        return [a for a in _json(url, carl, "room", "show", rid)["approvals"] if a["status"] == "pending"]

    [held] = _wait(pending, 60, "a1's approval request")
    shown = _quay(url, carl, "room", "show", rid).stdout
    assert "pending: quay approve|deny ROOM " + held["id"] in shown
    assert f"(text: {HELD}; visibility: company) -> pending" in shown  # what a yes writes
    assert _json(url, dora, "room", "show", rid)["approvals"] == []  # another company's request is hidden
    _one_line_error(CliRunner().invoke(cli, ["approve", rid, held["id"], "--url", url, "--token", dora]), "HTTP 404")
    assert _json(url, carl, "approve", rid, held["id"])["status"] == "approved"
    _wait(
        lambda: (
            any(
                m["kind"] == "reply" and m["author"]["id"] == "dune.d1"
                for m in _json(url, dora, "room", "show", rid)["messages"]
            )
            and HELD in [line["text"] for line in _memory(url, carl, rid)]
        ),
        60,
        "the approved memory line and d1's reply",
    )

    # `quay room` shows the approval's outcome, in plain text
    text = _quay(url, carl, "room", "show", rid).stdout
    assert f"approval {held['id']} cato.a1: " in text and "-> approved by carl" in text
    assert "carl (cato) [message]: @a1 please remember the launch date →" in text and "\\u2192" not in text
    assert "dune.d1 (dune) [reply]" in text and "echo:" in text
    assert _quay(url, carl, "room", rid).stdout == text  # `quay room ROOM` is `quay room show ROOM`
    shown = _json(url, carl, "room", "show", rid)
    assert shown["room"]["id"] == rid and [a["status"] for a in shown["approvals"]] == ["approved"]
    raw = _quay(url, carl, "room", "show", rid, "--json").stdout
    assert "→" in raw and "\\u2192" not in raw  # JSON too: text as itself

    # a paused agent: a mention does not wake it, and `quay ledger --room` says why (design §12.2)
    paused = _quay(url, carl, "agent", "pause", "a1").stdout
    assert "its running runs end stopped" in paused
    _quay(url, dora, "post", rid, "@a1 still there?")
    _wait(
        lambda: "not woken: cato.a1  paused" in _quay(url, carl, "ledger", "--room", rid).stdout,
        60,
        "the refused wake in the ledger listing",
    )
    assert [n["reason"] for n in _json(url, carl, "ledger", "--room", rid)["not_started"]] == ["paused"]
    assert _json(url, dora, "ledger", "--room", rid)["not_started"] == [], "another company's agent: not listed"
    _quay(url, carl, "agent", "resume", "a1")

    # `quay replay`: the run decided again from what it recorded, under the policy of now (design §5.1)
    same = _json(url, carl, "replay", held["run_id"])
    assert same["same"] is True and set(same) == {"run", "then", "now", "same"}
    assert (
        [(d["kind"], d["decision"]) for d in same["then"]]
        == [("remember", "ask")]
        == [(d["kind"], d["decision"]) for d in same["now"]]
    )
    _quay(url, carl, "policy", "set", "cato", "--action", "remember=deny")
    differs = CliRunner().invoke(cli, ["replay", held["run_id"], "--json", "--url", url, "--token", carl])
    assert differs.exit_code == 1 and json.loads(differs.stdout)["same"] is False
    text = _quay(url, carl, "replay", held["run_id"], code=1).stdout
    assert "≠ [0] remember → memory (company): then ask, now deny" in text and "rule actions.remember = deny" in text
    _one_line_error(CliRunner().invoke(cli, ["replay", held["run_id"], "--url", url, "--token", dora]), "HTTP 404")
    _quay(url, carl, "policy", "set", "cato", "--action", "remember=ask")


def _memory(url: str, token: str, rid: str) -> list[dict]:
    """The memory lines ``token``'s company may read (no CLI command reads memory yet)."""
    from quaycli.client import QuayClient

    return QuayClient(url, token).memory(rid)


def test_cli_errors_are_one_line(dev_url: str) -> None:
    url = dev_url
    _json(url, ADMIN, "admin", "create-company", "eris", "--person", "eve")
    eve = _json(url, ADMIN, "admin", "issue-token", "eris", "eve")["token"]
    run = CliRunner().invoke
    _one_line_error(run(cli, ["room", "show", "no-such-room", "--url", url, "--token", eve]), "HTTP 404")
    _one_line_error(
        run(cli, ["room", "list", "--url", url, "--token", "qyt_wrong_token_000000000000"]),
        "HTTP 401",
        "refused this token",
    )
    _one_line_error(
        run(cli, ["room", "list", "--url", url], env={"QUAY_TOKEN": ""}), "HTTP 401", "QUAY_TOKEN", "issue-token"
    )
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    _one_line_error(
        run(cli, ["room", "list", "--url", closed, "--token", eve]),
        f"cannot reach the API at {closed}",
        "quay dev",
        "QUAY_URL",
    )
    _one_line_error(
        run(cli, ["room", "create", "r", "--member", "nobody", "--url", url, "--token", eve]), "HTTP 400", "nobody"
    )
    _one_line_error(
        run(cli, ["agent", "register", "e1", "--provider", "nope", "--model", "m", "--url", url, "--token", eve]),
        "HTTP 422",
    )
    _one_line_error(
        run(cli, ["policy", "set", "eris", "--action", "remember=maybe", "--url", url, "--token", eve]),
        "remember=maybe",
    )
    _one_line_error(run(cli, ["policy", "set", "eris", "--url", url, "--token", eve]), "--action")
    _one_line_error(run(cli, ["member", "add", "x", "--url", url, "--token", eve]), "--company")
    _one_line_error(run(cli, ["policy", "show", "cato", "--url", url, "--token", eve]), "HTTP 404")


def test_quay_agent_update_and_delete(dev_url: str) -> None:
    """`quay agent update` changes what it is given and keeps the rest; `quay agent delete` ends the
    agent for good: it leaves its rooms, and its name is not given again (design §12.2)."""
    url = dev_url
    _json(url, ADMIN, "admin", "create-company", "gale", "--person", "gus")
    gus = _json(url, ADMIN, "admin", "issue-token", "gale", "gus")["token"]
    _quay(
        url,
        gus,
        "agent",
        "register",
        "g1",
        "--provider",
        "openai",
        "--model",
        "gpt-local",
        "--api-key",
        "sk-gale-local",
    )
    rid = _json(url, gus, "room", "create", "gale-room")["id"]
    _quay(url, gus, "member", "add", rid, "--agent", "g1")
    none = CliRunner().invoke(cli, ["agent", "update", "g1", "--url", url, "--token", gus])
    _one_line_error(none, "give at least one of --model")
    out = _quay(url, gus, "agent", "update", "g1", "--model", "gpt-other", "--wake-from", "people").stdout
    assert out.strip() == "gale.g1  (gale)  openai gpt-other  key stored  wakes from people  context 60,000 tokens"
    assert _json(url, gus, "agent", "list")["agents"][0]["instructions"] == "", "what is not given stays"
    _one_line_error(
        CliRunner().invoke(cli, ["agent", "update", "g1", "--max-context-tokens", "5", "--url", url, "--token", gus]),
        "HTTP 400",
        "max_context_tokens",
    )
    deleted = _quay(url, gus, "agent", "delete", "g1").stdout
    assert deleted.startswith("deleted gale.g1 at ")
    assert _json(url, gus, "agent", "list")["agents"] == []
    assert [a["id"] for a in _json(url, gus, "room", "show", rid)["room"]["agents"]] == []
    again = CliRunner().invoke(
        cli, ["agent", "register", "g1", "--provider", "openai", "--model", "m", "--url", url, "--token", gus]
    )
    _one_line_error(again, "HTTP 409", "never given to another")


def test_quay_member_add_invites_and_the_invited_accepts_declines_or_leaves(dev_url: str) -> None:
    """`quay member add --company` invites (design §5): the answer says so; `quay room decline`,
    `quay room accept` and `quay room leave` act for the invited company."""
    url = dev_url
    for company, person in (("hull", "hugo"), ("isle", "ivy")):
        _json(url, ADMIN, "admin", "create-company", company, "--person", person)
    hugo = _json(url, ADMIN, "admin", "issue-token", "hull", "hugo")["token"]
    ivy = _json(url, ADMIN, "admin", "issue-token", "isle", "ivy")["token"]
    rid = _json(url, hugo, "room", "create", "hull-room")["id"]
    added = _json(url, hugo, "member", "add", rid, "--company", "isle")
    assert [(i["room_id"], i["company"], i["invited_by"], i["status"]) for i in added["invitations"]] == [
        (rid, "isle", "hull", "invited")
    ]
    assert added["room"]["members"] == ["hull"] and added["room"]["invited"] == ["isle"]
    shown = _quay(url, hugo, "member", "list", rid).stdout
    assert "members: hull" in shown and "invited: isle (not yet accepted)" in shown
    _one_line_error(CliRunner().invoke(cli, ["room", "show", rid, "--url", url, "--token", ivy]), "HTTP 404")
    assert _quay(url, ivy, "room", "decline", rid).stdout.strip() == f"declined the invitation to room {rid}"
    assert _quay(url, ivy, "invitations").stdout.strip() == "no invitations"
    again = _quay(url, hugo, "member", "add", rid, "--company", "isle").stdout
    assert f"invited isle: a person of it accepts with quay room accept {rid}" in again
    assert _json(url, ivy, "room", "accept", rid)["members"] == ["hull", "isle"]
    assert _json(url, ivy, "room", "leave", rid) == {"room_id": rid, "left": "isle", "stopping": 0}
    assert _quay(url, ivy, "room", "list").stdout.strip() == "no rooms"
    _one_line_error(
        CliRunner().invoke(cli, ["room", "leave", rid, "--url", url, "--token", ivy]), "HTTP 404", "not a member"
    )
