"""ClaimAndRead phase: ``{"state": {"wake": Wake}, "run_id", "execution_arn", "execution_start"}`` →
state with ``claim``, ``run``, ``facts``, ``budget``: the claim (design §2.1), then the room read
and the context stored under the run (§2.2). A wake that starts no run (another execution holds
it; its chain's bound, a stopped chain or the agent's ``wake_from`` refused it: design §12.1) returns
``claim.claimed`` False with ``claim.not_started``: CallModel passes it through and the state
machine ends in NotStarted."""

from quayutec.handlers._phase import phase_handler
from quayutec.logic.phases import claim_and_read as phase

handler = phase_handler(
    lambda deps, state, event: phase.claim_and_read(
        deps, state, event["run_id"], event["execution_arn"], event.get("execution_start")
    ),
    name="ClaimAndRead",
)
