"""The `quay` command line."""

from __future__ import annotations

import builtins
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from quaylocal.terminal import visible

app = typer.Typer(help="Quayutec: the serverless runtime for always-on agents sharing one room.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

DEFAULT_SCENARIO = Path(__file__).parent / "scenarios" / "reference-room.yaml"


@app.command()
def demo(
    scenario: Annotated[Path, typer.Option(help="A scenario file (shared/scenarios/README.md format).")] = DEFAULT_SCENARIO,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary object.")] = False,
    quiet_timeout: Annotated[float, typer.Option(help="Seconds each step may take to become quiet.")] = 120.0,
) -> None:
    """Play a scenario end to end on the local stack (moto, no AWS account) and show the room,
    the tasks, the memory lines and the ledger. Exit status 1 when its `expect` fails."""
    from quaylocal.scenario import Player, Scenario, ScenarioError

    out = sys.stdout
    sys.stdout = sys.stderr  # handler logs go to stderr; stdout carries only the result
    try:
        try:
            sc = Scenario.load(scenario)
        except ScenarioError as exc:
            print(f"quay demo: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
        result = Player(sc, quiet_timeout_s=quiet_timeout).play()
    finally:
        sys.stdout = out
    if as_json:
        print(json.dumps(result.summary(), indent=2))
    else:
        from quaylocal.render import render

        print(render(result))
    raise typer.Exit(0 if result.expect_ok else 1)


# ----------------------------------------------------------------------------- the room API
UrlOpt = Annotated[str, typer.Option("--url", envvar="QUAY_URL", help="The API's base URL (quay dev or a deployed stage).")]
TokenOpt = Annotated[str, typer.Option("--token", envvar="QUAY_TOKEN", help="Your bearer token.")]
DEFAULT_URL = "http://127.0.0.1:8787"


def _fail(message: str, code: int = 1) -> typer.Exit:
    """Print one line to stderr (untrusted parts made visible) and give the Exit to raise."""
    from quaylocal.terminal import visible

    print(visible(" ".join(str(message).split())), file=sys.stderr)
    return typer.Exit(code)


def _client(url: str, token: str):  # noqa: ANN202
    from urllib.parse import urlsplit

    from quaylocal.client import QuayClient

    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:
        ok = False
    if not ok:
        raise _fail(f"quay: --url {url!r} is not an http:// or https:// address (e.g. {DEFAULT_URL})", 2)
    return QuayClient(url, token or None)


def _run(fn):  # noqa: ANN001, ANN202
    """Call the API; an HTTP error is printed (status and the API's message) with exit status 1."""
    from quaylocal.client import ApiError

    try:
        return fn()
    except ApiError as exc:
        problems = [f"{f.get('field')}: {f.get('problem')}" for f in (exc.body or {}).get("fields") or []
                    if isinstance(f, dict)] if isinstance(exc.body, dict) else []
        more = f" ({'; '.join(problems)})" if len(problems) > 1 else ""
        raise _fail(f"quay: {exc}{more}", 1) from None
    except (OSError, ValueError) as exc:  # refused, unreachable, a URL urllib cannot use
        raise _fail(f"quay: cannot reach the API: {exc}", 2) from None


def _print(data) -> None:  # noqa: ANN001
    print(json.dumps(data, indent=2))


@app.command()
def dev(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: a free one).")] = 8787,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    admin_token: Annotated[str | None, typer.Option("--admin-token", envvar="QUAY_ADMIN_TOKEN",
                                                    help="The operator token to create (default: a random one, printed).")] = None,
    scripts: Annotated[Path | None, typer.Option(help="Model replies per agent id (JSON or YAML, the scenario "
                                                      "model_replies format); unscripted agents get echo replies.")] = None,
    setting: Annotated[list[str] | None, typer.Option(help="A runtime setting, NAME=VALUE (e.g. HOP_LIMIT=3); repeatable.")] = None,
) -> None:
    """Serve the room API on the local stack (moto in-process: no AWS account, no Docker). Wakes and
    runs happen in the background; the model provider is the local provider server."""
    from quaylocal.dev import DevServer, load_scripts

    import yaml

    settings = _dev_settings(setting or [])
    try:
        loaded = load_scripts(scripts)
    except (OSError, ValueError, yaml.YAMLError) as exc:  # unreadable, not JSON/YAML, wrong shape
        raise _fail(f"quay dev: --scripts {scripts}: {exc}", 2) from None
    try:
        server = DevServer(host, port, admin_token=admin_token, scripts=loaded, settings=settings)
        server.serve_forever(banner=lambda line: print(line, flush=True))
    except (OSError, ValueError) as exc:  # a taken port, a bad --admin-token
        raise _fail(f"quay dev: {exc}", 2) from None


