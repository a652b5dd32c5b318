"""Fair turns (design §12.3): at most ``max_concurrent_runs`` runs of one company's agents are
active at once; a run over the limit waits in its company's line, in arrival order, without
holding a Lambda, and starts when a turn is handed to it.

The rules over :class:`quayutec.dal.turns.TurnStore` (each step one conditional write):

* **take** (ClaimAndRead, right after the claim): a free turn when no run of the company waits
  (one transaction), or the turn already handed to the run; else the run waits.
* **wait** (WaitForTurn, ``.waitForTaskToken``): join the line with the task token, then
  :func:`dispatch` — the look again after joining, so a turn freed meanwhile is never lost.
* **end** (every final path, a park on approvals, the reconciler): give the turn back, or hand
  it to the oldest run in line and ``SendTaskSuccess`` its token; a token whose execution is
  gone (or whose wait timed out) takes the turn back and hands it to the next one.
* **lease**: a turn expires ``TURN_LEASE_SECONDS`` after it was taken; :func:`dispatch` gives an
  expired one to the oldest run in line, so a lost release never blocks a company for good.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from quayutec.dal.aws import error_code
from quayutec.deps import Deps

logger = Logger(child=True)
metrics = Metrics()

#: Task tokens Step Functions no longer takes: the execution ended or the wait timed out.
DEAD_TOKEN = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})
#: The most hand-offs one end or look makes (each past the first: a dead token skipped).
MAX_HANDS = 25
#: How many of the line one read looks at.
LINE_PAGE = 5


def _now(deps: Deps) -> int:
    return int(deps.clock().timestamp())


def take(deps: Deps, company: str, run_id: str, execution_arn: str) -> bool:
    """Take a turn of ``company`` for the run, or find the one handed to it (design §12.3).
    ``False``: none free, or runs wait first: the run waits (:func:`wait`). Raises
    TransientError."""
    got = deps.turns.acquire(company, run_id, execution_arn, _now(deps), deps.settings.turn_lease_s)
    return got != "full"


def wait(deps: Deps, company: str, run_id: str, arrival: str, token: str, execution_arn: str) -> None:
    """Join ``company``'s line at ``arrival`` with ``token``, then look again (:func:`dispatch`):
    a turn freed between the run's take and its joining is handed now, to the oldest run in
    line (this one or an earlier). Raises TransientError."""
    if deps.turns.enqueue(company, run_id, arrival, token, execution_arn):
        metrics.add_metric(name="TurnWaited", unit=MetricUnit.Count, value=1)
    dispatch(deps, company)


def _send(deps: Deps, wait: dict[str, Any]) -> bool:
    """``SendTaskSuccess`` to a run handed a turn: ``False`` when its token is dead (its
    execution is gone or its wait timed out); any other refusal leaves the turn with it, which
    it finds at its next look (``TURN_RECHECK_SECONDS``)."""
    try:
        deps.stepfunctions().send_task_success(
            taskToken=str(wait.get("token", "")), output=json.dumps({"turn": wait["run_id"]})
        )
        metrics.add_metric(name="TurnHandedOn", unit=MetricUnit.Count, value=1)
        return True
    except ClientError as exc:
        if error_code(exc) in DEAD_TOKEN:
            metrics.add_metric(name="TurnHandOffSkipped", unit=MetricUnit.Count, value=1)
            logger.info("turn handed to a dead token: taken back", extra={"run_id": wait["run_id"]})
            return False
        logger.warning("turn hand-off not sent", extra={"run_id": wait["run_id"], "error": error_code(exc)})
        return True
    except BotoCoreError as exc:
        logger.warning("turn hand-off not sent", extra={"run_id": wait["run_id"], "error": type(exc).__name__})
        return True


def end(deps: Deps, company: str, run_id: str) -> None:
    """The run's turn ends (design §12.3): given back when no run waits, else handed to the
    oldest run in line (its token gets ``SendTaskSuccess``; a dead one's turn goes on to the
    next). Nothing when the run holds no turn. Raises TransientError."""
    _end(deps, company, run_id, only_unconfirmed=False)


def _end(deps: Deps, company: str, run_id: str, *, only_unconfirmed: bool) -> None:
    holder, unconfirmed = run_id, only_unconfirmed
    for _ in range(MAX_HANDS):
        freed = deps.turns.free(company, holder, only_unconfirmed=unconfirmed)
        if freed != "waiters":
            return
        passed = None
        for wait in deps.turns.line(company, LINE_PAGE):
            if str(wait["run_id"]) == holder:
                # the run is in line while it holds its turn (a retried join after the turn was
                # handed to it): that entry is no run to hand on to; it leaves the line
                deps.turns.leave_line(company, str(wait["arrival"]), holder)
                passed = "left"
                continue
            passed = deps.turns.pass_on(
                company, holder, wait, _now(deps), deps.settings.turn_lease_s, only_unconfirmed=unconfirmed
            )
            if passed == "no_hold":
                return
            if passed == "passed":
                if _send(deps, wait):
                    return
                holder, unconfirmed = str(wait["run_id"]), True  # a dead token: take it back, on to the next
                break
        if passed in (None, "left"):
            continue  # the line emptied meanwhile (or held only the run itself): give the turn back
    logger.warning("turn hand-off gave up after many dead tokens", extra={"company": company})


def dispatch(deps: Deps, company: str) -> int:
    """Hand ``company``'s free turns, and those whose lease expired, to the oldest runs in line,
    each with ``SendTaskSuccess`` (a dead token's turn goes on to the next). Returns the turns
    handed. Raises TransientError."""
    handed = 0
    for _ in range(MAX_HANDS):
        counter = deps.turns.counter(company)
        if int(counter.get("waiting", 0)) <= 0:
            return handed
        line = deps.turns.line(company, 1)
        if not line:
            return handed
        wait, now, lease = line[0], _now(deps), deps.settings.turn_lease_s
        if not deps.turns.hand_free(company, wait, now, lease):
            expired = deps.turns.expired(company, now, 1)
            if not expired:
                return handed
            if not deps.turns.take_over(company, expired[0], wait, now, lease):
                continue
            metrics.add_metric(name="TurnTakenOver", unit=MetricUnit.Count, value=1)
            logger.warning("an expired turn was taken over", extra={"company": company, "run_id": expired[0]["run_id"]})
        handed += 1
        if not _send(deps, wait):
            _end(deps, company, str(wait["run_id"]), only_unconfirmed=True)
    return handed


def leave(deps: Deps, company: str, run_id: str, arrival: str | None) -> None:
    """A run that ends: its turn ends (:func:`end`) and, when it still waited (``arrival``: its
    place in line), it leaves the line. Raises TransientError."""
    if arrival is not None:
        deps.turns.leave_line(company, arrival, run_id)
    end(deps, company, run_id)
