"""Request and response bodies of the room API (pydantic v2; the OpenAPI schema is generated from
these). Requests forbid unknown fields, so a misspelt or extra field (e.g. an ``author``) is a
422 naming it, never silently ignored."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, StrictInt, StringConstraints, field_validator

from quayutec.logic.ids import AGENT_NAME_PATTERN
from quayutec.providers.keys import key_problem
from quayutec.models import (
    ActionRecord,
    ApprovalRequest,
    MemoryLine,
    Message,
    ModelRequestRecord,
    ProviderKind,
    RightsPolicy,
    RunCost,
    RunRecord,
    Task,
    TaskEvent,
    Visibility,
)

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$"
Id = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=ID_PATTERN)]
#: An agent's name in its company: no dot, so ``{company}.{name}`` is a company's own id space.
AgentName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=AGENT_NAME_PATTERN)]

#: Whole request bodies larger than this are refused with 413 before they are parsed.
MAX_BODY_BYTES = 64 * 1024


# defer_build: a body model's validator is built when its route first runs, not at cold start
class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)


# ----------------------------------------------------------------------------- companies, tokens
class CompanyIn(_In):
    id: Id
    people: list[Id] = Field(default_factory=list, max_length=1000)


class PersonIn(_In):
    person: Id


class CompanyOut(_Out):
    id: str
    people: list[str]
    rights: RightsPolicy


class TokenIn(_In):
    member: Id = Field(description="A person of the company the token is for")


class TokenIssued(_Out):
    token: str | None = Field(description="The bearer token. Shown once: only its hash is stored; "
                                          "a repeat of the request (same Idempotency-Key) returns null")
    token_id: str
    company: str | None
    member: str


class TokenInfoOut(_Out):
    token_id: str
    member: str
    created_at: str
    revoked: bool = False


class TokenList(_Out):
    tokens: list[TokenInfoOut]


# ----------------------------------------------------------------------------- rooms, members
#: A label: any printable text (no control characters).
Label = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")]


class RoomIn(_In):
    name: Label | None = Field(default=None, description="A label for people; the room's id is generated "
                                                         "by the service (a name is never 'taken')")
    members: list[Id] = Field(default_factory=list, max_length=40,  # one transaction: <= 100 items
                              description="Other member companies (the caller's company is always one)")
    hop_limit: StrictInt | None = Field(default=None, ge=0, le=100)  # a number: never true/false


class RoomAgentOut(_Out):
    id: str
    name: str = Field(description="What to type after @ in the room (the id works too)")
    company: str


class RoomOut(_Out):
    id: str
    name: str | None = None
    members: list[str]
    hop_limit: int | None = None
    agents: list[RoomAgentOut] = Field(default_factory=list)


class RoomList(_Out):
    rooms: list[str]


class MemberIn(_In):
    company: Id


class RoomAgentIn(_In):
    agent: Id = Field(description="An agent of the caller's company")


# ----------------------------------------------------------------------------- agents
class AgentIn(_In):
    name: AgentName = Field(description="The agent's name in your company (letters, digits, '_', '-'); its id is "
                                        "'{company}.{name}', mentioned in rooms as @name or @{company}.{name}")
    provider: ProviderKind
    model: str = Field(min_length=1, max_length=200)
    instructions: str = Field(default="", max_length=32 * 1024)
    base_url: str | None = Field(default=None, max_length=2048,
                                 description="The owner's own model address: https to a public host (checked "
                                             "here and again after DNS resolution at each request); one "
                                             "request per call")
    api_key: SecretStr | None = Field(default=None, min_length=1, max_length=8192,
                                      description="Stored in Secrets Manager as quayutec/{stage}/{company}/{provider} "
                                                  "(set or rotated); never returned")

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @field_validator("api_key")
    @classmethod
    def _key(cls, value: SecretStr | None) -> SecretStr | None:
        """Printable, no whitespace or control characters, 8 to 512 bytes (SPEC §5): a key with
        a stray newline is refused here, never stored (the message never quotes it)."""
        if value is not None:
            problem = key_problem(value.get_secret_value())
            if problem:
                raise ValueError(problem)
        return value


class AgentOut(_Out):
    id: str
    name: str
    company: str
    provider: str
    model: str
    instructions: str
    base_url: str | None = None
    key_stored: bool = Field(description="A key for this company and provider is in Secrets Manager")


class AgentList(_Out):
    agents: list[AgentOut]


# ----------------------------------------------------------------------------- messages
class MessageIn(_In):
    text: str = Field(min_length=1, description="At most 32 KiB of UTF-8 (413 beyond)")
    to: list[Id] = Field(default_factory=list, max_length=50, description="Agents of the room to wake")


class MessagePage(_Out):
    messages: list[Message]
    next_cursor: str | None = None


# ----------------------------------------------------------------------------- tasks
class TaskIn(_In):
    to: Id = Field(description="The assignee: an agent of the room")
    title: str = Field(min_length=1, max_length=512)
    body: str = Field(default="", max_length=16 * 1024)


class TaskUpdateIn(_In):
    note: str = Field(min_length=1, max_length=8192)


class TaskCloseIn(_In):
    result: str = Field(default="", max_length=8192)


class TaskOut(Task):
    events: list[TaskEvent] = Field(default_factory=list)


class TaskList(_Out):
    tasks: list[Task]


# ----------------------------------------------------------------------------- memory
class MemoryIn(_In):
    text: str = Field(min_length=1, max_length=4096)
    visibility: Visibility


class MemoryList(_Out):
    lines: list[MemoryLine]


# ----------------------------------------------------------------------------- approvals
class ApprovalList(_Out):
    approvals: list[ApprovalRequest]


# ----------------------------------------------------------------------------- runs
class RunList(_Out):
    runs: list[RunRecord]


class RunDetail(_Out):
    run: RunRecord
    requests: list[ModelRequestRecord]
    actions: list[ActionRecord]


class RoomCost(_Out):
    """The summed cost lines of the caller's company's runs in a room (``quay cost``)."""

    room_id: str
    since: str | None = None  # runs started at or after this instant (UTC, ISO-8601), None: all
    runs: int  # the runs counted (the caller's company's agents', since ``since``)
    without_cost: int  # of them, runs with no cost line (still running, or ended outside the run's Catch)
    cost: RunCost  # the sum of their cost lines (USD as each run recorded it)


class Ok(_Out):
    ok: Literal[True] = True
    detail: dict[str, Any] | None = None
