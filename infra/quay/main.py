"""The `quay` command: the client CLI's command group (:data:`quaycli.cli.app`: the room API of any
stage, over HTTP) with the engine's commands (``quay demo``, ``quay dev``: :mod:`quaylocal.commands`)
and the lab's (``quay chaos``: :mod:`quaylab.commands`) wired onto it. The console script
(pyproject ``[project.scripts]``) points at :func:`main`. The import contracts (pyproject
``[tool.importlinter]``) keep the client free of the engine and the engine free of the lab; this
module is the one place that joins them."""

from __future__ import annotations

import typer

from quaycli import cli
from quaylab import commands as lab
from quaylocal import commands as engine

#: Where the help lists the wired commands: ``demo`` and ``dev`` first (the README's first
#: commands), ``chaos`` after ``cost``, as before the split.
_FIRST = ("demo", "dev")
_AFTER = {"chaos": "cost"}


def compose(app: typer.Typer) -> typer.Typer:
    """``app`` with the engine's and the lab's commands on it (idempotent). Returns it."""
    engine.register(app)
    lab.register(app)
    commands = app.registered_commands

    def name(c: typer.models.CommandInfo) -> str:
        return c.name or (c.callback.__name__ if c.callback else "")

    for wired in reversed(_FIRST):
        c = next(c for c in commands if name(c) == wired)
        commands.remove(c)
        commands.insert(0, c)
    for wired, after in _AFTER.items():
        c = next(c for c in commands if name(c) == wired)
        commands.remove(c)
        commands.insert(next(i for i, x in enumerate(commands) if name(x) == after) + 1, c)
    return app


app = compose(cli.app)


def main() -> None:
    """The `quay` command (every error one line on stderr, :func:`quaycli.cli.run`). In a process
    the test suite starts (``QUAY_CALL_LOG``), the engine's call recorder logs every AWS call."""
    from quaylocal import calls

    calls.install_from_environment()  # only when the test suite asks (QUAY_CALL_LOG)
    cli.run(app)


if __name__ == "__main__":
    main()
