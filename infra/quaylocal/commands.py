"""The `quay` commands that run the local engine: ``quay demo`` (a scenario played on the local
stack) and ``quay dev`` (the room API served on it). :func:`register` puts them on the client CLI's
command group (:data:`quaycli.cli.app`); the composition entry point (:mod:`quay.main`) calls it."""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from quaycli.cli import _fail
from quaycli.terminal import visible

DEFAULT_SCENARIO = Path(__file__).parent / "scenarios" / "reference-room.yaml"


def demo(
    scenario: Annotated[Path, typer.Option(help="A scenario file (format: docs/scenarios.md).")] = DEFAULT_SCENARIO,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON summary object.")] = False,
    quiet_timeout: Annotated[float, typer.Option(help="Seconds each step may take to become quiet.")] = 120.0,
) -> None:
    """Play a scenario end to end on the local stack (moto, no AWS account) and show the room,
    the tasks, the memory lines and the ledger. Exit status 1 when its `expect` fails. The scenario
    format is described in docs/scenarios.md."""
    import gc

    # One short process over a large heap (moto, botocore's models, the provider SDKs' pydantic
    # models): the collector's full passes over it took ~1.3 s of the demo's CPU, and its last
    # walk at exit ~1.2 s more. Young cycles are still collected (less often); no full pass
    # happens in a play of a few dozen runs; what is left is frozen before the process ends.
    thresholds = gc.get_threshold()
    gc.set_threshold(10_000, 50, 100)
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
        gc.set_threshold(*thresholds)
    if as_json:
        print(json.dumps(result.summary(), indent=2))
    else:
        from quaylocal.transcript import render

        print(render(result))
    gc.freeze()  # the process ends next: no last collection over everything at exit
    raise typer.Exit(0 if result.expect_ok else 1)


def dev(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: a free one).")] = 8787,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    admin_token: Annotated[
        str | None,
        typer.Option(
            "--admin-token",
            envvar="QUAY_ADMIN_TOKEN",
            help="The operator token to create (default: a random one, printed).",
        ),
    ] = None,
    scripts: Annotated[
        Path | None,
        typer.Option(
            help="Model replies per agent id (JSON or YAML, the scenario "
            "model_replies format); unscripted agents get echo replies."
        ),
    ] = None,
    setting: Annotated[
        list[str] | None, typer.Option(help="A runtime setting, NAME=VALUE (e.g. HOP_LIMIT=3); repeatable.")
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="Print only the banner: no line per wake, run start and end.")
    ] = False,
    throttle: Annotated[
        bool,
        typer.Option(
            "--throttle",
            help="Throttle as a deployed stage does: 50 requests/s (burst 100) in all and 10/s (burst 20) "
            "per company, answered 429 with Retry-After (docs/api.md, Throttles).",
        ),
    ] = False,
) -> None:
    """Serve the room API on the local stack (moto in-process: no AWS account, no Docker). Wakes and
    runs happen in the background; the model provider is the local provider server."""
    import yaml

    from quaylocal.dev import DevServer, load_scripts

    settings = _dev_settings(setting or [])
    try:
        loaded = load_scripts(scripts)
    except (OSError, ValueError, yaml.YAMLError) as exc:  # unreadable, not JSON/YAML, wrong shape
        raise _fail(f"quay dev: --scripts {scripts}: {exc}", 2) from None
    try:
        server = DevServer(host, port, admin_token=admin_token, scripts=loaded, settings=settings, throttle=throttle)
        server.serve_forever(banner=lambda line: print(visible(line), flush=True), quiet=quiet)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise _fail(
                f"quay dev: {host}:{port} is in use (another quay dev?): stop it, or choose another "
                "with --port (0: a free one)",
                2,
            ) from None
        raise _fail(f"quay dev: {exc}", 2) from None
    except ValueError as exc:  # the operator token's rule (dal.auth), or a setting's
        raise _fail(f"quay dev: {'--admin-token: ' if admin_token else ''}{exc}", 2) from None


def _dev_settings(items: list[str]) -> dict[str, str]:
    """``--setting NAME=VALUE`` items, each a known runtime setting with a valid value (checked by
    the runtime's own Settings model); anything else is one line and exit status 2."""
    from pydantic import ValidationError

    from quaylocal.stack import local_environment
    from quayutec.settings import Settings

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


def register(app: typer.Typer) -> None:
    """Add ``demo`` and ``dev`` to ``app`` (once)."""
    names = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    for command in (demo, dev):
        if command.__name__ not in names:
            app.command()(command)
