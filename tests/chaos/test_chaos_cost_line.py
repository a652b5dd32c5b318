"""The cost line survives a CallModel that dies after the model answered (issue 13): the reply
is stored with its usage fields, the retried attempt reuses it without a second model request,
and the run's cost line counts the reply's tokens once (before, they were lost with the dead
invocation's state)."""

from __future__ import annotations

from quaylab import faults
from quaylab.chaos import ChaosLab
from quayutec.logic.ids import execution_name
from quayutec.models import TokenCount


def test_a_reply_read_by_an_attempt_that_died_is_counted_once() -> None:
    with ChaosLab() as lab:
        case = lab.new_case(None)
        lab.server.set_script(
            case.a, [{"reply": {"text": "Counted once.", "actions": [], "usage": {"input": 321, "output": 45}}}]
        )
        key = f"{case.room}-died"
        run_id = execution_name(case.a, f"msg:{lab.message_id(key)}")
        faults.add(faults.Fault("call_model:end", "die_end", run_id=run_id))
        lab.post(case, "What does this cost?", key)
        lab.wait_quiet()
        assert [f.point for f in faults.fired()] == ["call_model:end"]  # the first attempt did die
        run = lab.deps.ledger.get_run(run_id)
        assert run is not None and run.status == "completed", run
        assert lab.server.count(case.a) == 1  # the retry reused the stored reply
        [request] = lab.deps.ledger.model_requests(run_id)
        assert (request.outcome, request.input_tokens, request.output_tokens) == ("ok", 321, 45)
        model = request.model
        assert run.cost is not None and run.cost.tokens == {
            model: TokenCount(provider=request.provider, input=321, output=45, replies=1)
        }, run.cost
        assert len([m for m in lab.deps.room.all_messages(case.room) if m.kind == "reply"]) == 1
