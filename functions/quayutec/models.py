"""Domain models (pydantic v2): companies and their rights, agents, rooms, messages, tasks and
task events, memory lines, file chunks, wakes, declared actions, decisions, the state passed
between run phases, and ledger entries. SPEC §1–§5.

Times are ISO-8601 UTC strings with microseconds (they sort as text); durations are seconds.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Decision = Literal["allow", "ask", "deny"]
ActionKind = Literal["remember", "create_task", "update_task", "close_task"]
ProviderKind = Literal["anthropic", "openai", "openai-compatible", "bedrock"]
Visibility = Literal["company", "room"]

Id = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$")]

FINAL_STATUSES = frozenset({"completed", "failed_before_reply", "failed_after_reply", "timed_out"})
RunStatus = Literal["running", "waiting_approval", "completed", "failed_before_reply",
                    "failed_after_reply", "timed_out"]

APPROVAL_STATUSES = ("pending", "deciding", "approved", "rejected", "expired")

MAX_REPLY_BYTES = 32 * 1024
MAX_ACTIONS = 25


def now_iso() -> str:
    """Current UTC time, ISO-8601 with microseconds (sortable as text)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


# ----------------------------------------------------------------------------- companies
class RightsPolicy(_Model):
    """A company's policy over declared actions (SPEC §5). The most specific rule wins:
    per agent and kind, then ``cross_company`` (when the action targets another company),
    then ``actions``, then ``default``."""

    model_config = ConfigDict(extra="forbid")
    default: Decision = "allow"
    actions: dict[ActionKind, Decision] = Field(default_factory=dict)
    cross_company: dict[ActionKind, Decision] = Field(default_factory=dict)
    # keyed by agent id (an Id: never empty, which DynamoDB refuses as a map key)
    agents: dict[Id, dict[ActionKind, Decision]] = Field(default_factory=dict, max_length=1000)


class Company(_Model):
    id: Id
    people: list[Id] = Field(default_factory=list)
    rights: RightsPolicy = Field(default_factory=RightsPolicy)


class Agent(_Model):
    id: Id
    company: Id
    provider: ProviderKind
    model: str = Field(min_length=1, max_length=200)
    instructions: str = Field(default="", max_length=32 * 1024)
    base_url: str | None = None  # supplied by the agent's owner: one request per call (SPEC §2.3)


class Room(_Model):
    id: Id
    members: list[Id] = Field(default_factory=list)  # company ids
    hop_limit: int | None = None  # None: the runtime's setting (default 8)


# ----------------------------------------------------------------------------- room content
class Author(_Model):
    """Who wrote something. Ids are compared typed, ``(kind, id)``, never by id alone: a person's
    id and an agent's id live in different namespaces and may be equal (SPEC §5). Items stored
    without a kind read as ``person``: the kind that grants an agent nothing."""

    kind: Literal["person", "agent", "system"] = "person"
    id: str
    company: str | None = None

    def is_(self, kind: str, id: str, company: str | None = None) -> bool:
        """Whether this author is ``(kind, id)`` (and of ``company``, when given)."""
        return self.kind == kind and self.id == id and (company is None or self.company == company)


class Wake(_Model):
    """One wake: an agent woken by a message or task event (SPEC §3). Carried on SQS and as the
    Step Functions execution input: ids only."""

    agent_id: str
    wake_id: str
    room_id: str
    hop: int = Field(ge=0)
    cause_kind: Literal["message", "task_event"]
    cause_id: str  # message id, or task event id
    task_id: str | None = None  # the task of a task event


class Message(_Model):
    id: str
    room_id: str
    author: Author
    text: str
    to: list[str] = Field(default_factory=list)
    mentions: list[str] = Field(default_factory=list)
    kind: Literal["message", "reply", "notice"] = "message"
    run_id: str | None = None
    created_at: str


class Task(_Model):
    id: str
    room_id: str
    title: str
    body: str
    to: str  # assignee: always an agent (its id; compare it only with agent ids)
    created_by: Author
    status: Literal["open", "closed"] = "open"
    result: str | None = None
    created_at: str
    updated_at: str


class TaskEvent(_Model):
    id: str
    room_id: str
    task_id: str
    kind: Literal["created", "update", "close"]
    text: str = ""  # the note, or the result
    by: Author
    run_id: str | None = None
    created_at: str


class MemoryLine(_Model):
    id: str
    room_id: str
    text: str
    visibility: Visibility
    company: str  # the writer's company
    author: Author
    run_id: str | None = None
    created_at: str


class FileChunk(_Model):
    room_id: str
    name: str
    index: int
    text: str


