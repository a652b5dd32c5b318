"""Domain models (pydantic v2): companies and their rights, agents, rooms, messages, tasks and
task events, memory lines, file chunks, wakes, declared actions, decisions, the state passed
between run phases, and ledger entries. design §1–§5.

Times are ISO-8601 UTC strings with microseconds (they sort as text); durations are seconds.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema, model_validator

Decision = Literal["allow", "ask", "deny"]
ActionKind = Literal["remember", "create_task", "update_task", "close_task"]
ProviderKind = Literal["anthropic", "openai", "openai-compatible", "bedrock"]
Visibility = Literal["company", "room"]

Id = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$")]

# ----------------------------------------------------------------------------- names AWS accepts
#: A company id, a room id, an agent's name: what every AWS name built from one accepts (design
#: §5): a Secrets Manager secret name (``A-Za-z0-9/_+=.@-``), an S3 key's safe characters, a
#: CloudWatch dimension value (ASCII), a Step Functions execution name (``A-Za-z0-9-_``, derived
#: by ``quayutec.logic.ids.execution_name``). moto accepts any name: AWS does not.
ID_PART = r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}"
ID_PART_MAX = 63
ID_PART_PATTERN = rf"^{ID_PART}$"
#: An agent id: ``{company}.{name}`` (the API's), or one part (set up by the operator's tools).
AGENT_ID_PATTERN = rf"^{ID_PART}(\.{ID_PART})?$"
AGENT_ID_MAX = 2 * ID_PART_MAX + 1
#: What a refused id is told (a 422 names the field).
ID_RULE = "1 to 63 characters of A-Z a-z 0-9 _ -, the first a letter or digit"


def _checked(what: str, unanchored: str, rule: str = ID_RULE) -> AfterValidator:
    def check(value: str) -> str:
        if re.fullmatch(unanchored, value) is None:  # fullmatch: "$" would let a final newline in
            raise ValueError(f"not a valid {what}: {rule}")
        return value

    return AfterValidator(check)


def _schema(pattern: str, max_length: int) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "minLength": 1, "maxLength": max_length, "pattern": pattern})


CompanyId = Annotated[str, _checked("company id", ID_PART), _schema(ID_PART_PATTERN, ID_PART_MAX)]
RoomId = Annotated[str, _checked("room id", ID_PART), _schema(ID_PART_PATTERN, ID_PART_MAX)]
AgentName = Annotated[str, _checked("agent name", ID_PART), _schema(ID_PART_PATTERN, ID_PART_MAX)]
#: An agent id or, where an agent is named (``to``, a policy), its name.
AgentId = Annotated[
    str,
    _checked("agent id", rf"{ID_PART}(\.{ID_PART})?", "its name or {company}.{name}, each part " + ID_RULE),
    _schema(AGENT_ID_PATTERN, AGENT_ID_MAX),
]

#: ``stopped``: a person paused the run's agent or stopped its chain while it ran (design §12.2);
#: its ledger entry says whether the reply was posted (``reply_message_id``).
FINAL_STATUSES = frozenset({"completed", "failed_before_reply", "failed_after_reply", "timed_out", "stopped"})
RunStatus = Literal[
    "running", "waiting_approval", "completed", "failed_before_reply", "failed_after_reply", "timed_out", "stopped"
]

#: ``stopped``: the run waiting on it was stopped (design §12.2); the action is not written.
APPROVAL_STATUSES = ("pending", "deciding", "approved", "rejected", "expired", "stopped")

MAX_REPLY_BYTES = 32 * 1024
MAX_ACTIONS = 25
#: A pattern for text that must say something: at least one character that is not white space
#: (the API refuses a blank message or task title the same way).
NOT_BLANK = r"\S"


def iso(value: datetime) -> str:
    """``value`` (a UTC time) as ISO-8601 with microseconds and ``Z``; the year always has four
    digits (``strftime("%Y")`` writes year 1 as ``"1"``), so the text sorts as the time."""
    return value.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def now_iso() -> str:
    """Current UTC time, ISO-8601 with microseconds (sortable as text)."""
    return iso(datetime.now(UTC))


def parse_iso(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


class _Model(BaseModel):
    # defer_build: a model's validator is built the first time it is used, not at import (a
    # handler imports every model and uses a few: its cold start pays for those only)
    model_config = ConfigDict(extra="ignore", defer_build=True)


# ----------------------------------------------------------------------------- companies
class RightsPolicy(_Model):
    """A company's policy over declared actions (docs/design.md §5). The most specific rule wins:
    per agent and kind, then ``cross_company`` (when the action targets another company),
    then ``actions``, then ``default``."""

    model_config = ConfigDict(extra="forbid")
    default: Decision = "allow"
    actions: dict[ActionKind, Decision] = Field(default_factory=dict)
    cross_company: dict[ActionKind, Decision] = Field(default_factory=dict)
    # keyed by agent id or name (never empty, which DynamoDB refuses as a map key)
    # at most 500 agents with rules of their own (settings.HARD_LIMITS; MAX_POLICY_RULES may lower it)
    agents: dict[AgentId, dict[ActionKind, Decision]] = Field(default_factory=dict, max_length=500)


#: A company's runs active at once (docs/design.md §12.3): the default and the most an operator may set.
DEFAULT_MAX_CONCURRENT_RUNS = 10
MAX_CONCURRENT_RUNS_LIMIT = 1000


class Company(_Model):
    id: CompanyId
    people: list[Id] = Field(default_factory=list)
    rights: RightsPolicy = Field(default_factory=RightsPolicy)
    # At most this many runs of its agents are active at once (design §12.3); set by an operator.
    max_concurrent_runs: int = Field(default=DEFAULT_MAX_CONCURRENT_RUNS, ge=1, le=MAX_CONCURRENT_RUNS_LIMIT)
    # The external id of the company's Bedrock roles (docs/design.md §5): generated by the service
    # when the company first gives a role, never chosen by it; not a secret.
    external_id: str | None = None


class AuditEntry(_Model):
    """One change to a company's people or tokens, or to its run cap, as its people read it
    (docs/design.md §5): when (ISO-8601), who (``actor``: the operator token's member or the
    person; ``actor_kind``), what and on whom."""

    id: str
    at: str
    actor: str
    actor_kind: Literal["operator", "person"]
    action: Literal["company_created", "person_added", "token_issued", "token_revoked", "max_concurrent_runs_set"]
    subject: str
    detail: str = ""


class BudgetLimits(_Model):
    """Spend limits per UTC day and month (docs/design.md §12.4): USD for models with a known price,
    tokens for the others. Each is optional (``None``: no limit)."""

    daily_usd: float | None = Field(default=None, ge=0, le=1_000_000)
    monthly_usd: float | None = Field(default=None, ge=0, le=10_000_000)
    daily_tokens: int | None = Field(default=None, ge=0, le=10**12)
    monthly_tokens: int | None = Field(default=None, ge=0, le=10**13)


class CompanyBudget(BudgetLimits):
    """A company's budget (docs/design.md §12.4): its own limits and, by agent name, its agents'."""

    agents: dict[str, BudgetLimits] = Field(default_factory=dict, max_length=500)


#: An agent's context budget in tokens (design §2.2): the default, the least an agent may have
#: (its instructions, the wake's cause and a reply must fit), the most for a model whose window is
#: not known (:mod:`quayutec.windows` bounds the known ones by their window).
DEFAULT_MAX_CONTEXT_TOKENS = 60_000
MIN_CONTEXT_TOKENS = 8_000  # about 4,000 for the room once the reply and the tools are counted
MAX_CONTEXT_TOKENS_LIMIT = 2_000_000


class Agent(_Model):
    id: AgentId
    company: CompanyId
    provider: ProviderKind
    model: str = Field(min_length=1, max_length=200)
    instructions: str = Field(default="", max_length=32 * 1024)
    base_url: str | None = None  # supplied by the agent's owner: one request per call (design §2.3)
    # A bedrock agent's company role (docs/design.md §5): CallModel assumes it with the company's
    # external id (copied here when the agent is registered) instead of reading a key.
    role_arn: str | None = None
    external_id: str | None = None
    # Who may wake it (design §12.1): anyone in the room, people only, or its own company's people
    # and agents. Checked at the claim.
    wake_from: Literal["anyone", "people", "own_company"] = "anyone"
    # Paused by a person of its company (design §12.2): no run of it starts until it is resumed.
    paused_at: str | None = None
    paused_by: str | None = None
    # How many times it was paused: a run carries the count its claim saw, and its writes are
    # guarded on it (a run claimed before a pause writes nothing after, even once resumed).
    pauses: int = Field(default=0, ge=0)
    # Deleted by a person of its company (design §12.2): paused for good, out of every room, its
    # rules gone; the item stays as a tombstone so its id, which its runs in the ledger name, is
    # never given to another agent.
    deleted_at: str | None = None
    deleted_by: str | None = None
    # The most tokens its prompt and reply may take together (design §2.2): the run's context is
    # fitted into it, leaving out the oldest items whole.
    max_context_tokens: int = Field(
        default=DEFAULT_MAX_CONTEXT_TOKENS, ge=MIN_CONTEXT_TOKENS, le=MAX_CONTEXT_TOKENS_LIMIT
    )


#: A chain of wakes starts at most this many runs unless its room says otherwise (design §12.1).
DEFAULT_MAX_RUNS_PER_CHAIN = 24
#: The most a room may allow.
MAX_RUNS_PER_CHAIN_LIMIT = 200


class Room(_Model):
    id: RoomId  # generated by the service (design §5): never chosen by a caller, so never "taken"
    name: str | None = None  # a label, not unique
    members: list[CompanyId] = Field(default_factory=list)
    # Companies invited and not yet accepted → the company that invited each (design §5): each
    # holds a seat (members and invited stay within MAX_ROOM_MEMBERS); none of them sees the room.
    invited: dict[CompanyId, CompanyId] = Field(default_factory=dict)
    hop_limit: int | None = None  # None: the runtime's setting (default 8)
    # Runs one chain of wakes may start (design §12.1), counted at the claim.
    max_runs_per_chain: int = Field(default=DEFAULT_MAX_RUNS_PER_CHAIN, ge=1, le=MAX_RUNS_PER_CHAIN_LIMIT)
    created_by: CompanyId | None = None  # the company that created it (None: made by the operator's tools)


# ----------------------------------------------------------------------------- room content
class Author(_Model):
    """Who wrote something. Ids are compared typed, ``(kind, id)``, never by id alone: a person's
    id and an agent's id live in different namespaces and may be equal (docs/design.md §5)."""

    kind: Literal["person", "agent", "system"]
    id: str
    company: str | None = None

    def is_(self, kind: str, id: str, company: str | None = None) -> bool:
        """Whether this author is ``(kind, id)`` (and of ``company``, when given)."""
        return self.kind == kind and self.id == id and (company is None or self.company == company)


