"""Claim phase: ``{"state": {"wake": Wake}, "run_id", "execution_arn", "execution_start"}`` → state with ``claim``,
``run``, ``budget``. SPEC §2.1."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic import run

handler = phase_handler(lambda deps, state, event: run.claim(
    deps, state, event["run_id"], event["execution_arn"], event.get("execution_start")))
