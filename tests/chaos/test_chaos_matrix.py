"""Never twice, proven (design §2.1, §6; issue 6): the crash matrix on the local stack, the checks
it makes (each shown to fail on a table that breaks it) and the switch that keeps fault
injection out of any deployed stack."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from quaylab import chaos, faults
from quaylocal.stack import local_environment
from quayutec import resources as r

REPO = Path(__file__).resolve().parents[2]
#: The parts of the run (a merged function runs several, each with its own points: faults.subphase).
PHASES = (
    "claim",
    "load_context",
    "call_model",
    "decide_rights",
    "post_reply",
    "request_approval",
    "apply_actions",
    "finish",
    "record_failure",
    "wake_relay",
    "wake_consumer",
)


def test_the_crash_matrix_finds_no_duplicate_and_no_open_ledger_entry() -> None:
    """Every case: inject, let Step Functions retry / catch and the reconciler close, deliver the
    wake again, post a fresh message. The tables then hold no item twice (by content, by key,
    by the room stream), at most one reply, each held action decided and written at most once,
    a final ledger entry with the status design §2.1 names, an honest ledger (an action is
    "written" exactly when it is in the room), and a next run that completed and saw what the
    failed run wrote. Chain cases (design §12.1) also find each chain's counter equal to its ledger
    entries, the chain notices expected and a refused wake claimed ``not_started``, never run; and
    every case's spend counters hold each recorded request once (design §12.4): a crash between the
    reserve and the settlement leaves the reserve counted."""
    report, trace = chaos.run_matrix()
    table = chaos.render(report)
    hit = {c.point for c in report.cases}
    assert report.ok, table
    assert report.duplicates == 0 and not report.non_final, table
    points = sum(c.faults for c in report.cases)
    planned = sum(p.count for p in chaos.standard_matrix())
    assert points == planned + chaos.TURN_CASES and planned >= 105, table  # every planned point played
    # fair turns (design §12.3): the lease's points, and no turn held for good once leases expire
    assert not report.turns_held, table
    for at in (chaos.TURN_TAKE_WRITE, chaos.TURN_WAIT_WRITE, chaos.TURN_HANDOFF_WRITE):
        assert any(f"@{at}" in name for name in hit), f"no case at {at}\n{table}"
    for phase in PHASES:
        assert any(f"@{phase}:" in name for name in hit), f"no point in {phase}\n{table}"
    # the claim under conflicts, a refused wake's refusal and notice, a full chain's notice by a run
    assert any(name.startswith(f"conflict@{chaos.CLAIM_TX} x") for name in hit), table
    for at in (chaos.REFUSAL_WRITE, chaos.CLAIM_NOTICE_WRITE, chaos.REPLY_NOTICE_WRITE):
        assert any(f"@{at} [chain of" in name for name in hit), f"no case at {at}\n{table}"
    statuses = {c.status for c in report.cases}
    assert {"completed", "failed_before_reply", "failed_after_reply", "stopped", chaos.NO_RUN} <= statuses, table
    # a pause and a chain's stop at the run's guarded writes and while it is parked (design §12.2)
    for kind in ("pause", "stop_chain"):
        assert any(name.startswith(f"{kind}@") for name in hit), f"no {kind} case\n{table}"
        assert any(f"[{kind} while parked]" in name for name in hit), f"no parked {kind} case\n{table}"
    assert chaos.REPLY_WRITE in trace and chaos.CLAIM_WRITE in trace and chaos.FINISH_WRITE in trace


# ----------------------------------------------------------------------------- the checks can fail
TRACE = [
    "claim:start",
    "claim:before:tx claims:CLAIM+ledger:RUN+ledger:CHAIN+room:META",
    chaos.CLAIM_WRITE,
    "claim:end",
    chaos.REPLY_WRITE.replace(":after:", ":before:"),
    chaos.REPLY_WRITE,
    "post_reply:end",
    "finish:before:update ledger:RUN",
    chaos.FINISH_WRITE,
    "finish:end",
]


@pytest.mark.parametrize(
    ("at", "kind", "status"),
    [
        ("claim:before:tx claims:CLAIM+ledger:RUN+ledger:CHAIN+room:META", "crash", chaos.NO_RUN),
        (chaos.CLAIM_WRITE, "crash", "failed_before_reply"),
        (chaos.REPLY_WRITE.replace(":after:", ":before:"), "crash", "failed_before_reply"),
        (chaos.REPLY_WRITE, "crash", "failed_after_reply"),
        ("post_reply:end", "stop", "failed_after_reply"),
        ("finish:before:update ledger:RUN", "crash", "failed_after_reply"),
        (chaos.FINISH_WRITE, "crash", "completed"),
        ("claim:end", "die_end", "completed"),
    ],
)
def test_expected_status_follows_spec_2_1(at: str, kind: str, status: str) -> None:
    assert chaos.expected_status(TRACE, at, kind) == status


@pytest.mark.parametrize(
    ("at", "status"),
    [
        ("decide_rights:end", "failed_after_reply"),
        ("apply_actions:end", "completed"),
        ("claim:end", "failed_before_reply"),
    ],
)
def test_a_stop_inside_a_merged_invocation_lets_the_invocation_run_its_next_part(at: str, status: str) -> None:
    """StopExecution does not interrupt a running Lambda: stopped at the end of DecideAndPost's
    first part, the invocation still posts the reply; of ApplyAndFinish's, it still finishes."""
    trace = [
        "claim:end",
        "load_context:before:s3put s3:context",
        "load_context:end",
        "decide_rights:end",
        chaos.REPLY_WRITE.replace(":after:", ":before:"),
        chaos.REPLY_WRITE,
        "post_reply:end",
        "apply_actions:end",
        "finish:before:update ledger:RUN",
        chaos.FINISH_WRITE,
        "finish:end",
    ]
    trace = [chaos.CLAIM_WRITE, *trace]
    assert chaos.expected_status(trace, at, "stop") == status
    assert chaos.expected_status(trace, at, "crash") != status or at == "claim:end"


