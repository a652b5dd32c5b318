"""A run past its active-time limit (design §2 "Time limit"): stopped, recorded ``timed_out``,
not redone. The limit is a setting: 2 s on this stack of its own, and a fault makes LoadContext
take 3 s."""

from __future__ import annotations

from quaylab import faults
from quaylab.chaos import ChaosLab
from quayutec.logic.ids import execution_name


def test_a_run_past_its_time_limit_is_timed_out_and_not_redone() -> None:
    with ChaosLab(settings={"RUN_TIME_LIMIT_SECONDS": "2"}) as lab:
        assert lab.stack is not None
        case = lab.new_case(None)
        lab.server.set_script(case.a, [{"reply": {"text": "Too late.", "actions": []}}])
        key = f"{case.room}-late"
        run_id = execution_name(case.a, f"msg:{lab.message_id(key)}")
        faults.add(faults.Fault("load_context:end", "sleep", run_id=run_id, arg=3.0))
        wake, _ = lab.post(case, "Take your time.", key)
        lab.wait_quiet()
        d = lab.deps
        run = d.ledger.get_run(run_id)
        assert run is not None and run.status == "timed_out", run
        assert run.error_class in ("States.Timeout", "RunTimedOut", "TIMED_OUT")
        assert "reply not posted" in run.not_done
        assert lab.server.count(case.a) == 0
        assert not [m for m in d.room.all_messages(case.room) if m.kind == "reply"]

        lab.redeliver(wake)  # not redone: the execution name is taken, the claim too
        lab.wait_quiet()
        assert [x.run_id for x in d.ledger.runs_in_room(case.room)] == [run_id]
        assert d.ledger.deliveries(case.a, wake.wake_id)["already_exists"] >= 1  # refused: counted as a repeat
        assert lab.server.count(case.a) == 0
        assert not lab.stack.stats.errors
