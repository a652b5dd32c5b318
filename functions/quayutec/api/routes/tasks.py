"""Tasks: create (sent to an agent of the room), update with a note, close with a result, list."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import member_room, services
from quayutec.api.context import caller, idempotency_key
from quayutec.api.routes._params import RoomId, TaskId
from quayutec.api.schemas import TaskCloseIn, TaskIn, TaskList, TaskOut, TaskUpdateIn
from quayutec.errors import NotFound
from quayutec.models import Task, TaskEvent

router = APIGatewayRouter()


@router.post("/rooms/<room_id>/tasks", status_code=201, tags=["tasks"], summary="Create a task for an agent")
def create_task(room_id: RoomId, body: Annotated[TaskIn, Body()]) -> Task:
    who = caller()
    svc = services()
    member_room(svc, room_id, who)
    return svc.rooms.create_task(
        room_id, who.author(), body.to, body.title, body.body, idempotency_key=idempotency_key()
    )


@router.get("/rooms/<room_id>/tasks", tags=["tasks"], summary="The room's tasks (open ones by default)")
def list_tasks(room_id: RoomId, status: Annotated[Literal["open", "closed", "all"], Query()] = "open") -> TaskList:
    svc = services()
    member_room(svc, room_id, caller())
    tasks = svc.deps.room.all_tasks(room_id)
    return TaskList(tasks=[t for t in tasks if status == "all" or t.status == status])


@router.get("/rooms/<room_id>/tasks/<task_id>", tags=["tasks"], summary="A task and its events")
def get_task(room_id: RoomId, task_id: TaskId) -> TaskOut:
    svc = services()
    member_room(svc, room_id, caller())
    task = svc.deps.room.get_task(room_id, task_id)
    if task is None:
        raise NotFound(f"task {task_id!r} is not in room {room_id!r}")
    return TaskOut(**task.model_dump(), events=svc.deps.room.task_events(room_id, task_id))


def _event(room_id: str, task_id: str, kind: str, text: str) -> TaskEvent:
    who = caller()
    svc = services()
    member_room(svc, room_id, who)
    return svc.rooms.task_event(room_id, who.author(), task_id, kind, text, idempotency_key=idempotency_key())


@router.post(
    "/rooms/<room_id>/tasks/<task_id>/updates",
    status_code=201,
    tags=["tasks"],
    summary="Add a progress note to an open task",
)
def update_task(room_id: RoomId, task_id: TaskId, body: Annotated[TaskUpdateIn, Body()]) -> TaskEvent:
    return _event(room_id, task_id, "update", body.note)


@router.post("/rooms/<room_id>/tasks/<task_id>/close", tags=["tasks"], summary="Close an open task with a result")
def close_task(room_id: RoomId, task_id: TaskId, body: Annotated[TaskCloseIn, Body()]) -> TaskEvent:
    return _event(room_id, task_id, "close", body.result)
