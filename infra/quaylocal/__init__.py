"""quaylocal: the `quay` CLI, the local stack on moto, the local provider server and the scenario
player. Never deployed; no Lambda code imports it."""
