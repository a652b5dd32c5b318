"""``python -m quaycli``: the client commands alone (no engine: no ``quay dev``, ``demo``, ``chaos``)."""

from quaycli.cli import main

main()
