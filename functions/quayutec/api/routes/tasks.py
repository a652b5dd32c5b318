"""Tasks: create (sent to an agent of the room), update with a note, close with a result, list."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller, idempotency_key
from quayutec.api.pages import fit
from quayutec.api.routes._params import Cursor, Limit, RoomId, TaskId
from quayutec.api.schemas import TaskCloseIn, TaskIn, TaskList, TaskOut, TaskUpdateIn
from quayutec.models import Task, TaskEvent

router = APIGatewayRouter()


@router.post("/rooms/<room_id>/tasks", status_code=201, tags=["tasks"], summary="Create a task for an agent")
def create_task(room_id: RoomId, body: Annotated[TaskIn, Body()]) -> Task:
    return services().tasks.create(caller(), room_id, body.to, body.title, body.body, idempotency_key=idempotency_key())


@router.get("/rooms/<room_id>/tasks", tags=["tasks"], summary="The room's tasks (open ones by default)")
def list_tasks(
    room_id: RoomId,
    status: Annotated[Literal["open", "closed", "all"], Query()] = "open",
    limit: Limit = 50,
    cursor: Cursor = None,
) -> TaskList:
    """Oldest first, at most `limit` tasks and about 1 MB of JSON a page (docs/design.md §14);
    `next_cursor` continues with the same `status`."""
    page = fit(services().tasks.page(caller(), room_id, limit, cursor, status))
    return TaskList(tasks=page.parts["tasks"], next_cursor=page.next_cursor)


@router.get("/rooms/<room_id>/tasks/<task_id>", tags=["tasks"], summary="A task and its events")
def get_task(room_id: RoomId, task_id: TaskId) -> TaskOut:
    task, events = services().tasks.get(caller(), room_id, task_id)
    return TaskOut(**task.model_dump(), events=events)


@router.post(
    "/rooms/<room_id>/tasks/<task_id>/updates",
    status_code=201,
    tags=["tasks"],
    summary="Add a progress note to an open task",
)
def update_task(room_id: RoomId, task_id: TaskId, body: Annotated[TaskUpdateIn, Body()]) -> TaskEvent:
    return services().tasks.event(caller(), room_id, task_id, "update", body.note, idempotency_key=idempotency_key())


@router.post("/rooms/<room_id>/tasks/<task_id>/close", tags=["tasks"], summary="Close an open task with a result")
def close_task(room_id: RoomId, task_id: TaskId, body: Annotated[TaskCloseIn, Body()]) -> TaskEvent:
    return services().tasks.event(caller(), room_id, task_id, "close", body.result, idempotency_key=idempotency_key())
