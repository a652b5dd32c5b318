"""quaycli: the `quay` command line as the client of a stage's room API (``quay dev`` on 127.0.0.1
or a deployed stage, over HTTP: :mod:`quaycli.client`), the commands that need no engine and the
terminal output rules. Imports no engine (:mod:`quaylocal`) and no lab (:mod:`quaylab`): the
import contracts in ``make check`` say so. Never deployed."""