class Wake(_Model):
    """One wake: an agent woken by a message or task event (docs/design.md §3). Carried on SQS and as the
    Step Functions execution input: ids only."""

    agent_id: str
    wake_id: str
    room_id: str
    hop: int = Field(ge=0)
    # The chain (design §12.1): the id of the person's write that started it; a run's wakes carry
    # the chain of the wake that started the run.
    chain_id: str = Field(min_length=1)
    by_kind: Literal["person", "agent"]  # who wrote what woke it (wake_from is checked on it)
    by_company: str | None = None
    cause_kind: Literal["message", "task_event"]
    cause_id: str  # message id, or task event id
    task_id: str | None = None  # the task of a task event


#: Why a wake a message caused started no run, as every member of the room may read it (design
#: §9, §12.1): the claim's reasons, never a company's private cause.
NotWokenWhy = Literal["paused", "deleted", "wake_from", "chain_full", "chain_stopped"]


class NotWoken(_Model):
    """An agent a message addressed that did not wake, and why (``why``: :data:`NotWokenWhy`)."""

    agent: str
    why: NotWokenWhy


class MessageNotWoken(NotWoken):
    """A wake the claim refused, in the room's changes (docs/design.md §9): the message it was of
    (``message_id``), the agent and why."""

    message_id: str


