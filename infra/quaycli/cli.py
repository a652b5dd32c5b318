"""The `quay` command line: the client of a stage's room API (``quay dev`` on 127.0.0.1 or a
deployed stage, over HTTP) and the commands that need no engine. The commands that run the local
engine (``quay dev``, ``quay demo``, ``quay chaos``) are wired onto :data:`app` by the composition
entry point (:mod:`quay.main`); nothing here imports the engine or the lab."""

from __future__ import annotations

import builtins
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core

from quaycli.terminal import visible

app = typer.Typer(
    help="Quayutec: the serverless runtime for always-on agents sharing one room.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)  # docstrings reflow: their single line breaks are not kept


# ----------------------------------------------------------------------------- the room API
UrlOpt = Annotated[
    str, typer.Option("--url", envvar="QUAY_URL", help="The API's base URL (quay dev or a deployed stage).")
]
TokenOpt = Annotated[str, typer.Option("--token", envvar="QUAY_TOKEN", help="Your bearer token.")]
DEFAULT_URL = "http://127.0.0.1:8787"


def _fail(message: str, code: int = 1) -> typer.Exit:
    """Print one line to stderr (untrusted parts made visible) and give the Exit to raise."""
    from quaycli.terminal import visible

    print(visible(" ".join(str(message).split())), file=sys.stderr)
    return typer.Exit(code)


#: The API this command talks to (``--url``/``QUAY_URL``) and whether a token was given: set by
#: :func:`_client`, read by :func:`_run` to add the hint a 401 or an unreachable API needs (one
#: command per process).
_TARGET: dict[str, object] = {}


def _client(url: str, token: str):
    from urllib.parse import urlsplit

    from quaycli.client import QuayClient

    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:
        ok = False
    if not ok:
        raise _fail(f"quay: --url {url!r} is not an http:// or https:// address (e.g. {DEFAULT_URL})", 2)
    _TARGET.update(url=url, token=bool(token))
    return QuayClient(url, token or None)


def _run(fn, not_found: str = ""):
    """Call the API; an HTTP error is printed (status and the API's message) with exit status 1.
    ``not_found``: a hint added to a 404."""
    from quaycli.client import ApiError

    try:
        return fn()
    except ApiError as exc:
        problems = (
            [
                f"{f.get('field')}: {f.get('problem')}"
                for f in (exc.body or {}).get("fields") or []
                if isinstance(f, dict)
            ]
            if isinstance(exc.body, dict)
            else []
        )
        more = f" ({'; '.join(problems)})" if len(problems) > 1 else ""
        if exc.status == 401:
            more += (
                " (no token given: pass --token or set QUAY_TOKEN; on quay dev, `quay admin issue-token "
                "COMPANY MEMBER` with the admin token gives one)"
                if _TARGET.get("token") is False
                else " (the API refused this token: revoked, mistyped, or issued by another stack?)"
            )
        if exc.status == 404 and not_found:
            more += f" ({not_found})"
        raise _fail(f"quay: {exc}{more}", 1) from None
    except (OSError, ValueError) as exc:  # refused, unreachable, a URL urllib cannot use
        from urllib.error import URLError

        where = f" at {_TARGET['url']}" if _TARGET.get("url") else ""
        why = exc.reason if isinstance(exc, URLError) else exc  # "[Errno 111] Connection refused"
        raise _fail(
            f"quay: cannot reach the API{where}: {why} (is `quay dev` running? --url or QUAY_URL names the API)", 2
        ) from None


def _json_text(data) -> str:
    """``data`` as indented JSON for machines and terminals alike: non-ASCII text as itself (``→``,
    not ``\\u2192``), but control, format and separator characters (ESC, C1, U+202E ...) as
    ``\\uXXXX`` escapes, which are still the same JSON string."""
    import unicodedata

    out = []
    for ch in json.dumps(data, indent=2, ensure_ascii=False):
        if ch in "\n" or unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"):
            out.append(ch)
        elif ord(ch) > 0xFFFF:  # a surrogate pair, as JSON spells characters beyond the BMP
            code = ord(ch) - 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{ord(ch):04x}")
    return "".join(out)


def _print(data) -> None:
    print(_json_text(data))


def _show(
    data: Any,
    as_json: bool,
    lines: Callable[[Any], Iterable[str]],
    empty: str | None = None,
    listing: str | None = None,
) -> None:
    """``data`` as indented JSON (``--json``, for machines), or as the human ``lines(data)``, each
    made visible (``empty``: the line said instead when ``data`` is an empty list). ``listing``:
    ``data`` is a list, printed as the API answers a listing, ``{listing: [...]}`` (docs/api.md)."""
    if as_json:
        _print({listing: data} if listing is not None else data)
        return
    if empty is not None and not data:
        print(empty)
    for line in lines(data):
        _say(line)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (for machines) instead of text.")]


def _say(line: str) -> None:
    """One line of human output; any untrusted part made visible (design §5)."""
    print(visible(line))


admin = typer.Typer(
    help="Operator commands: companies, people and tokens (need an operator token). "
    "Their answer is always JSON (a token is for piping, e.g. to jq -r .token).",
    no_args_is_help=True,
)
AdminJsonOpt = Annotated[bool, typer.Option("--json", help="JSON (the default and only form here).")]
app.add_typer(admin, name="admin")


@admin.command("create-company")
def admin_create_company(
    company: str,
    person: Annotated[list[str] | None, typer.Option("--person", help="A person of the company; repeatable.")] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
    as_json: AdminJsonOpt = False,
) -> None:
    """Create a company with its people."""
    _print(_run(lambda: _client(url, token).create_company(company, person or [])))


@admin.command("set-max-runs")
def admin_set_max_runs(
    company: str,
    runs: Annotated[int, typer.Argument(help="Runs of its agents active at once, 1 to 1000.")],
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
    as_json: AdminJsonOpt = False,
) -> None:
    """Set how many runs of a company's agents may be active at once (docs/design.md §12.3)."""
    _print(_run(lambda: _client(url, token).set_max_concurrent_runs(company, runs)))


@admin.command("add-person")
def admin_add_person(
    company: str, person: str, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "", as_json: AdminJsonOpt = False
) -> None:
    """Add a person to a company."""
    _print(_run(lambda: _client(url, token).add_person(company, person)))


@admin.command("issue-token")
def admin_issue_token(
    company: str, member: str, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "", as_json: AdminJsonOpt = False
) -> None:
    """Issue a bearer token for a person of a company (printed once; only its hash is stored)."""
    _print(_run(lambda: _client(url, token).issue_token(company, member)))


@admin.command("revoke-token")
def admin_revoke_token(
    company: str, token_id: str, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "", as_json: AdminJsonOpt = False
) -> None:
    """Revoke a token by its id."""
    _print(_run(lambda: _client(url, token).revoke_token(company, token_id)))


token_app = typer.Typer(
    no_args_is_help=True,
    help="Your company's tokens: issue one for a person of your company, list them, revoke one.",
)
app.add_typer(token_app, name="token")


@token_app.command("issue")
def token_issue(
    company: str, person: str, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "", as_json: AdminJsonOpt = False
) -> None:
    """Issue a token for a person of your company (printed once, as JSON: pipe it to jq -r .token)."""
    _print(_run(lambda: _client(url, token).issue_token(company, person)))


@token_app.command("list")
def token_list(company: str, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Your company's tokens: ids, people, when issued, revoked or not (never a token)."""
    tokens = _run(lambda: _client(url, token).tokens(company))
    _show(
        tokens,
        as_json,
        lambda ts: [
            f"{t['token_id']}  {t['member']}  {t['created_at']}" + ("  revoked" if t.get("revoked") else "") for t in ts
        ],
        empty="no tokens",
        listing="tokens",
    )


@token_app.command("revoke")
def token_revoke(
    company: str, token_id: str, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "", as_json: AdminJsonOpt = False
) -> None:
    """Revoke one of your company's tokens by its id."""
    _print(_run(lambda: _client(url, token).revoke_token(company, token_id)))


@app.command()
def audit(
    company: str,
    limit: Annotated[int, typer.Option(help="How many entries, newest first (1 to 200).")] = 50,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Your company's audit trail: who created it, added its people, issued and revoked its tokens
    and set its run cap (an operator or one of you), and when."""
    entries = _run(lambda: _client(url, token).audit(company, limit))
    _show(
        entries,
        as_json,
        lambda es: [
            f"{e['at'][:19]}  {e['actor_kind']} {e['actor']}  {e['action']}  {e['subject']}"
            + (f"  ({e['detail']})" if e.get("detail") else "")
            for e in es
        ],
        empty="no entries",
        listing="entries",
    )


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


def _bootstrap(session, stack: str | None, table: str | None) -> dict:
    from quayutec.dal.auth import TokenStore

    api_url = None
    if stack:
        outputs = {
            o["OutputKey"]: o["OutputValue"]
            for o in session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
        }
        table = outputs.get("RoomTableName")
        api_url = outputs.get("ApiUrl")
        if not table:
            raise _fail(f"quay admin bootstrap-token: stack {stack} has no RoomTableName output", 2)
    secret, principal = TokenStore(str(table), client=session.resource("dynamodb").meta.client).issue(
        None, "admin", admin=True
    )
    return {"token": secret, "token_id": principal.token_id, "admin": True, "url": api_url}


@admin.command("backfill-api-keys")
def admin_backfill_api_keys(
    stack: Annotated[str, typer.Option(help="A deployed stack's name, Quayutec-<stage> (its RoomTableName output).")],
    region: Annotated[str | None, typer.Option(help="AWS region (default: your AWS configuration's).")] = None,
) -> None:
    """Give each company created before companies had API keys its own key, so the stage throttles
    it on its own (docs/design.md §5), with your AWS credentials; safe to run again."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from quaycli.backfill import backfill
    from quayutec.errors import Misconfigured

    if not stack.startswith("Quayutec-"):
        raise _fail("quay admin backfill-api-keys: --stack is a stack name, Quayutec-<stage>", 2)
    try:
        session = boto3.session.Session(region_name=region)
        outputs = {
            o["OutputKey"]: o["OutputValue"]
            for o in session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
        }
        table = outputs.get("RoomTableName")
        if not table:
            raise _fail(f"quay admin backfill-api-keys: stack {stack} has no RoomTableName output", 2)
        done = backfill(
            session.resource("dynamodb").meta.client,
            session.client("apigateway"),
            table=table,
            stage=stack.removeprefix("Quayutec-"),
        )
    except (BotoCoreError, ClientError) as exc:  # no region, no credentials, no such stack or table
        raise _fail(f"quay admin backfill-api-keys: {exc}", 1) from None
    except Misconfigured as exc:  # a stage deployed before the usage plan: deploy it first
        raise _fail(f"quay admin backfill-api-keys: {exc} (deploy this version first)", 1) from None
    _print(done.as_json())


@app.command()
def post(
    room: str,
    text: str,
    to: Annotated[list[str] | None, typer.Option("--to", help="An agent to wake; repeatable.")] = None,
    idempotency_key: Annotated[str | None, typer.Option(help="Reuse a key to make a retry safe.")] = None,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Post a message into a room (as the token's person); it wakes the agents in --to and those
    it @mentions (their replies arrive a few seconds later: `quay room ROOM`)."""
    m = _run(lambda: _client(url, token).post(room, text, to or [], idempotency_key=idempotency_key))
    if as_json:
        _print(m)
        return
    woken = list(dict.fromkeys([*(m.get("to") or []), *(m.get("mentions") or [])]))
    _say(
        f"posted {m['id']}"
        + (
            f"; wakes {', '.join(woken)} (unless paused, or its chain is full or stopped: quay ledger --room {room})"
            if woken
            else f"; wakes no agent (@name or --to wakes an agent placed in the room: quay member list {room})"
        )
    )


class _TaskGroup(typer.core.TyperGroup):
    """``quay task ROOM TO TITLE`` creates a task, as it always did (the ``create`` command);
    ``quay task list ROOM`` lists them: a first word that names no command is a room."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # (typer's vendored click Context)
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["create", *args]
        return super().parse_args(ctx, args)


task_app = typer.Typer(
    cls=_TaskGroup,
    no_args_is_help=True,
    help="A room's tasks: `quay task ROOM TO TITLE` creates one, `quay task list ROOM` lists them.",
)
app.add_typer(task_app, name="task")


def _task_line(t: dict) -> str:
    by = (t.get("created_by") or {}).get("id") or "?"
    result = f" -> {t['result']}" if t.get("result") else ""
    return f'{t["id"]} [{t["status"]}] "{t["title"]}" for {t["to"]} from {by}{result}'


@task_app.command("create")
def task(
    room: str,
    to: str,
    title: str,
    body: Annotated[str, typer.Option(help="The task's body.")] = "",
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Create a task for an agent of the room (also `quay task ROOM TO TITLE`)."""
    t = _run(lambda: _client(url, token).task(room, to, title, body))
    _show(t, as_json, lambda t: [f'task {t["id"]} [{t["status"]}] "{t["title"]}" for {t["to"]}'])


@task_app.command("list")
def task_list(
    room: str,
    status: Annotated[str, typer.Option(help="open, closed or all.")] = "open",
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """A room's tasks (open ones unless --status): id, status, title, assignee, creator, result."""
    if status not in ("open", "closed", "all"):
        raise _fail(f"quay task list: --status is open, closed or all, not {status!r}", 2)
    tasks = _run(lambda: _client(url, token).tasks(room, status))
    _show(
        tasks,
        as_json,
        lambda tasks: map(_task_line, tasks),
        empty=f"no {'' if status == 'all' else status + ' '}tasks",
        listing="tasks",
    )


@app.command()
def whoami(as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Who your token is: its person and company (or an operator token)."""
    me = _run(lambda: _client(url, token).me())
    _show(
        me,
        as_json,
        lambda m: [
            "an operator token" + (f" ({m['member']})" if m.get("member") else "")
            if m.get("admin") or not m.get("company")
            else f"{m['member']} of {m['company']}"
        ],
    )


memory_app = typer.Typer(no_args_is_help=True, help="A room's memory lines (the ones your company may read).")
app.add_typer(memory_app, name="memory")


def _memory_line(m: dict) -> str:
    seen = f"{m['company']} only" if m["visibility"] == "company" else "room"
    author = m.get("author") or {}
    return f"{m['id']} ({seen}) {m['text']}  by {author.get('id') or '?'} ({author.get('company') or '-'})"


@memory_app.command("list")
def memory_list(room: str, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """The memory lines of a room your company may read: the room's and your company's own."""
    lines = _run(lambda: _client(url, token).memory(room))
    _show(lines, as_json, lambda lines: map(_memory_line, lines), empty="no memory lines", listing="lines")


@app.command()
def approvals(room: str, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Pending approval requests of your company's agents in a room (decided ones: `quay room ROOM`)."""
    items = _run(lambda: _client(url, token).approvals(room))
    _show(
        items,
        as_json,
        lambda items: [
            f"{a['id']}  {a['agent_id']}: {a['summary']}  ({a['status']}, {a['created_at']})" for a in items
        ],
        empty="no pending approval requests",
        listing="approvals",
    )


_APPROVAL_IDS = "an approval's id is RUN_ID:INDEX: `quay approvals ROOM` lists your company's"


def _decided(a: dict) -> None:
    _say(
        f"approval {a['id']} {a['agent_id']}: {a['summary']} -> {a['status']}"
        + (f" by {a['decided_by']}" if a.get("decided_by") else "")
    )


@app.command()
def approve(
    room: str, approval_id: str, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = ""
) -> None:
    """Approve a held action (your company's agents only)."""
    a = _run(lambda: _client(url, token).approve(room, approval_id), not_found=_APPROVAL_IDS)
    _print(a) if as_json else _decided(a)


@app.command()
def deny(
    room: str, approval_id: str, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = ""
) -> None:
    """Deny a held action (your company's agents only)."""
    a = _run(lambda: _client(url, token).deny(room, approval_id), not_found=_APPROVAL_IDS)
    _print(a) if as_json else _decided(a)


# ----------------------------------------------------------------------------- rooms
class _RoomGroup(typer.core.TyperGroup):
    """``quay room ROOM`` (the form before the subcommands existed) is ``quay room show ROOM``."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["show", *args]
        return super().parse_args(ctx, args)


room_app = typer.Typer(
    cls=_RoomGroup,
    no_args_is_help=True,
    help="Rooms: create one, list yours, show one (members, agents, transcript, approvals; "
    "`quay room ROOM` is `quay room show ROOM`); accept, decline an invitation; leave one.",
)
app.add_typer(room_app, name="room")


def _room_head(r: dict) -> list[str]:
    agents = ", ".join(f"@{a.get('name') or a['id']} ({a['id']})" for a in r.get("agents") or []) or "none"
    hop = f"  hop limit {r['hop_limit']}" if r.get("hop_limit") is not None else ""
    if r.get("max_runs_per_chain") is not None:
        hop += f"  at most {_count(r['max_runs_per_chain'], 'run')} a chain"
    invited = f"  invited: {', '.join(r['invited'])} (not yet accepted)" if r.get("invited") else None
    return [
        f"room {r['id']}" + (f'  "{r["name"]}"' if r.get("name") else "") + hop,
        f"  members: {', '.join(r.get('members') or []) or 'none'}",
        *([invited] if invited else []),
        f"  agents: {agents}",
    ]


@room_app.command("create")
def room_create(
    name: Annotated[str | None, typer.Argument(help="A label for people (the service generates the id).")] = None,
    member: Annotated[list[str] | None, typer.Option("--member", help="Another member company; repeatable.")] = None,
    hop_limit: Annotated[
        int | None, typer.Option(help="How many hops of agent-to-agent wakes the room allows.")
    ] = None,
    max_runs_per_chain: Annotated[
        int | None,
        typer.Option(help="How many runs one chain of agent wakes may start (default 24, at most 200)."),
    ] = None,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Create a room (your company is always a member); prints its generated id."""
    r = _run(
        lambda: _client(url, token).create_room(
            name, member or [], hop_limit=hop_limit, max_runs_per_chain=max_runs_per_chain
        )
    )
    _show(r, as_json, _room_head)


@room_app.command("list")
def room_list(as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """The rooms your company is a member of: id, name, members."""
    client = _client(url, token)
    rooms = [_run(lambda rid=rid: client.room(rid)) for rid in _run(client.rooms)]
    _show(
        rooms,
        as_json,
        lambda rooms: [
            f"{r['id']}  {r.get('name') or '-'}  members: {', '.join(r.get('members') or [])}" for r in rooms
        ],
        empty="no rooms",
        listing="rooms",
    )


def _invitation_line(i: dict) -> str:
    at = f" at {i['invited_at'][:19]}" if i.get("invited_at") else ""
    name = f" ({i['room_name']})" if i.get("room_name") else ""
    return f"{i['room_id']}{name}  invited by {i['invited_by']}{at}: quay room accept|decline {i['room_id']}"


@app.command()
def invitations(as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Your company's pending room invitations: a room you are invited to stays unseen until a
    person of your company accepts (quay room accept ROOM) or declines (quay room decline ROOM)."""
    found = _run(lambda: _client(url, token).invitations())
    _show(
        found,
        as_json,
        lambda found: [_invitation_line(i) for i in found],
        empty="no invitations",
        listing="invitations",
    )


@room_app.command("accept")
def room_accept(room: str, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Accept your company's invitation to a room: your company becomes a member (prints the room)."""
    r = _run(
        lambda: _client(url, token).accept(room),
        not_found="no pending invitation of your company to that room: `quay invitations` lists them",
    )
    _show(r, as_json, _room_head)


@room_app.command("decline")
def room_decline(room: str, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Decline your company's invitation to a room: the room stays unseen."""
    r = _run(
        lambda: _client(url, token).decline(room),
        not_found="no pending invitation of your company to that room: `quay invitations` lists them",
    )
    _show(r, as_json, lambda r: [f"declined the invitation to room {r['room_id']}"])


@room_app.command("leave")
def room_leave(room: str, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Your company leaves a room: it no longer sees it (a member invites it again to return); your
    agents are taken out of it and their runs there stop, those waiting on approvals too."""
    r = _run(lambda: _client(url, token).leave(room), not_found="your company is not a member of that room")

    def line(r: dict) -> str:
        ended = f" ({_count(r['stopping'], 'run', 'runs')} waiting on approvals ended)" if r.get("stopping") else ""
        return f"{r['left']} left room {r['room_id']}{ended}"

    _show(r, as_json, lambda r: [line(r)])


def _approval_line(a: dict) -> str:
    decided = f" by {a['decided_by']}" if a.get("decided_by") else ""
    state = {
        "pending": "pending: quay approve|deny ROOM " + a["id"],
        "deciding": "deciding (an answer is on its way)",
        "approved": "approved",
        "rejected": "denied",
        "expired": "expired",
    }.get(a["status"], a["status"])
    what = "; ".join(f"{k}: {v}" for k, v in (a.get("fields") or {}).items())  # what a yes writes
    what = f" ({what[:200]}{'…' if len(what) > 200 else ''})" if what else ""
    return f"[{a['created_at'][:19]}] approval {a['id']} {a['agent_id']}: {a['summary']}{what} -> {state}{decided}"


@room_app.command("show")
def room_show(room: str, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """A room: its members and agents, then the transcript, oldest first, with your agents'
    approval requests and their outcomes (approved, denied, pending) in place."""
    client = _client(url, token)
    info = _run(
        lambda: client.room(room),
        not_found="a room is named by its id, not its label: `quay room list` shows yours, "
        "`quay invitations` the rooms your company is invited to (readable once accepted: "
        "`quay room accept ROOM`); `quay room --help` the commands",
    )
    messages = _run(lambda: client.transcript(room))
    approvals = _run(lambda: client.approvals(room, "all"))
    if as_json:
        _print({"room": info, "messages": messages, "approvals": approvals})
        return
    for line in _room_head(info):
        _say(line)
    events = sorted(
        [(m["created_at"], 0, m) for m in messages] + [(a["created_at"], 1, a) for a in approvals],
        key=lambda e: (e[0], e[1]),
    )
    if not events:
        print("no messages yet")
    for _, kind, item in events:
        if kind:
            _say(_approval_line(item))
            continue
        who = item["author"]["id"] + (f" ({item['author']['company']})" if item["author"].get("company") else "")
        to = f" -> {', '.join(item['to'])}" if item.get("to") else ""
        # a message's own lines stay lines (indented under it); everything else made visible
        text = visible(item["text"], newlines=True).replace("\n", "\n    ")
        print(visible(f"[{item['created_at'][:19]}] {who} [{item['kind']}]{to}: ") + text)


# ----------------------------------------------------------------------------- members, agents
member_app = typer.Typer(no_args_is_help=True, help="A room's members: companies and agents.")
app.add_typer(member_app, name="member")


@member_app.command("add")
def member_add(
    room: str,
    company: Annotated[list[str] | None, typer.Option("--company", help="A company to invite; repeatable.")] = None,
    agent: Annotated[
        list[str] | None, typer.Option("--agent", help="One of your agents to place in the room; repeatable.")
    ] = None,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Invite companies to a room (each becomes a member once a person of it accepts: quay room
    accept ROOM) and place your agents in it. Prints one line per invitation, then the room;
    --json: {"invitations": [...], "room": {...}}."""
    if not company and not agent:
        raise _fail("quay member add: give --company COMPANY or --agent AGENT", 2)
    client = _client(url, token)
    invited = [_run(lambda c=c: client.add_member(room, c)) for c in company or []]
    info: dict | None = None
    for a in agent or []:
        info = _run(lambda a=a: client.add_agent(room, a))
    if info is None:
        info = _run(lambda: client.room(room))
    out = {"invitations": invited, "room": info}
    _show(
        out,
        as_json,
        lambda out: [
            *(f"invited {i['company']}: a person of it accepts with quay room accept {i['room_id']}" for i in invited),
            *_room_head(out["room"]),
        ],
    )


@member_app.command("list")
def member_list(room: str, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """A room's member companies and agents."""
    info = _run(lambda: _client(url, token).room(room))
    _show(info, as_json, _room_head)


agent_app = typer.Typer(no_args_is_help=True, help="Your company's agents.")
app.add_typer(agent_app, name="agent")


def _agent_line(a: dict) -> str:
    key = "key stored" if a.get("key_stored") else "no key stored"
    if a.get("role_arn"):  # docs/design.md §5: the trust policy needs the external id
        key = f"role {a['role_arn']}  external id {a.get('external_id')}"
    base = f"  base_url {a['base_url']}" if a.get("base_url") else ""
    wake = f"  wakes from {a['wake_from']}" if a.get("wake_from", "anyone") != "anyone" else ""
    wake += f"  context {_count(a['max_context_tokens'], 'token')}" if a.get("max_context_tokens") else ""
    paused = f"  paused by {a.get('paused_by')} at {a['paused_at']}" if a.get("paused_at") else ""
    return f"{a['id']}  ({a['company']})  {a['provider']} {a['model']}  {key}{base}{wake}{paused}"


@agent_app.command("register")
def agent_register(
    agent_id: Annotated[
        str,
        typer.Argument(
            metavar="NAME",
            help="The agent's name in your company (letters, digits, _ and -); its id is "
            "COMPANY.NAME, and people mention it as @NAME.",
        ),
    ],
    provider: Annotated[str, typer.Option(help="anthropic, openai, openai-compatible or bedrock.")],
    model: Annotated[str, typer.Option(help="The provider's model id.")],
    instructions: Annotated[str, typer.Option(help="The agent's instructions.")] = "",
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="QUAY_AGENT_API_KEY",
            help="The provider key (stored in Secrets Manager, never shown); leave out when your "
            "company has one for this provider.",
        ),
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="An openai-compatible agent's model address.")] = None,
    role_arn: Annotated[
        str | None,
        typer.Option(
            help="A bedrock agent's company role instead of a key: arn:aws:iam::ACCOUNT:role/quayutec-bedrock-NAME; "
            "put the external id shown in its trust policy (docs/deploy.md)."
        ),
    ] = None,
    wake_from: Annotated[
        str | None,
        typer.Option(help="Who may wake it: anyone (the default), people, or own_company."),
    ] = None,
    max_context_tokens: Annotated[
        int | None,
        typer.Option(
            help="The most tokens a run's prompt and reply may take (default 60,000; at least 8,000, at "
            "most the model's context window): the oldest room context is left out to fit."
        ),
    ] = None,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Register an always-on agent of your company."""
    a = _run(
        lambda: _client(url, token).register_agent(
            agent_id,
            provider,
            model,
            instructions=instructions,
            api_key=api_key,
            base_url=base_url,
            wake_from=wake_from,
            max_context_tokens=max_context_tokens,
            role_arn=role_arn,
        )
    )
    _show(a, as_json, lambda a: [_agent_line(a)])


AgentArg = Annotated[str, typer.Argument(metavar="AGENT", help="Your agent's name or id.")]


@agent_app.command("pause")
def agent_pause(agent: AgentArg, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Pause your agent: no run of it starts until you resume it (a notice in its rooms says so)."""
    a = _run(lambda: _client(url, token).pause_agent(agent))
    stopping = int(a.get("stopping") or 0)
    ended = [f"  {_count(stopping, 'run', 'runs')} waiting on approvals ended"] if stopping else []
    _show(a, as_json, lambda a: [_agent_line(a), "  its running runs end stopped, writing nothing more", *ended])


@agent_app.command("resume")
def agent_resume(agent: AgentArg, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Resume your paused agent: the next message or task meant for it wakes it again."""
    a = _run(lambda: _client(url, token).resume_agent(agent))
    _show(a, as_json, lambda a: [_agent_line(a)])


@agent_app.command("update")
def agent_update(
    agent: AgentArg,
    model: Annotated[str | None, typer.Option(help="The provider's model id.")] = None,
    instructions: Annotated[str | None, typer.Option(help="The agent's instructions.")] = None,
    wake_from: Annotated[str | None, typer.Option(help="Who may wake it: anyone, people, or own_company.")] = None,
    max_context_tokens: Annotated[
        int | None, typer.Option(help="The most tokens a run's prompt and reply may take (checked against the model).")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="QUAY_AGENT_API_KEY",
            help="A new provider key for your company (every agent of it on this provider uses it).",
        ),
    ] = None,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Change your agent: what you give changes from its next run; the rest stays."""
    if all(v is None for v in (model, instructions, wake_from, max_context_tokens, api_key)):
        raise _fail(
            "quay agent update: give at least one of --model, --instructions, --wake-from, "
            "--max-context-tokens, --api-key",
            2,
        )
    a = _run(
        lambda: _client(url, token).update_agent(
            agent,
            model=model,
            instructions=instructions,
            wake_from=wake_from,
            max_context_tokens=max_context_tokens,
            api_key=api_key,
        )
    )
    _show(a, as_json, lambda a: [_agent_line(a)])


@agent_app.command("delete")
def agent_delete(agent: AgentArg, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Delete your agent for good: no run of it starts, it leaves its rooms, its rules end; its past
    runs stay in the ledger and its name is not given again."""
    a = _run(lambda: _client(url, token).delete_agent(agent))
    stopping = int(a.get("stopping") or 0)
    ended = [f"  {_count(stopping, 'run', 'runs')} waiting on approvals ended"] if stopping else []
    _show(a, as_json, lambda a: [f"deleted {a['id']} at {a.get('deleted_at')}", *ended])


@agent_app.command("list")
def agent_list(as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """Your company's agents."""
    agents = _run(lambda: _client(url, token).agents())
    _show(agents, as_json, lambda agents: map(_agent_line, agents), empty="no agents", listing="agents")


chain_app = typer.Typer(no_args_is_help=True, help="Chains of agent wakes (a run's chain_id: quay ledger).")
app.add_typer(chain_app, name="chain")


@chain_app.command("stop")
def chain_stop(
    room: Annotated[str, typer.Argument(metavar="ROOM", help="The room's id.")],
    chain: Annotated[str, typer.Argument(metavar="CHAIN", help="The chain's id: a run's chain_id.")],
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Stop a chain of agent wakes: no further run of it starts (a notice in the room says who)."""
    r = _run(lambda: _client(url, token).stop_chain(room, chain))
    _show(
        r,
        as_json,
        lambda r: [
            f"chain {r['chain_id']} "
            + ("stopped" if r["stopped"] else "was stopped already")
            + "; its running runs end stopped, writing nothing more"
            + (f" ({_count(r['stopping'], 'run', 'runs')} waiting on approvals ended)" if r.get("stopping") else "")
        ],
    )


# ----------------------------------------------------------------------------- budgets and spend
budget_app = typer.Typer(no_args_is_help=True, help="Your company's budget over its agents' model spend.")
app.add_typer(budget_app, name="budget")


def _limits_text(b: dict) -> str:
    parts = [
        f"{label} {fmt(b[k])}"
        for k, label, fmt in (
            ("daily_usd", "daily", lambda v: f"${float(v):,.2f}"),
            ("monthly_usd", "monthly", lambda v: f"${float(v):,.2f}"),
            ("daily_tokens", "daily", lambda v: _count(v, "token")),
            ("monthly_tokens", "monthly", lambda v: _count(v, "token")),
        )
        if b.get(k) is not None
    ]
    return ", ".join(parts) or "no limit"


def _budget_lines(company: str, b: dict) -> list[str]:
    lines = [f"budget of {company}: {_limits_text(b)}"]
    lines += [f"  agent {name}: {_limits_text(limits)}" for name, limits in sorted((b.get("agents") or {}).items())]
    return lines


#: COMPANY of the company commands: optional, the company of the token by default (``GET /me``).
CompanyArg = Annotated[
    str | None, typer.Argument(help="Your company's id (default: the company your token belongs to).")
]


def _company(company: str | None, url: str, token: str) -> str:
    """``company``, or the company of the caller's token (``GET /me``); an operator token names none."""
    if company:
        return company
    me = _run(lambda: _client(url, token).me())
    if not me.get("company"):
        raise _fail("this token belongs to no company (an operator's): name the COMPANY", 2)
    return str(me["company"])


@budget_app.command("show")
def budget_show(
    company: CompanyArg = None, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = ""
) -> None:
    """Your company's budget: limits per UTC day and month (docs/design.md §12.4)."""
    company = _company(company, url, token)
    b = _run(lambda: _client(url, token).budget(company))
    _show(b, as_json, lambda b: _budget_lines(company, b))


@budget_app.command("set")
def budget_set(
    company: str,
    daily_usd: Annotated[float | None, typer.Option(help="USD per UTC day (models with a known price).")] = None,
    monthly_usd: Annotated[float | None, typer.Option(help="USD per UTC month.")] = None,
    daily_tokens: Annotated[int | None, typer.Option(help="Tokens per UTC day (models without a price).")] = None,
    monthly_tokens: Annotated[int | None, typer.Option(help="Tokens per UTC month.")] = None,
    agent: Annotated[
        list[str] | None,
        typer.Option("--agent", help="NAME:FIELD=VALUE, e.g. a1:daily_usd=5; repeatable."),
    ] = None,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Set (replace) your company's budget. A request that would pass a limit is not sent; the
    company gets a notice at 80 % and at 100 % of each limit, once per period."""
    body: dict = {
        k: v
        for k, v in (
            ("daily_usd", daily_usd),
            ("monthly_usd", monthly_usd),
            ("daily_tokens", daily_tokens),
            ("monthly_tokens", monthly_tokens),
        )
        if v is not None
    }
    agents: dict[str, dict] = {}
    for spec in agent or []:
        name, sep, rest = spec.partition(":")
        field, eq, value = rest.partition("=")
        if not (sep and eq and name and field in {"daily_usd", "monthly_usd", "daily_tokens", "monthly_tokens"}):
            raise _fail(
                f"quay budget set: --agent {spec!r}: write NAME:FIELD=VALUE, FIELD one of daily_usd, "
                "monthly_usd, daily_tokens, monthly_tokens",
                2,
            )
        try:
            agents.setdefault(name, {})[field] = int(value) if field.endswith("tokens") else float(value)
        except ValueError:
            raise _fail(f"quay budget set: --agent {spec!r}: {value!r} is not a number", 2) from None
    if agents:
        body["agents"] = agents
    b = _run(lambda: _client(url, token).set_budget(company, body))
    _show(b, as_json, lambda b: _budget_lines(company, b))


@app.command("spend")
def spend(
    company: CompanyArg = None,
    period: Annotated[str, typer.Option(help="day or month: the current UTC one.")] = "day",
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """What your company's agents spent this UTC day or month, against the budget."""
    if period not in ("day", "month"):
        raise _fail(f"quay spend: --period {period!r}: day or month", 2)
    company = _company(company, url, token)
    s = _run(lambda: _client(url, token).spend(company, period))

    def lines(s: dict) -> list[str]:
        def of(f: dict) -> str:
            usd = f"${f['spent_usd']:,.6f} spent, ${f['reserved_usd']:,.6f} reserved"
            if f.get("budget_usd") is not None:
                usd += f" of ${float(f['budget_usd']):,.2f}"
            tok = f"{f['spent_tokens']:,} tokens spent, {f['reserved_tokens']:,} reserved"
            if f.get("budget_tokens") is not None:
                tok += f" of {int(f['budget_tokens']):,}"
            return f"{usd}; {tok}"

        out = [f"spend of {s['company']} on {s['key']} (UTC {s['period']}): {of(s)}"]
        out += [
            f"  agent {a}: ${f['spent_usd']:,.6f}, {f['spent_tokens']:,} tokens" for a, f in sorted(s["agents"].items())
        ]
        out += [
            f"  model {m}: ${f['spent_usd']:,.6f}, {f['spent_tokens']:,} tokens" for m, f in sorted(s["models"].items())
        ]
        return out

    _show(s, as_json, lines)


# ----------------------------------------------------------------------------- rights policy
policy_app = typer.Typer(no_args_is_help=True, help="Your company's rights policy over its agents' actions.")
app.add_typer(policy_app, name="policy")

RULES = ("allow", "ask", "deny")


def _policy_lines(company: str, p: dict) -> list[str]:
    lines = [f"policy of {company}: default {p.get('default', 'allow')}"]
    lines += [f"  action {k}: {v}" for k, v in sorted((p.get("actions") or {}).items())]
    lines += [f"  cross-company {k}: {v}" for k, v in sorted((p.get("cross_company") or {}).items())]
    for agent, rules in sorted((p.get("agents") or {}).items()):
        lines += [f"  agent {agent} {k}: {v}" for k, v in sorted(rules.items())]
    return lines


def _rule(option: str, item: str, *, agent: bool = False) -> tuple[str | None, str, str]:
    key, sep, rule = item.partition("=")
    who, kind = (key.split(":", 1) if ":" in key else (None, key)) if agent else (None, key)
    if not sep or not kind or rule not in RULES or (agent and not who):
        shape = "AGENT:KIND=RULE" if agent else "KIND=RULE"
        raise _fail(f"quay policy set: {option} {item!r}: expected {shape}, RULE one of {', '.join(RULES)}", 2)
    return who, kind, rule


@policy_app.command("show")
def policy_show(
    company: CompanyArg = None, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = ""
) -> None:
    """Your company's rights policy (the most specific rule wins: agent, cross-company, action, default)."""
    company = _company(company, url, token)
    p = _run(lambda: _client(url, token).policy(company))
    _show(p, as_json, lambda p: _policy_lines(company, p))


#: The largest policy file ``quay policy set --file`` reads (a policy is a few KiB).
POLICY_FILE_MAX_BYTES = 1024 * 1024


@policy_app.command("set")
def policy_set(
    company: str,
    default: Annotated[str | None, typer.Option(help="allow, ask or deny: the rule of any other action.")] = None,
    action: Annotated[
        list[str] | None, typer.Option("--action", help="KIND=RULE, e.g. remember=ask; repeatable.")
    ] = None,
    cross_company: Annotated[
        list[str] | None,
        typer.Option("--cross-company", help="KIND=RULE for actions aimed at another company; repeatable."),
    ] = None,
    agent: Annotated[list[str] | None, typer.Option("--agent", help="AGENT:KIND=RULE; repeatable.")] = None,
    file: Annotated[Path | None, typer.Option(help="A whole policy (JSON or YAML) replacing the current one.")] = None,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Change your company's rights policy: each rule given replaces that rule of the current policy
    (--file replaces the whole policy). Prints the policy now in force."""
    if default is not None and default not in RULES:
        raise _fail(f"quay policy set: --default {default!r}: one of {', '.join(RULES)}", 2)
    if file is None and default is None and not (action or cross_company or agent):
        raise _fail("quay policy set: give --file, --default, --action, --cross-company or --agent", 2)
    client = _client(url, token)
    if file is not None:
        import yaml

        try:
            with file.open("rb") as f:  # bounded: --file /dev/zero must not read forever
                raw = f.read(POLICY_FILE_MAX_BYTES + 1)
            if len(raw) > POLICY_FILE_MAX_BYTES:
                raise _fail(
                    f"quay policy set: --file {file}: larger than {POLICY_FILE_MAX_BYTES // (1024 * 1024)} MiB, "
                    "not a policy",
                    2,
                )
            policy = yaml.safe_load(raw.decode("utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise _fail(f"quay policy set: --file {file}: {exc}", 2) from None
        if not isinstance(policy, dict):
            raise _fail(
                f"quay policy set: --file {file}: expected a mapping (default, actions, cross_company, agents)", 2
            )
    else:
        policy = _run(lambda: client.policy(company))
    if default is not None:
        policy["default"] = default
    for item in action or []:
        _, kind, rule = _rule("--action", item)
        policy.setdefault("actions", {})[kind] = rule
    for item in cross_company or []:
        _, kind, rule = _rule("--cross-company", item)
        policy.setdefault("cross_company", {})[kind] = rule
    for item in agent or []:
        who, kind, rule = _rule("--agent", item, agent=True)
        policy.setdefault("agents", {}).setdefault(who, {})[kind] = rule
    p = _run(lambda: client.set_policy(company, policy))
    _show(p, as_json, lambda p: _policy_lines(company, p))


# ----------------------------------------------------------------------------- room files
file_app = typer.Typer(no_args_is_help=True, help="A room's files: add (upload), list, rm.")
app.add_typer(file_app, name="file")

#: Content types by file name suffix (the kinds a room takes: quayutec.logic.extract).
CONTENT_TYPES = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".log": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
}


def _size(n: int) -> str:
    for unit, scale in (("MB", 1024 * 1024), ("kB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _file_line(f: dict) -> str:
    status = f["status"] + (f": {f['reason']}" if f.get("reason") else "")
    if f["status"] == "ready":
        status += f" ({_count(f.get('chunks', 0), 'chunk', 'chunks')})"
    who = f["uploader"]["id"] + (f" ({f['uploader']['company']})" if f["uploader"].get("company") else "")
    return f"{f['id']}  {f['name']}  {_size(int(f['size']))}  {f['kind']}  {status}  by {who}"


def _s3_problem(resp) -> str:
    import re

    text = resp.text or ""
    code, message = (re.search(rf"<{tag}>([^<]*)</{tag}>", text) for tag in ("Code", "Message"))
    said = ": ".join(m.group(1) for m in (code, message) if m) or text[:200]
    return f"HTTP {resp.status}" + (f" {said}" if said else "")


@file_app.command("add")
def file_add(
    room: str,
    path: Annotated[
        Path, typer.Argument(help="The file to upload (text, Markdown, CSV, JSON, HTML or PDF; at most 25 MB).")
    ],
    content_type: Annotated[str | None, typer.Option(help="Default: from the file name's extension.")] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait until the file is ready or failed (exit status 1 when failed).")
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds --wait waits.")] = 120.0,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Upload a file into a room: declared to the API, sent straight to the presigned upload URL,
    then ingested (status uploading, then ready or failed with a reason)."""
    import time

    from quaycli.client import upload_form
    from quayutec.resources import MAX_UPLOAD_BYTES

    try:
        size = path.stat().st_size
        if not path.is_file():
            raise _fail(f"quay file add: {path} is not a file", 2)
        if size > MAX_UPLOAD_BYTES:
            raise _fail(
                f"quay file add: {path.name} is {_size(size)} ({size} bytes), over the 25 MB limit "
                "for a room file; nothing uploaded",
                2,
            )
        if size == 0:
            raise _fail(f"quay file add: {path.name} is empty; nothing uploaded", 2)
        data = path.read_bytes()
    except OSError as exc:
        raise _fail(f"quay file add: cannot read {path}: {exc.strerror or exc}", 2) from None
    ctype = content_type or CONTENT_TYPES.get(path.suffix.lower())
    if ctype is None:
        raise _fail(
            f"quay file add: {path.name}: unknown kind (extension {path.suffix or 'none'}); the room takes "
            f"{', '.join(sorted(set(CONTENT_TYPES)))} files, or give --content-type",
            2,
        )
    client = _client(url, token)
    out = _run(lambda: client.add_file(room, path.name, ctype, len(data)))
    f, upload = out["file"], out["upload"]
    try:
        resp = upload_form(upload["url"], upload["fields"], data, filename=path.name, content_type=ctype)
    except (OSError, ValueError) as exc:
        raise _fail(f"quay file add: cannot reach the upload URL: {exc}", 2) from None
    if not resp.ok:
        raise _fail(f"quay file add: the upload of {path.name} was refused: {_s3_problem(resp)}", 1)
    if wait:
        deadline = time.monotonic() + timeout
        while f["status"] == "uploading":
            if time.monotonic() > deadline:
                raise _fail(f"quay file add: {path.name} ({f['id']}) still uploading after {timeout:g} s", 1)
            time.sleep(0.5)
            f = _run(lambda file_id=f["id"]: client.file(room, file_id))["file"]
    if as_json:
        _print(f)
    else:
        _say(
            _file_line(f)
            if wait
            else f"uploaded {f['name']} as {f['id']} ({_size(len(data))}, {f['kind']}); "
            "ingest follows (quay file list ROOM)"
        )
    if f["status"] == "failed":
        raise typer.Exit(1)


@file_app.command("list")
def file_list(room: str, as_json: JsonOpt = False, url: UrlOpt = DEFAULT_URL, token: TokenOpt = "") -> None:
    """A room's files: id, name, size, kind, status (with the reason of a failed one), uploader."""
    files = _run(lambda: _client(url, token).files(room))
    _show(files, as_json, lambda files: map(_file_line, files), empty="no files", listing="files")


@file_app.command("rm")
def file_rm(
    room: str,
    file_id: Annotated[str, typer.Argument(metavar="FILE", help="The file's id.")],
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Delete a file (your company's uploads only); it leaves the room's index."""
    f = _run(lambda: _client(url, token).delete_file(room, file_id))["file"]
    _show(f, as_json, lambda f: [f"deleted {f['name']} ({f['id']})"])


@app.command()
def ledger(
    run: Annotated[str | None, typer.Argument(help="A run id: show that run in full.")] = None,
    room: Annotated[str | None, typer.Option(help="List your company's runs in this room.")] = None,
    all_pages: Annotated[
        bool, typer.Option("--all", help="With --room: every run, page after page (default: the newest 50).")
    ] = False,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """The run ledger: one run (RUN) or your company's runs in a room (--room; --all: every page)."""
    if run is None and room is None:
        raise _fail("quay ledger: give a RUN id or --room ROOM", 2)
    client = _client(url, token)

    def runs_of(room_id: str) -> dict:
        return client.all_runs(room_id) if all_pages else client.run_list(room_id)

    if as_json:
        _print(_run(lambda: client.run(run)) if run is not None else _run(lambda: runs_of(str(room))))
        return

    def print(line: str) -> None:
        builtins.print(visible(line))

    if run is not None:
        detail = _run(lambda: client.run(run))
        r = detail["run"]
        print(f"run {r['run_id']}  agent {r['agent_id']} ({r['company']})  room {r['room_id']}  status {r['status']}")
        print(
            f"  wake {r['wake_id']} (hop {r['hop']}, chain {r.get('chain_id') or '-'})  "
            f"started {r['started_at']}  ended {r.get('ended_at') or '-'}"
        )
        if r.get("reply_message_id"):
            print(f"  reply {r['reply_message_id']}" + ("  (truncated)" if r.get("reply_truncated") else ""))
        if r.get("error_class"):
            print(f"  error {r['error_class']}: {r.get('error_message') or ''}")
        if r.get("context"):
            print("  " + context_line(r["context"]))
        from quaycli.render import action_line, request_line, timeline_lines

        # the timeline without its cost in words: the cost line and its breakdown close the run
        for line in timeline_lines(detail.get("timeline") or {}):
            print("  " + line)
        for q in detail["requests"]:
            print("  " + request_line(q))
        for a in detail["actions"]:
            print("  " + action_line(a))
        for item in r.get("not_done") or []:
            print(f"  not done: {item}")
        for line in cost_lines(r.get("cost")):
            print("  " + line)
        return
    listing = _run(lambda: runs_of(str(room)))
    for r in listing["runs"]:
        print(f"{r['run_id']}  {r['agent_id']}  {r['status']}  {r['started_at']}")
    for n in listing.get("not_started") or []:  # design §12.1: why an agent did not wake
        print(f"not woken: {n['agent_id']}  {n['reason']}  chain {n['chain_id']}  {n['at']}")
    if listing.get("next_cursor"):
        print("(more runs: --all lists every page)")


@app.command()
def replay(
    run: Annotated[str, typer.Argument(help="A run id of your company's agents (quay ledger --room ROOM).")],
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Decide a finished run's actions again, from what it recorded, under today's code and your
    company's current policy: no model request, nothing written. Exit 0 when every decision is
    the same, 1 when one differs (so the code or the policy changed, not the room)."""
    r = _run(lambda: _client(url, token).replay(run))
    if as_json:
        _print({"run": r["run"], "then": r["then"], "now": r["now"], "same": r["same"]})
    else:
        _say(
            f"run {r['run']}: {_count(len(r['then']), 'action')}, "
            + ("same now" if r["same"] else "decided otherwise now")
        )
        for then, now in zip(r["then"], r["now"], strict=True):
            mark = "  " if then["decision"] == now["decision"] else "≠ "
            what = f"[{then['index']}] {then['kind']} → {then['target'] or '-'}"
            _say(f"{mark}{what}: then {then['decision']}, now {now['decision']}")
            if then["decision"] != now["decision"]:
                _say(f"      then: {then['reason']}")
                _say(f"      now:  {now['reason']}")
        for sec in r.get("sections") or []:
            entries = _count(sec["entries"], "entry", "entries")
            _say(f"  prompt {sec['section']}: {entries}, ~{_count(sec['tokens'], 'token')}")
    if not r["same"]:
        raise typer.Exit(1)


def _count(n: int, one: str, many: str | None = None) -> str:
    """``1 reply``, ``2 replies`` (:func:`quayutec.words.count`)."""
    from quayutec.words import count

    return count(int(n), one, many)


#: How ``quay ledger`` names the sections of a fitted context (design §2.2).
_LEFT_OUT = {
    "messages": ("message", "messages"),
    "open_tasks": ("open task", "open tasks"),
    "memory": ("memory line", "memory lines"),
    "passages": ("passage", "passages"),
    "agents": ("agent of the roster", "agents of the roster"),
    "companies": ("company of the roster", "companies of the roster"),
}


def context_line(context: dict) -> str:
    """``prompt ~12,345 of 56,952 tokens (max_context_tokens 60,000); left out: 28 messages``."""
    line = (
        f"prompt ~{context['prompt_tokens']:,} of {context['budget']:,} tokens "
        f"(max_context_tokens {context['max_context_tokens']:,}, estimated)"
    )
    out = [_count(n, *_LEFT_OUT.get(k, (k, k))) for k, n in (context.get("left_out") or {}).items() if n]
    line += "; left out: " + ", ".join(out) if out else "; nothing left out"
    if context.get("over_budget"):
        line += "; over budget: the instructions and the wake's cause alone do not fit"
    return line


def cost_lines(cost: dict | None) -> list[str]:
    """The run's cost line (docs/design.md §10) as ``quay ledger RUN`` prints it (``quay cost``: a sum of
    them); estimates say so, and so does what is unknown (a model's price, capacity a response
    did not report, tokens a reply did not report)."""
    if not cost:
        return ["cost: not recorded (a run that ended outside its state machine's Catch)"]
    est = set(cost.get("estimated") or [])
    mark = lambda k: " (estimated)" if k in est else ""  # noqa: E731
    calls = cost.get("aws_requests") or {}
    lines = [
        f"cost ${float(cost.get('usd', 0)):.6f}{mark('usd')}: "
        f"{cost.get('lambda_invocations', 0)} Lambda invocations, {cost.get('billed_ms', 0)} ms billed"
        f"{mark('billed_ms')}, {cost.get('transitions', 0)} transitions{mark('transitions')}, "
        f"{sum(int(n) for n in calls.values())} AWS requests"
    ]
    tokens = cost.get("tokens") or {}
    unknown = cost.get("model_price_unknown") or []
    model = (
        "model price unknown (" + ", ".join(unknown) + "): not in the total"
        if unknown
        else f"model ${float(cost.get('model_usd') or 0):.6f}{mark('model_usd')}"
    )
    lines.append(f"  AWS side ${float(cost['usd_model_excluded']):.6f}{mark('usd_model_excluded')}; " + model)
    for m, t in sorted(tokens.items()):
        lines.append(
            f"  tokens {m} ({t.get('provider') or '?'}): {t.get('input', 0)} input, {t.get('output', 0)} "
            f"output, from {_count(t.get('replies', 0), 'reply', 'replies')}"
            + (
                f"; {_count(t['unreported'], 'reply', 'replies')} reported no usage (not counted)"
                if t.get("unreported")
                else ""
            )
        )
    if not tokens:
        lines.append("  tokens: none (no model reply was read)")
    by_service: dict[str, int] = {}
    for k, n in calls.items():
        by_service[k.partition(".")[0]] = by_service.get(k.partition(".")[0], 0) + int(n)
    lines.append("  by service: " + (", ".join(f"{k} {n}" for k, n in sorted(by_service.items())) or "none"))
    lines.append("  requests: " + (", ".join(f"{k} {n}" for k, n in sorted(calls.items())) or "none"))
    cap = cost["capacity"]
    gaps = cost["capacity_unknown"]
    lines.append(
        f"  DynamoDB capacity: {float(cap.get('read_units', 0)):g} read units, "
        f"{float(cap.get('write_units', 0)):g} write units"
        + (
            "; unknown for "
            + ", ".join(f"{k} {n}" for k, n in sorted(gaps.items()))
            + " (no ConsumedCapacity in the response: priced as one unit a request)"
            if gaps
            else ""
        )
    )
    return lines


@app.command()
def cost(
    room: Annotated[str, typer.Option(help="The room whose spend to show.")],
    day: Annotated[str | None, typer.Option(help="A UTC day YYYY-MM-DD (default: today) and its month.")] = None,
    as_json: JsonOpt = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = "",
) -> None:
    """Your company's model spend in a room on a UTC day and in its month, from the spend
    counters the budgets keep: USD for models with a known price, tokens for the others. A
    run's whole cost line (AWS included) is `quay ledger RUN`."""
    out = _run(lambda: _client(url, token).room_cost(room, day))
    if as_json:
        _print(out)
        return
    _say(f"room {out['room_id']}, {out['company']}'s agents' model spend (AWS not included: quay ledger RUN):")
    for period in ("day", "month"):
        f = out[period]
        _say(
            f"  {f['key']}: ${f['spent_usd']:.6f} for models with a known price; "
            f"{f['spent_tokens']:,} tokens of models without one"
        )


@app.command()
def version() -> None:
    """Print the version."""
    from importlib.metadata import version as v

    print(v("quayutec"))


def _version_option(value: bool) -> None:
    if value:
        version()
        raise typer.Exit()


@app.callback()
def _options(
    show_version: Annotated[
        bool, typer.Option("--version", callback=_version_option, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Options of `quay` itself; every other option goes after its command (`quay room list --token T`)."""


@app.command()
def preflight(
    assembly: Annotated[Path, typer.Option(help="The synthesized cloud assembly (`make synth`).")] = Path("cdk.out"),
    stack: Annotated[str | None, typer.Option(help="The stack in the assembly (default: its only one).")] = None,
    region: Annotated[str | None, typer.Option(help="AWS region (default: your AWS configuration's).")] = None,
    bedrock_model: Annotated[
        list[str] | None, typer.Option("--bedrock-model", help="A Bedrock model id an agent uses; repeatable.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """What a `cdk deploy` would hit on this account: the Lambda concurrency quota, the CDK
    bootstrap version, API Gateway's account-wide CloudWatch role, Bedrock model access
    (docs/deploy.md). Exits 1 on a blocker."""
    import boto3

    from quaycli.preflight import has_blocker, run_preflight
    from quayinfra.localdeploy import stack_artifact

    if not (assembly / "manifest.json").exists():
        raise _fail(f"quay: no cloud assembly at {assembly}: run `make synth` first", 2)
    template = json.loads(stack_artifact(assembly, stack)[1].read_text())
    findings = run_preflight(boto3.Session(region_name=region), template, bedrock_model)
    if as_json:
        print(json.dumps({"ok": not has_blocker(findings), "findings": [f.as_dict() for f in findings]}, indent=2))
    else:
        for f in findings:
            print(f"{f.level.upper():8} {f.check}: {f.message}")
            if f.fix:
                print(f"         fix: {f.fix}")
    raise typer.Exit(1 if has_blocker(findings) else 0)


def main() -> None:
    """The client commands alone (``python -m quaycli``); the ``quay`` command is :func:`quay.main.main`."""
    run(app)


def run(command: typer.Typer) -> None:
    """Run ``command`` as the `quay` command: every error is one line on stderr and a non-zero exit,
    never a traceback."""
    # typer runs on its own copy of click (typer._click); its usage errors are TyperExceptions
    from typer._click.exceptions import NoArgsIsHelpError, NoSuchOption, UsageError

    try:
        code = command(standalone_mode=False)
    except NoArgsIsHelpError as exc:  # `quay room`: the command's help, as asked
        print(exc.ctx.get_help() if exc.ctx else exc.format_message())
        sys.exit(2)
    except UsageError as exc:  # a usage error is one line too, with where to look
        from quaycli.terminal import visible

        where = f" (see: {exc.ctx.command_path} --help)" if exc.ctx else ""
        if isinstance(exc, NoSuchOption) and exc.ctx is not None and exc.ctx.parent is None:
            where = " (a command's options go after it, e.g. `quay room list --token T`; see: quay --help)"
        print(visible(" ".join(f"quay: {exc.format_message()}{where}".split())), file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, exit 1
        from quaycli.terminal import visible

        print(visible(" ".join(f"quay: {type(exc).__name__}: {exc}".split())), file=sys.stderr)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