def _dev_settings(items: list[str]) -> dict[str, str]:
    """``--setting NAME=VALUE`` items, each a known runtime setting with a valid value (checked by
    the runtime's own Settings model); anything else is one line and exit status 2."""
    from pydantic import ValidationError

    from quayutec.settings import Settings

    from quaylocal.stack import local_environment

    known = {f.alias or n for n, f in Settings.model_fields.items()} | set(local_environment())
    settings: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise _fail(f"quay dev: --setting {item!r}: expected NAME=VALUE", 2)
        if name not in known:
            raise _fail(f"quay dev: --setting {name}: not a runtime setting (known: {', '.join(sorted(known))})", 2)
        settings[name] = value
    try:
        Settings.model_validate({**local_environment(), **settings})
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        name = str(err["loc"][0]) if err.get("loc") else "?"
        raise _fail(f"quay dev: --setting {name}={settings.get(name, '')}: {err['msg']}", 2) from None
    return settings


admin = typer.Typer(help="Operator commands: companies, people and tokens (need an operator token).",
                    no_args_is_help=True)
app.add_typer(admin, name="admin")


@admin.command("create-company")
def admin_create_company(company: str, person: Annotated[list[str] | None, typer.Option(
        "--person", help="A person of the company; repeatable.")] = None,
        url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Create a company with its people."""
    _print(_run(lambda: _client(url, token).create_company(company, person or [])))


@admin.command("add-person")
def admin_add_person(company: str, person: str, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Add a person to a company."""
    _print(_run(lambda: _client(url, token).add_person(company, person)))


@admin.command("issue-token")
def admin_issue_token(company: str, member: str, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Issue a bearer token for a person of a company (printed once; only its hash is stored)."""
    _print(_run(lambda: _client(url, token).issue_token(company, member)))


@admin.command("revoke-token")
def admin_revoke_token(company: str, token_id: str, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Revoke a token by its id."""
    _print(_run(lambda: _client(url, token).revoke_token(company, token_id)))


@admin.command("bootstrap-token")
def admin_bootstrap_token(
    stack: Annotated[str | None, typer.Option(help="A deployed stack's name (its RoomTableName output).")] = None,
    table: Annotated[str | None, typer.Option(help="The room table's name (instead of --stack).")] = None,
    region: Annotated[str | None, typer.Option(help="AWS region (default: your AWS configuration's).")] = None,
) -> None:
    """Create the first operator token of a deployed stack, writing its hash straight to the room
    table with your AWS credentials (the API cannot issue one before an operator exists)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    if bool(stack) == bool(table):
        raise _fail("quay admin bootstrap-token: give --stack or --table", 2)
    try:
        _print(_bootstrap(boto3.session.Session(region_name=region), stack, table))
    except (BotoCoreError, ClientError) as exc:  # no region, no credentials, no such stack or table
        raise _fail(f"quay admin bootstrap-token: {exc}", 1) from None


def _bootstrap(session, stack: str | None, table: str | None) -> dict:  # noqa: ANN001
    from quayutec.dal.auth import TokenStore

    api_url = None
    if stack:
        outputs = {o["OutputKey"]: o["OutputValue"] for o in session.client("cloudformation").describe_stacks(
            StackName=stack)["Stacks"][0].get("Outputs", [])}
        table = outputs.get("RoomTableName")
        api_url = outputs.get("ApiUrl")
        if not table:
            raise _fail(f"quay admin bootstrap-token: stack {stack} has no RoomTableName output", 2)
    secret, principal = TokenStore(str(table), client=session.resource("dynamodb").meta.client).issue(
        None, "admin", admin=True)
    return {"token": secret, "token_id": principal.token_id, "admin": True, "url": api_url}


@app.command()
def post(room: str, text: str, to: Annotated[list[str] | None, typer.Option("--to", help="An agent to wake; repeatable.")] = None,
         idempotency_key: Annotated[str | None, typer.Option(help="Reuse a key to make a retry safe.")] = None,
         url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Post a message into a room (as the token's person)."""
    _print(_run(lambda: _client(url, token).post(room, text, to or [], idempotency_key=idempotency_key)))


@app.command()
def task(room: str, to: str, title: str, body: Annotated[str, typer.Option(help="The task's body.")] = "",
         url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Create a task for an agent of the room."""
    _print(_run(lambda: _client(url, token).task(room, to, title, body)))


@app.command()
def approvals(room: str, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Pending approval requests of your company's agents in a room."""
    items = _run(lambda: _client(url, token).approvals(room))
    if not items:
        print("no pending approval requests")
    for a in items:
        print(visible(f"{a['id']}  {a['agent_id']}: {a['summary']}  ({a['status']}, {a['created_at']})"))


@app.command()
def approve(room: str, approval_id: str, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Approve a held action (your company's agents only)."""
    _print(_run(lambda: _client(url, token).approve(room, approval_id)))


@app.command()
def deny(room: str, approval_id: str, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Deny a held action (your company's agents only)."""
    _print(_run(lambda: _client(url, token).deny(room, approval_id)))


@app.command("room")
def room_cmd(room: str, as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
             url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """The room's transcript, oldest first."""
    messages = _run(lambda: _client(url, token).transcript(room))
    if as_json:
        _print(messages)
        return
    for m in messages:
        who = m["author"]["id"] + (f" ({m['author']['company']})" if m["author"].get("company") else "")
        print(visible(f"[{m['created_at'][:19]}] {who} [{m['kind']}]: {m['text']}"))


@app.command()
def ledger(run: Annotated[str | None, typer.Argument(help="A run id: show that run in full.")] = None,
           room: Annotated[str | None, typer.Option(help="List your company's runs in this room.")] = None,
           url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """The run ledger: one run (RUN) or your company's runs in a room (--room)."""
    if run is None and room is None:
        raise _fail("quay ledger: give a RUN id or --room ROOM", 2)
    client = _client(url, token)

    def print(line: str) -> None:  # noqa: A001 - every ledger line may hold provider or model text
        builtins.print(visible(line))

    if run is not None:
        detail = _run(lambda: client.run(run))
        r = detail["run"]
        print(f"run {r['run_id']}  agent {r['agent_id']} ({r['company']})  room {r['room_id']}  status {r['status']}")
        print(f"  wake {r['wake_id']} (hop {r['hop']})  started {r['started_at']}  ended {r.get('ended_at') or '-'}")
        if r.get("reply_message_id"):
            print(f"  reply {r['reply_message_id']}" + ("  (truncated)" if r.get("reply_truncated") else ""))
        if r.get("error_class"):
            print(f"  error {r['error_class']}: {r.get('error_message') or ''}")
        from quaylocal.render import request_line

        for q in detail["requests"]:
            print("  " + request_line(q))
        for a in detail["actions"]:
            print(f"  action {a['index']} {a['kind']} -> {a['target']}: {a['decision']} / {a['outcome']}"
                  + (f" ({a['reason']})" if a.get("reason") else ""))
        for item in r.get("not_done") or []:
            print(f"  not done: {item}")
        return
    for r in _run(lambda: client.runs(str(room))):
        print(f"{r['run_id']}  {r['agent_id']}  {r['status']}  {r['started_at']}")


@app.command()
def chaos(
    full: Annotated[bool, typer.Option("--full", help="Every point of every phase alone (slow), "
                                                      "not the grouped matrix `make test` plays.")] = False,
    wave: Annotated[int, typer.Option(help="Cases played side by side on one local stack.")] = 16,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Inject faults at every phase of a run on the local stack (crashes, deaths retried by Step
    Functions, StopExecution, dropped stream records, repeated wakes) and check the tables: print
    injection point x outcome and the totals. Exit status 1 on a duplicate, a non-final ledger
    entry or any other failed check."""
    import logging

    from quaylocal.chaos import render, run_matrix

    logging.getLogger("moto.stepfunctions").setLevel(logging.CRITICAL)  # failed runs are the point here
    out = sys.stdout
    sys.stdout = sys.stderr  # handler logs go to stderr; stdout carries only the result
    try:
        report, _trace = run_matrix(full=full, wave=wave,
                                    progress=lambda r: print(f"quay chaos: {len(r)} cases played", file=sys.stderr))
    finally:
        sys.stdout = out
    if as_json:
        print(json.dumps({"cases": [c.__dict__ for c in report.cases], "points": sum(c.faults for c in report.cases),
                          "runs": report.runs, "duplicates": report.duplicates, "non_final": report.non_final,
                          "ok": report.ok, "seconds": round(report.seconds, 1)}, indent=2))
    else:
        print(render(report))
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def version() -> None:
    """Print the version."""
    from importlib.metadata import version as v

    print(v("quayutec"))


def main() -> None:
    """The `quay` command: every error is one line on stderr and a non-zero exit, never a traceback."""
    from quaylocal import calls

    calls.install_from_environment()  # only when the test suite asks (QUAY_CALL_LOG)
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, exit 1
        from quaylocal.terminal import visible

        print(visible(" ".join(f"quay: {type(exc).__name__}: {exc}".split())), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
