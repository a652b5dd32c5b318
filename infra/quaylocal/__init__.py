"""quaylocal: the local engine: the runtime on moto in-process (:mod:`quaylocal.stack`), ``quay dev``
(:mod:`quaylocal.dev`), the local provider server, the AWS call recorder and scenario playback
(:mod:`quaylocal.scenario`). Imports no lab (:mod:`quaylab`); the client CLI (:mod:`quaycli`)
imports none of it. Never deployed; no Lambda code imports it."""
