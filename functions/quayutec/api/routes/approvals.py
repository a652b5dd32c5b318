"""Held actions waiting for a yes (design §2.6): visible to, and decided by, the agent's owning
company only. The decision is the domain service :func:`quayutec.logic.approvals.decide_approval`."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.pages import fit
from quayutec.api.routes._params import ApprovalId, Cursor, Limit, RoomId
from quayutec.api.schemas import ApprovalList
from quayutec.models import ApprovalRequest

router = APIGatewayRouter()


@router.get(
    "/rooms/<room_id>/approvals",
    tags=["approvals"],
    summary="Approval requests of the caller's company's agents (pending ones by default)",
)
def list_approvals(
    room_id: RoomId,
    status: Annotated[Literal["pending", "all"], Query()] = "pending",
    limit: Limit = 50,
    cursor: Cursor = None,
) -> ApprovalList:
    """Oldest first, at most `limit` requests and about 1 MB of JSON a page (docs/design.md
    §14); `next_cursor` continues with the same `status`."""
    page = fit(services().approvals.page(caller(), room_id, limit, cursor, status))
    return ApprovalList(approvals=page.parts["approvals"], next_cursor=page.next_cursor)


@router.post(
    "/rooms/<room_id>/approvals/<approval_id>/approve",
    tags=["approvals"],
    summary="Approve a held action (the agent's owning company only)",
)
def approve(room_id: RoomId, approval_id: ApprovalId) -> ApprovalRequest:
    return services().approvals.decide(caller(), room_id, approval_id, approve=True)


@router.post(
    "/rooms/<room_id>/approvals/<approval_id>/deny",
    tags=["approvals"],
    summary="Deny a held action (the agent's owning company only)",
)
def deny(room_id: RoomId, approval_id: ApprovalId) -> ApprovalRequest:
    return services().approvals.decide(caller(), room_id, approval_id, approve=False)