class AskAgain(_Model):
    """What the "ask again" of a failed run's notice re-asks (docs/design.md §9): ``agent`` (its id) and
    ``message_id``, the message whose wake started the run (``None``: a task's wake)."""

    agent: str
    message_id: str | None = None


class Message(_Model):
    """A room message. ``visible_to``: a company id when only that company's people and agents
    may read it (a system notice, :mod:`quayutec.logic.notices`; docs/design.md §12.5), ``None`` for the
    whole room; stored only when set. ``run_id``: the run that wrote a reply, or that a notice is
    about. ``not_woken``: the agents it addressed whose wake the claim refused, and why (written
    with each refusal, docs/design.md §12.1). ``ask_again``: on the room's notice of a run that ended
    without its reply, whom and what to ask again (docs/design.md §9)."""

    id: str
    room_id: str
    author: Author
    text: str
    to: list[str] = Field(default_factory=list)
    mentions: list[str] = Field(default_factory=list)
    kind: Literal["message", "reply", "notice"] = "message"
    run_id: str | None = None
    chain_id: str | None = None  # what a run wrote (or a chain's notice) carries its chain
    visible_to: Id | None = None
    not_woken: list[NotWoken] = Field(default_factory=list)
    ask_again: AskAgain | None = None
    created_at: str

    @model_validator(mode="after")
    def _company_only_is_a_system_notice(self) -> Message:
        if self.visible_to is not None and (self.kind != "notice" or self.author.kind != "system"):
            raise ValueError("only a system notice may be visible to one company (visible_to)")
        return self

    def visible_to_company(self, company: str) -> bool:
        """Whether a person or agent of ``company`` may read this message (design §12.5)."""
        return self.visible_to is None or self.visible_to == company


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
    """A passage of a room file: its file, its place in it (chunk ``index``, 0-based; the first
    ``line`` it covers, 1-based; the PDF ``page``, 1-based) and its text."""

    room_id: str
    name: str
    index: int
    text: str
    file_id: str = ""
    line: int | None = None
    page: int | None = None


