"""The lab's `quay` command: ``quay chaos`` (faults injected at every phase of a run on the local
stack, :mod:`quaylab.chaos`). :func:`register` puts it on the client CLI's command group; the
composition entry point (:mod:`quay.main`) calls it."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer


def chaos(
    full: Annotated[
        bool,
        typer.Option(
            "--full", help="Every point of every phase alone (slow), not the grouped matrix `make test` plays."
        ),
    ] = False,
    wave: Annotated[int, typer.Option(help="Cases played side by side on one local stack.")] = 16,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Inject faults at every phase of a run on the local stack (crashes, deaths retried by Step
    Functions, StopExecution, dropped stream records, repeated wakes) and check the tables: print
    injection point x outcome and the totals. Exit status 1 on a duplicate, a non-final ledger
    entry, a company turn no lease expiry frees (design §12.3) or any other failed check."""
    import logging

    from quaylab.chaos import render, run_matrix

    logging.getLogger("moto.stepfunctions").setLevel(logging.CRITICAL)  # failed runs are the point here
    out = sys.stdout
    sys.stdout = sys.stderr  # handler logs go to stderr; stdout carries only the result
    try:
        report, _trace = run_matrix(
            full=full, wave=wave, progress=lambda r: print(f"quay chaos: {len(r)} cases played", file=sys.stderr)
        )
    finally:
        sys.stdout = out
    if as_json:
        print(
            json.dumps(
                {
                    "cases": [c.__dict__ for c in report.cases],
                    "points": sum(c.faults for c in report.cases),
                    "runs": report.runs,
                    "duplicates": report.duplicates,
                    "non_final": report.non_final,
                    "turns_held": report.turns_held,
                    "turns_until_expiry": report.turns_until_expiry,
                    "ok": report.ok,
                    "seconds": round(report.seconds, 1),
                },
                indent=2,
            )
        )
    else:
        print(render(report))
    raise typer.Exit(0 if report.ok else 1)


def register(app: typer.Typer) -> None:
    """Add ``chaos`` to ``app`` (once)."""
    if not any((c.name or (c.callback.__name__ if c.callback else "")) == "chaos" for c in app.registered_commands):
        app.command()(chaos)
