"""Held actions waiting for a yes (design §2.6): visible to, and decided by, the agent's owning
company only. The decision is the domain service :func:`quayutec.logic.approvals.decide_approval`."""

from __future__ import annotations

from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.routes._params import ApprovalId, RoomId
from quayutec.api.schemas import ApprovalList
from quayutec.models import ApprovalRequest

router = APIGatewayRouter()


@router.get(
    "/rooms/<room_id>/approvals",
    tags=["approvals"],
    summary="Approval requests of the caller's company's agents (pending ones by default)",
)
def list_approvals(room_id: RoomId, status: Annotated[Literal["pending", "all"], Query()] = "pending") -> ApprovalList:
    return ApprovalList(approvals=services().approvals.list(caller(), room_id, status))


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