FileStatus = Literal["uploading", "ready", "failed"]


class RoomFile(_Model):
    """A file of a room (docs/design.md §8): declared at upload, ``ready`` or ``failed`` (with its
    reason) once ingested."""

    id: str
    room_id: str
    name: str
    content_type: str
    size: int  # declared at upload; the real size once ingested
    kind: str  # text | markdown | csv | json | html | pdf
    status: FileStatus = "uploading"
    reason: str | None = None
    uploader: Author
    chunks: int = 0
    created_at: str
    ingested_at: str | None = None
    #: The S3 ETag of the upload it was ingested from: a later upload to the same key (the form is
    #: valid 15 minutes) has another, and is ingested in its place, so agents read what people get.
    etag: str | None = None
    #: The S3 version of the upload it was ingested from (the files bucket is versioned): its
    #: download names this version, so it serves the bytes agents read, never a later upload.
    version_id: str | None = None


class ApprovalRequest(_Model):
    """A held action waiting for a yes from the owning company (docs/design.md §2.6). Visible to the
    owning company only."""

    id: str  # "{run_id}:{index}"
    room_id: str
    run_id: str
    index: int
    agent_id: str
    company: str  # the owning company: the only one that can decide
    summary: str  # action kind and target, never company-only text
    #: The held action's validated fields: what a yes writes (the memory line's text, the task's
    #: title and body ...). The request is the owning company's only, so its own agent's text is
    #: shown to the people who decide on it, never in the room.
    fields: dict[str, Any]
    #: ``deciding``: a person's answer is being sent to Step Functions; it says ``approved`` /
    #: ``rejected`` only once Step Functions accepted it (design §2.6).
    status: Literal["pending", "deciding", "approved", "rejected", "expired", "stopped"] = "pending"
    decided_by: str | None = None
    created_at: str


