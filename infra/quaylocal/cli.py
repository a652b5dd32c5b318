"""The `quay` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Quayutec: the serverless runtime for always-on agents sharing one room.",
                  no_args_is_help=True, add_completion=False)

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


@app.command()
def version() -> None:
    """Print the version."""
    from importlib.metadata import version as v

    print(v("quayutec"))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