class ApprovalRequest(_Model):
    """A held action waiting for a yes from the owning company (SPEC §2.6). Visible to the
    owning company only."""

    id: str  # "{run_id}:{index}"
    room_id: str
    run_id: str
    index: int
    agent_id: str
    company: str  # the owning company: the only one that can decide
    summary: str  # action kind and target, never company-only text
    #: ``deciding``: a person's answer is being sent to Step Functions; it says ``approved`` /
    #: ``rejected`` only once Step Functions accepted it (SPEC §2.6).
    status: Literal["pending", "deciding", "approved", "rejected", "expired"] = "pending"
    decided_by: str | None = None
    created_at: str


# ----------------------------------------------------------------------------- actions
class RememberAction(_Model):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=4096)
    visibility: Visibility


class CreateTaskAction(_Model):
    model_config = ConfigDict(extra="forbid")
    to: str = Field(min_length=1, max_length=128)
    title: str = Field(min_length=1, max_length=512)
    body: str = Field(max_length=16 * 1024)


class UpdateTaskAction(_Model):
    model_config = ConfigDict(extra="forbid")
    task: str = Field(min_length=1, max_length=256)
    note: str = Field(min_length=1, max_length=8192)


class CloseTaskAction(_Model):
    model_config = ConfigDict(extra="forbid")
    task: str = Field(min_length=1, max_length=256)
    result: str = Field(max_length=8192)


ACTION_MODELS: dict[str, type[_Model]] = {
    "remember": RememberAction,
    "create_task": CreateTaskAction,
    "update_task": UpdateTaskAction,
    "close_task": CloseTaskAction,
}

ActionOutcome = Literal["pending", "written", "denied", "held", "approved", "rejected", "expired",
                        "not_reached"]


class ActionRecord(_Model):
    """One declared action with its decision and outcome, as the ledger keeps it."""

    index: int
    kind: str
    fields: dict[str, Any] = Field(default_factory=dict)  # validated fields (or {} when malformed)
    decision: Decision
    reason: str = ""
    target: str = ""  # what it acts on (agent, task id, memory visibility): safe to show
    target_company: str | None = None
    approval: Literal["approved", "rejected", "expired"] | None = None
    outcome: ActionOutcome = "pending"
    outcome_note: str = ""


# ----------------------------------------------------------------------------- run state
class RunRef(_Model):
    run_id: str
    agent_id: str
    wake_id: str
    room_id: str
    hop: int


class Budget(_Model):
    remaining_s: int = Field(ge=1)  # whole seconds: handed to each Task as TimeoutSecondsPath


class RunSettings(_Model):
    approval_timeout_s: int


class ClaimResult(_Model):
    claimed: bool
    resumed: bool = False  # the claim was this execution's own (a retried Claim step)


class ModelStep(_Model):
    outcome: Literal["wait", "reply"]
    wait_seconds: int | None = None
    requests: int = 0


class RightsStep(_Model):
    held: list[int] = Field(default_factory=list)  # indexes of actions held for approval
    held_count: int = 0


class ApprovalOutcome(_Model):
    index: int
    outcome: Literal["approved", "rejected", "expired"]


class RunState(_Model):
    """The Step Functions state between phases: ids and small fields only (SPEC §5: never room
    content or keys; budget 32 KiB)."""

    wake: Wake | None = None
    run: RunRef | None = None
    claim: ClaimResult | None = None
    budget: Budget | None = None
    settings: RunSettings | None = None
    model: ModelStep | None = None
    rights: RightsStep | None = None
    approvals: list[ApprovalOutcome] | None = None
    error: dict[str, Any] | None = None

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


# ----------------------------------------------------------------------------- ledger
class ModelRequestRecord(_Model):
    n: int
    sent_at: str
    provider: str
    model: str
    outcome: Literal["pending", "ok", "error", "lost"] = "pending"
    status: int | None = None
    request_id: str | None = None
    error_type: str | None = None
    error_code: str | None = None
    category: str | None = None
    retryable: bool | None = None
    wait_s: int | None = None
    decision: str | None = None  # why the call went on or ended, e.g. "retry-after: 1 -> wait 1 s"
    message: str | None = None
    body: str | None = None  # the provider's original error body, at most 4 KiB
    finished_at: str | None = None


class RunRecord(_Model):
    run_id: str
    agent_id: str
    company: str
    room_id: str
    wake_id: str
    wake: Wake
    hop: int
    execution_arn: str
    status: RunStatus
    started_at: str
    updated_at: str
    parked_since: str | None = None
    parked_s: float = 0.0
    reply_message_id: str | None = None
    reply_truncated: bool = False
    actions_over_limit: int = 0
    error_class: str | None = None
    error_message: str | None = None
    not_done: list[str] = Field(default_factory=list)
    ended_at: str | None = None