# ----------------------------------------------------------------------------- actions
class RememberAction(_Model):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=4096, pattern=NOT_BLANK)
    visibility: Visibility


class CreateTaskAction(_Model):
    model_config = ConfigDict(extra="forbid")
    to: str = Field(min_length=1, max_length=128)
    title: str = Field(min_length=1, max_length=512, pattern=NOT_BLANK)
    body: str = Field(max_length=16 * 1024)


class UpdateTaskAction(_Model):
    model_config = ConfigDict(extra="forbid")
    task: str = Field(min_length=1, max_length=256)
    note: str = Field(min_length=1, max_length=8192, pattern=NOT_BLANK)


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

ActionOutcome = Literal["pending", "written", "denied", "held", "approved", "rejected", "expired", "not_reached"]


class ActionRecord(_Model):
    """One declared action with its decision and outcome, as the ledger keeps it."""

    index: int
    kind: str
    fields: dict[str, Any] = Field(default_factory=dict)  # validated fields (or {} when malformed)
    decision: Decision
    reason: str = ""
    target: str = ""  # what it acts on (agent, task id, memory visibility): safe to show
    target_company: str | None = None
    approval: Literal["approved", "rejected", "expired", "stopped"] | None = None
    outcome: ActionOutcome = "pending"
    outcome_note: str = ""
    # What the decision read of the room (design §5), so a replay decides it again from the same
    # facts: ``{"agents": {id: company}}`` for create_task (the agent ``to`` resolved to, or none),
    # ``{"task": {id, to, status, created_by}}`` (or ``None``) for a task action, ``{}`` when it
    # read nothing. ``None``: decided before these were recorded.
    inputs: dict[str, Any] | None = None


# ----------------------------------------------------------------------------- run state
class RunRef(_Model):
    run_id: str
    agent_id: str
    wake_id: str
    room_id: str
    hop: int
    chain_id: str


class RunFacts(_Model):
    """Small, non-secret facts of the run carried in the state so that later phases do not
    re-read them (issue 13): set by Claim from its own consistent reads and the ledger entry it
    wrote, completed by the room read (ClaimAndRead). Never room content or keys."""

    company: str  # the run's agent's company (read consistently at claim)
    started_at: str  # the ledger entry's start (active-time budget; parked time is 0 until approvals)
    provider: str
    model: str
    owner_url: bool = False  # the agent has its owner's model address: CallModel reads the agent
    role: bool = False  # the agent runs under its company's Bedrock role: CallModel reads the agent
    hop_limit: int | None = None  # the room's own hop limit (None: the runtime's setting); room read
    # No roster of the room's agents: the state stays the same size in a room of 10 agents or
    # 1,000 (docs/design.md §2); DecideAndPost reads the agents a reply names.
    # The chain had no run left for wakes of this run's writes (read with the claim's key reads):
    # they are not sent, each could only be refused at its claim (design §12.1).
    chain_full: bool = False
    max_runs_per_chain: int = DEFAULT_MAX_RUNS_PER_CHAIN  # the room's bound, as the claim read it
    pauses: int = 0  # the agent's pause count at the claim: the run's stop guard (design §12.2)
    placement: str | None = None  # the agent's placement in the room its claim read (stop guard)
    # The memory partitions this run may write that held lines at its room read (``room``,
    # ``company#{its company}``: at most two): a line there needs no mark on the room item.
    memory_marked: list[str] = Field(default_factory=list, max_length=2)


