"""The `quay` command's composition entry point (:mod:`quay.main`): the client CLI
(:mod:`quaycli`) with the commands that need the local engine (:mod:`quaylocal`) or the lab
(:mod:`quaylab`) wired onto it. The only module that imports all three; never deployed."""
