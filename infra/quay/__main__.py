"""``python -m quay``: the `quay` command (:func:`quay.main.main`)."""

from quay.main import main

main()
