"""WaitForTurn task (``lambda:invoke.waitForTaskToken``): ``{"run_id", "company", "arrival",
"task_token", "execution_arn"}``. Puts the run in its company's line with its task token, then
looks again (a turn freed meanwhile is handed at once, to the oldest run in line) and returns;
the execution stays parked, holding no Lambda, until a run that ends hands it a turn
(SendTaskSuccess) or ``TimeoutSecondsPath`` (``TURN_RECHECK_SECONDS``) sends it back to
ClaimAndRead to look again. design §12.3."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field

from quayutec.deps import Deps, default_deps
from quayutec.logic import turns

logger = Logger()
metrics = Metrics()


class TurnTaskInput(BaseModel):
    run_id: str = Field(min_length=1)
    company: str = Field(min_length=1)
    arrival: str = Field(min_length=1)
    task_token: str = Field(min_length=1)
    execution_arn: str = ""


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext, deps: Deps | None = None) -> dict[str, Any]:
    task = TurnTaskInput.model_validate(event)
    logger.append_keys(run_id=task.run_id)
    turns.wait(deps or default_deps(), task.company, task.run_id, task.arrival, task.task_token, task.execution_arn)
    return {"waiting": task.run_id}
