"""A chain's refused wakes (design §12.1), on the local stack with fault injection on: a wake its
chain refuses is claimed ``not_started`` and never runs, however often its Claim step runs again,
and the checks the crash matrix makes of a chain (``quaylab.chaos``: counters, notices, the
refused claim) fail on tables that break them. The crash matrix itself plays the faults at the
refusal and the notices (``chaos.chain_matrix``).
"""

from __future__ import annotations

from quaylab import chaos, faults
from quaylab.chaos import ChaosLab
from quayutec.dal.keys import chain_key
from quayutec.handlers import claim_and_read
from quayutec.logic.ids import chain_notice_id


# ----------------------------------------------------------------------------- a refused wake
class _Context:
    """The Lambda context fields Powertools reads."""

    function_name = "quayutec-ClaimAndReadFunction"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:quayutec-ClaimAndReadFunction"
    memory_limit_in_mb = 512
    aws_request_id = "refused-again"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 30_000


def test_a_refused_wake_started_again_starts_nothing_and_the_chain_checks_can_fail(lab: ChaosLab) -> None:
    """A chain of 2 (``Point.max_runs``): the run, the other agent woken by its reply (the last
    run), then the same agent woken by the task the run created, after the held action was
    approved: refused, claimed ``not_started: chain_full``, one notice. The lab delivered that
    wake again (SQS: the same execution name, refused by Step Functions); here its Claim step
    runs again as the same execution (resumed) and as another one: neither starts a run, counts,
    calls a model or writes a second notice. Then the checks of ``chaos._chain_problems`` are
    shown to fail on a counter, a notice and a claim item that break the rules."""
    point = chaos.Point("claim:start", "sleep", "completed", max_runs=2, on="refused")  # a fault that does nothing
    case = lab.new_case(point)
    lab.run_cases([case])
    faults.disarm()
    assert lab.stack is not None
    result = lab.check(case, [], chaos.stream_rewrites(lab.stack))
    assert result.ok, result
    d = lab.deps
    claim = d.ledger.get_claim(case.b, case.refused_wake_id)
    assert claim is not None and claim["not_started"] == "chain_full" and claim["run_id"] == case.refused_run_id
    wake = lab.refused_wake(case)
    assert wake is not None and wake.agent_id == case.b and wake.chain_id == lab.message_id(f"{case.room}-first")
    state = {"wake": wake.model_dump(mode="json")}
    same = {"execution_arn": claim["execution_arn"], "execution_start": claim["execution_start"]}
    other = {"execution_arn": f"{claim['execution_arn']}-again", "execution_start": "2031-01-01T00:00:00Z"}
    for execution, why in ((same, "chain_full"), (other, "other_execution")):
        out = claim_and_read.handler({"state": state, "run_id": case.refused_run_id, **execution}, _Context())
        assert out["claim"]["claimed"] is False and out["claim"]["not_started"] == why
    assert d.ledger.get_claim(case.b, case.refused_wake_id) == claim
    assert d.ledger.get_run(case.refused_run_id) is None
    assert lab.counted(case.room, wake.chain_id) == 2 and lab.server.count(case.b) == 1
    notices = [m for m in d.room.all_messages(case.room) if m.id == chain_notice_id(wake.chain_id)]
    assert len(notices) == 1 and "stopped after 2 runs" in notices[0].text

    def problems() -> list[str]:
        return chaos._chain_problems(lab, case, chaos._room_items(lab, case.room))

    assert problems() == []
    key = chain_key(case.room, wake.chain_id)
    d.ledger.db.update_item(
        TableName=d.ledger.table, Key=key, UpdateExpression="ADD runs :one", ExpressionAttributeValues={":one": 1}
    )
    assert any("counts 3 runs, the ledger holds 2" in p for p in problems())
    d.ledger.db.update_item(
        TableName=d.ledger.table, Key=key, UpdateExpression="ADD runs :one", ExpressionAttributeValues={":one": -1}
    )
    d.room.db.delete_item(TableName=d.room.table, Key={"pk": f"ROOM#{case.room}#MSG", "sk": f"MSG#{notices[0].id}"})
    assert problems() == ["0 chain notices, expected 1"]
    d.ledger.db.put_item(TableName=d.ledger.claim_table, Item={k: v for k, v in claim.items() if k != "not_started"})
    assert any("refused wake's claim" in p for p in problems())


def test_a_claim_step_retried_after_its_write_landed_still_wakes_the_chain_s_last_run(lab: ChaosLab) -> None:
    """A chain of 2 whose first run's Claim step dies after its transaction landed: the retry
    finds its own claim, and the run should still wake the other agent (the chain's second and
    last run, design §12.1), whose second wake is then refused. (The retry once took the chain for
    full: no wake was sent and the notice said the chain stopped after 2 runs when 1 ran.)"""
    case = lab.new_case(chaos.Point(chaos.CLAIM_WRITE, "die", "completed", max_runs=2))
    lab.run_cases([case])
    faults.disarm()
    assert lab.stack is not None
    result = lab.check(case, [], chaos.stream_rewrites(lab.stack))
    assert result.ok, result
