"""ClaimAndRead phase: ``{"state": {"wake": Wake}, "run_id", "execution_arn", "execution_start"}`` →
state with ``claim``, ``run``, ``facts``, ``budget``: the claim (SPEC §2.1), then the room read and
the context stored under the run (§2.2). Raises ``AlreadyClaimed`` when another execution holds
the claim (the ASL ends the attempt in a Succeed state)."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic.phases import claim_and_read as phase

handler = phase_handler(
    lambda deps, state, event: phase.claim_and_read(
        deps, state, event["run_id"], event["execution_arn"], event.get("execution_start")
    )
)
