"""Path parameter types shared by the routers: ids are checked against the domain's id pattern
(422 naming the parameter), so no unbounded or malformed value ever reaches a table key."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from quayutec.api.schemas import ID_PATTERN
from quayutec.models import AGENT_ID_MAX, AGENT_ID_PATTERN, ID_PART_MAX, ID_PART_PATTERN

# Rooms, companies and agents: the narrower ids every AWS name accepts (quayutec.models.ID_PART).
RoomId = Annotated[str, Path(min_length=1, max_length=ID_PART_MAX, pattern=ID_PART_PATTERN, description="A room id")]
CompanyId = Annotated[
    str, Path(min_length=1, max_length=ID_PART_MAX, pattern=ID_PART_PATTERN, description="A company id")
]
AgentId = Annotated[
    str,
    Path(min_length=1, max_length=AGENT_ID_MAX, pattern=AGENT_ID_PATTERN, description="An agent id, or its name"),
]
TaskId = Annotated[str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="A task id")]
ChainId = Annotated[
    str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="A chain id (the write that started it)")
]
RunId = Annotated[str, Path(min_length=1, max_length=128, pattern=ID_PATTERN, description="A run id")]
ApprovalId = Annotated[
    str,
    Path(min_length=1, max_length=160, pattern=ID_PATTERN, description="An approval request id: '{run_id}:{index}'"),
]
TokenId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9a-f]+$", description="A token id")]
Limit = Annotated[int, Query(ge=1, le=200, description="Page size")]
Cursor = Annotated[str | None, Query(max_length=2048, description="next_cursor of the previous page")]