class ContextFit(_Model):
    """How the run's context was fitted into its agent's budget (docs/design.md §2.2): small counts only,
    carried in the state from ClaimAndRead and written with the final status. ``budget``: the
    tokens left for the prompt (``max_context_tokens`` less the reply's cap and a margin);
    ``prompt_tokens``: the estimate of the prompt as sent (system prompt and user turn);
    ``left_out``: items left out whole, per section (``messages``, ``open_tasks``, ``memory``,
    ``passages``, and the ``agents`` and ``companies`` past the roster's bound); ``over_budget``:
    the instructions and the wake's cause alone did not fit (they are sent whole all the same)."""

    max_context_tokens: int
    budget: int
    prompt_tokens: int
    left_out: dict[str, int] = Field(default_factory=dict)
    over_budget: bool = False


class Budget(_Model):
    remaining_s: int = Field(ge=1)  # whole seconds: handed to each Task as TimeoutSecondsPath


class RunSettings(_Model):
    approval_timeout_s: int


#: Why a claimed wake did not start a run (design §2.1, §3): another execution holds it, its
#: chain reached its bound, its chain was stopped, the agent's ``wake_from`` refuses its writer,
#: or the agent is paused.
NotStartedReason = Literal["other_execution", "chain_full", "chain_stopped", "wake_from", "paused", "deleted"]


class NotStartedRecord(_Model):
    """A wake claimed and not started, as the ledger keeps it (docs/design.md §12.1): why an agent did not
    wake. ``at``: when the claim refused it (ISO-8601)."""

    agent_id: str
    company: str
    room_id: str
    wake_id: str
    chain_id: str
    reason: NotStartedReason
    at: str
    by_kind: str | None = None  # who wrote what caused the wake
    by_company: str | None = None
    cause_kind: str
    cause_id: str


class ClaimResult(_Model):
    claimed: bool
    resumed: bool = False  # the claim was this execution's own (a retried Claim step)
    not_started: NotStartedReason | None = None  # claimed is False: why


class TurnStep(_Model):
    """A run that found no free turn of its company (design §12.3): it waits in the company's
    line, by ``arrival`` (its claim's time), and looks again every ``recheck_s`` seconds."""

    waiting: bool = True
    arrival: str = ""  # every state that carries a turn has it (defaults: the state's versions)
    recheck_s: int = Field(default=60, ge=1)


class ModelStep(_Model):
    outcome: Literal["wait", "reply", "not_started", "stopped", "turn"]
    wait_seconds: int | None = None
    requests: int  # the run's requests so far (a reply: the number of the request that brought it)


class RightsStep(_Model):
    held: list[int] = Field(default_factory=list)  # indexes of actions held for approval
    held_count: int = 0
    actions: int  # actions recorded for the reply (0: the reply post and ApplyAndFinish read none)
    over_limit: int  # actions declared past the limit of 25


class ApprovalOutcome(_Model):
    index: int
    outcome: Literal["approved", "rejected", "expired", "stopped"]


class TokenCount(_Model):
    """Model tokens of a run's requests to one model, from the provider's usage fields."""

    provider: str = ""
    input: int = 0
    output: int = 0
    replies: int = 0  # replies whose usage fields were counted
    unreported: int = 0  # replies without usage fields: their tokens are not counted (never guessed)

    def add(self, other: TokenCount) -> None:
        """Add ``other``'s counts to these (one run's phases, or several runs' lines)."""
        self.input, self.output = self.input + other.input, self.output + other.output
        self.replies, self.unreported = self.replies + other.replies, self.unreported + other.unreported


