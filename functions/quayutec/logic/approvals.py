"""Approve or deny a held action: one domain service for the API and the local scenario player
(SPEC §2.6). Only a person of the agent's owning company may decide; the decision resumes the
parked execution with ``SendTaskSuccess`` / ``SendTaskFailure`` (error ``ApprovalRejected``)."""

from __future__ import annotations

import json

from botocore.exceptions import ClientError

from quayutec.dal.aws import error_code
from quayutec.deps import Deps
from quayutec.errors import ApprovalRejected, Conflict, Forbidden, NotFound
from quayutec.models import ApprovalRequest, Author

#: Step Functions errors meaning the token can no longer be answered (SendTaskSuccess API reference).
_DEAD_TOKEN = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})


def decide_approval(deps: Deps, room_id: str, approval_id: str, person: Author, approve: bool) -> ApprovalRequest:
    """Approve (``approve=True``) or deny a pending approval request ``"{run_id}:{index}"``.

    Raises NotFound (no such request in the room), Forbidden (the person is not of the owning
    company), Conflict (already decided, or expired before the answer arrived).
    """
    run_id, _, index_text = approval_id.rpartition(":")
    if not run_id or not index_text.isdigit():
        raise NotFound(f"approval {approval_id!r} does not exist")
    found = deps.room.get_approval(room_id, run_id, int(index_text))
    if found is None:
        raise NotFound(f"approval {approval_id!r} does not exist in room {room_id!r}")
    approval, token = found
    if person.company != approval.company:
        raise Forbidden("only the agent's owning company can decide its held actions")
    if approval.status != "pending":
        raise Conflict(f"approval {approval_id!r} is already {approval.status}")
    status = "approved" if approve else "rejected"
    if not deps.room.set_approval_status(room_id, run_id, approval.index, status, person.id):
        raise Conflict(f"approval {approval_id!r} was decided meanwhile")
    sfn = deps.stepfunctions()
    try:
        if approve:
            sfn.send_task_success(taskToken=token, output=json.dumps({"approved_by": person.id}))
        else:
            sfn.send_task_failure(taskToken=token, error=ApprovalRejected.__name__,
                                  cause=f"denied by {person.id} of {person.company}")
    except ClientError as exc:
        if error_code(exc) in _DEAD_TOKEN:
            deps.room.db.update_item(  # the request expired before the answer: say so
                TableName=deps.room.table,
                Key={"pk": f"ROOM#{room_id}", "sk": f"APPROVAL#{run_id}#{approval.index:03d}"},
                UpdateExpression="SET #s = :e", ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":e": "expired"})
            raise Conflict(f"approval {approval_id!r} expired before the answer arrived") from None
        raise
    return approval.model_copy(update={"status": status, "decided_by": person.id})
