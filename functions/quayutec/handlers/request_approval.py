"""Held action task (``lambda:invoke.waitForTaskToken``): ``{"run_id", "index", "task_token"}``.
Records the approval request and returns; the execution stays parked until a person of the
owning company answers or ``TimeoutSecondsPath`` expires it. design §2.6."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field

from quayutec.deps import Deps, default_deps
from quayutec.logic.phases import request_approval as phase

logger = Logger()


class ApprovalTaskInput(BaseModel):
    run_id: str
    index: int = Field(ge=0)
    task_token: str = Field(min_length=1)


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext, deps: Deps | None = None) -> dict[str, Any]:
    task = ApprovalTaskInput.model_validate(event)
    phase.request_approval(deps or default_deps(), task.run_id, task.index, task.task_token)
    return {"recorded": f"{task.run_id}:{task.index}"}