def _msg(i: str, text: str, run: str = "run-1") -> dict:
    return {
        "pk": "ROOM#r",
        "sk": f"MSG#{i}",
        "type": "message",
        "id": i,
        "room_id": "r",
        "text": text,
        "kind": "reply",
        "run_id": run,
        "author": {"kind": "agent", "id": "a"},
        "created_at": i,
    }


def test_duplicates_by_content_are_found() -> None:
    """Two replies of one run with the same text under different ids (e.g. a random reply id on
    a retried step) are one write made twice; a repeated text of another run is not."""
    assert chaos._duplicates_by_content([_msg("m1", "Plan agreed."), _msg("m2", "Other.")]) == []
    found = chaos._duplicates_by_content([_msg("m1", "Plan agreed."), _msg("m2", "Plan agreed.")])
    assert len(found) == 1 and "written 2 times" in found[0]
    assert chaos._duplicates_by_content([_msg("m1", "Plan agreed."), _msg("m2", "Plan agreed.", "run-2")]) == []


# ----------------------------------------------------------------------------- off unless local
def test_fault_injection_is_off_unless_the_local_chaos_tooling_turns_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The switch is an environment variable no deployed function gets (it is not in the one
    variable set the CDK app gives every function, nor in the plain local stack's) plus a plan
    armed in-process; without it the client hooks are not even registered."""
    import boto3

    assert faults.ENV_VAR not in r.ENVIRONMENT_VARIABLES
    assert faults.ENV_VAR not in r.SETTING_DEFAULTS
    assert faults.ENV_VAR not in local_environment()
    assert faults.ENV_VAR in chaos.CHAOS_SETTINGS
    cdk_sources = list((REPO / "infra" / "quayinfra").rglob("*.py"))
    assert cdk_sources and not any(faults.ENV_VAR in p.read_text() for p in cdk_sources)
    # The fault lab is not in the deployed package (issue 13 item 5): no module of it, and every
    # handler imports without loading it; the runtime only offers seams (quayutec.seams).
    assert not (REPO / "functions" / "quayutec" / "faults.py").exists()
    handlers = sorted(p.stem for p in (REPO / "functions" / "quayutec" / "handlers").glob("[a-z]*.py"))
    code = (
        "import sys; "
        + "; ".join(f"import quayutec.handlers.{h}" for h in handlers)
        + "; print(sorted(m for m in sys.modules if m.split('.')[0] in ('quay', 'quaycli', 'quaylocal', 'quaylab')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO / "functions"), "AWS_DEFAULT_REGION": "us-east-1"},
    )
    assert done.returncode == 0 and done.stdout.strip() == "[]", (done.stdout, done.stderr[-2000:])

    monkeypatch.delenv(faults.ENV_VAR, raising=False)
    assert not faults.enabled()
    with pytest.raises(RuntimeError, match="off"):
        faults.arm(faults.Fault("post_reply:after:put room:MSG", "crash"))
    client = faults.instrument(boto3.client("s3", region_name="us-east-1"))
    assert "quay-faults-before" not in client.meta.events._emitter._unique_id_handlers  # botocore internals
    monkeypatch.setenv(faults.ENV_VAR, "1")
    faults.instrument(client)
    assert "quay-faults-before" in client.meta.events._emitter._unique_id_handlers
    monkeypatch.delenv(faults.ENV_VAR)
    faults.boundary("start")  # no scope, no plan: nothing happens
    assert os.environ.get(faults.ENV_VAR) is None


# ----------------------------------------------------------------------------- many runs, one process
def counting_handler(event: dict, context: object) -> dict:
    """A handler that counts, as the run phases do (``RunCompleted`` ...)."""
    from aws_lambda_powertools.metrics import Metrics, MetricUnit

    Metrics(namespace=None).add_metric(name="Counted", unit=MetricUnit.Count, value=1)
    return {"ok": True}


def test_the_local_stack_runs_more_than_100_counting_invocations_in_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Locally metrics are off, and Powertools keeps them then: at 100 values it serializes them
    anyway, which fails for an instance without a namespace (the matrix runs ~50 runs a
    process). The in-process seam drops them after each invocation, as a flush does on AWS."""
    from quaylocal.stack import invoke_in_process

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.delenv("POWERTOOLS_METRICS_NAMESPACE", raising=False)

    class Fn:  # what the seam reads of moto's LambdaFunction
        handler = "test_chaos_matrix.counting_handler"
        function_name = "f"
        function_arn = "arn:aws:lambda:us-east-1:123456789012:function:f"
        environment_vars: ClassVar[dict[str, str]] = {}  # the seam gives the function its own environment
        memory_size = 128
        timeout = 3

    results = [invoke_in_process(Fn(), {}) for _ in range(150)]  # type: ignore[arg-type]
    assert [errored for _body, errored, _logs in results] == [False] * 150
