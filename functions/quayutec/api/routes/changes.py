"""A room's changes since a cursor, in one request (design §9): what the room page polls instead
of each listing, so an open page in a quiet room costs one small request per poll."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.routes._params import RoomId
from quayutec.api.schemas import RoomChanges

Since = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=2048,
        description="The `cursor` of the previous answer; omitted: from now on (the answer is a cursor only)",
    ),
]
PerKind = Annotated[int, Query(ge=1, le=100, description="At most this many items of each kind")]

router = APIGatewayRouter()


@router.get(
    "/rooms/<room_id>/changes",
    tags=["rooms"],
    summary="What changed in a room since a cursor: messages, approvals, tasks, runs and files",
)
def room_changes(room_id: RoomId, since: Since = None, limit: PerKind = 50) -> RoomChanges:
    """One request for everything the room page shows that changed since `since` (docs/design.md
    §9): new messages (without other companies' company-only notices), the tasks and files of
    the room and the caller's company's approvals and runs that were created or changed, each list
    oldest change first, the agents with a run in flight (`busy_agents`) and the wakes of messages
    that were refused since (`not_woken`), and the `cursor` to pass next. Start without `since` (the answer holds
    no items, only a cursor at the present), then read the listings, then poll with the cursor:
    nothing that changes after the first call is missed. An item that changes again appears
    again, with its new state. At most `limit` items of each kind and 1 MiB of JSON in all:
    `more` is true when something waits, and the client calls again at once. A deleted file's
    id is in `deleted_files`. Members only: 404 for a room the caller's company is not in (as for an unknown
    one), 403 for an operator token; 400 for a `since` this API did not return for this room."""
    found = services().changes.since(caller(), room_id, since, limit)
    return RoomChanges(
        cursor=found.cursor,
        more=found.more,
        messages=found.messages,
        approvals=found.approvals,
        tasks=found.tasks,
        runs=found.runs,
        files=found.files,
        busy_agents=found.busy_agents,
        not_woken=found.not_woken,
        deleted_files=found.deleted_files,
    )