class RunCost(_Model):
    """A run's cost line (docs/design.md §10): its counted operations and estimated cost. Counted by the
    phases as they run, carried in the state and written once, in the final ledger write.
    ``estimated`` names the figures that are estimates, not counts."""

    lambda_invocations: int = 0  # phase invocations that returned (retries included)
    billed_ms: int = 0  # the phases' handler time, rounded up per invocation (an estimate)
    transitions: int = 0  # states entered, as the phases know the path (an estimate)
    aws_requests: dict[str, int] = Field(default_factory=dict)  # "service.Operation" → calls of the phases
    # DynamoDB consumed capacity the responses reported (ReturnConsumedCapacity=TOTAL):
    # {"read_units": x, "write_units": y}; calls whose response reported none, by operation:
    capacity: dict[str, float] = Field(default_factory=dict)
    capacity_unknown: dict[str, int] = Field(default_factory=dict)
    tokens: dict[str, TokenCount] = Field(default_factory=dict)  # model id → its tokens
    usd: float = 0.0  # from quayutec.cost.prices (an estimate): the model's tokens included when priced
    usd_model_excluded: float = 0.0  # the AWS side alone (an estimate)
    model_usd: float | None = None  # the tokens' cost; None when a model's price is unknown
    model_price_unknown: list[str] = Field(default_factory=list)  # model ids without a price
    estimated: list[str] = Field(default_factory=list)


class PhaseSpan(_Model):
    """One phase invocation's span (docs/design.md §2.8): its name and ISO-8601 UTC start and end."""

    phase: str
    start: str
    end: str


class RunState(_Model):
    """The Step Functions state between phases: ids and small fields only (design §5: never room
    content or keys; budget 32 KiB)."""

    wake: Wake | None = None
    run: RunRef | None = None
    facts: RunFacts | None = None
    claim: ClaimResult | None = None
    budget: Budget | None = None
    settings: RunSettings | None = None
    turn: TurnStep | None = None  # no free turn at the claim: the run waits (design §12.3)
    model: ModelStep | None = None
    rights: RightsStep | None = None
    approvals: list[ApprovalOutcome] | None = None
    finished: bool | None = None  # DecideAndPost recorded the final status (nothing to hold or write)
    stopped: bool | None = None  # the run was stopped (design §12.2): its final status is recorded
    cost: RunCost | None = None  # counters of the phases so far (design §10)
    context: ContextFit | None = None  # how the context was fitted (design §2.2): counts only
    spans: list[PhaseSpan] | None = None  # each phase's start and end so far (design §2.8)
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
    # A reply's usage fields as the provider sent them (None: not reported), stored with its
    # outcome so an attempt that reuses the reply counts them (the one that read it died).
    input_tokens: int | None = None
    output_tokens: int | None = None
    # The request's reserve against its company's spend counters (design §12.4): micro-USD or
    # tokens, and the counters' periods it was counted in (settled there, once, by the outcome).
    reserve_usd: int = 0  # micro-USD
    reserve_tokens: int = 0
    spend_day: str | None = None
    spend_month: str | None = None
    spend_room: str | None = None  # the room counted (None: recorded before rooms were counted)
    company: str | None = None
    agent_id: str | None = None
    settled: bool = False


class RunRecord(_Model):
    run_id: str
    agent_id: str
    company: str
    room_id: str
    wake_id: str
    wake: Wake
    hop: int
    chain_id: str
    execution_arn: str
    status: RunStatus
    started_at: str
    updated_at: str
    parked_since: str | None = None
    parked_s: float = 0.0
    # Fair turns (design §12.3): while it waits for its company's turn, since when (its claim);
    # once its turn began, ``started_at`` is that instant and ``waited_s`` the wait before it.
    waiting_since: str | None = None
    waited_s: float = 0.0
    reply_message_id: str | None = None
    reply_truncated: bool = False
    actions_over_limit: int = 0
    error_class: str | None = None
    error_message: str | None = None
    not_done: list[str] = Field(default_factory=list)
    ended_at: str | None = None
    cost: RunCost | None = None  # the cost line, written with the final status
    context: ContextFit | None = None  # how the prompt was fitted (design §2.2), with the final status
    spans: list[PhaseSpan] | None = None  # its phases' spans (design §2.8), with the final status
    # While the run has no final status: its agent and its room's chain, keys of the ledger's
    # active-runs indexes (sparse: the final write removes them; design §12.2).
    active_agent: str | None = None
    active_chain: str | None = None
    pauses: int = 0  # the agent's pause count its claim saw: the run's stop guard (design §12.2)
    placement: str | None = None  # the agent's placement in the room its claim read (stop guard)
