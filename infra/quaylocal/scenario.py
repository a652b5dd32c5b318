"""Scenario files (format: shared/scenarios/README.md) and the player that plays them on the
local stack: set up the companies, agents, room and files, start the local provider server with
the scripted model replies, run the steps (each waits for quiet), check ``expect``."""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from quaylocal.provider_server import ProviderServer
from quaylocal.stack import LocalStack, warm_during_waits
from quayutec import deps as quay_deps
from quayutec.dal.files import upload_key
from quayutec.logic import files as room_files
from quayutec.logic import ids
from quayutec.logic.access import OPERATOR, Caller
from quayutec.logic.approvals import decide_approval
from quayutec.logic.ids import new_room_id
from quayutec.logic.room_service import RoomService
from quayutec.logic.services import Services
from quayutec.logic.stops import Stops
from quayutec.models import (
    DEFAULT_MAX_CONCURRENT_RUNS,
    DEFAULT_MAX_CONTEXT_TOKENS,
    DEFAULT_MAX_RUNS_PER_CHAIN,
    FINAL_STATUSES,
    MAX_CONCURRENT_RUNS_LIMIT,
    MAX_RUNS_PER_CHAIN_LIMIT,
    MIN_CONTEXT_TOKENS,
    Author,
    CompanyBudget,
    RightsPolicy,
    Wake,
    now_iso,
)

PROVIDER_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL", "bedrock": "BEDROCK_ENDPOINT_URL"}
#: The SDK each provider's adapter imports at its first request (bedrock: boto3, imported).
PROVIDER_SDK = {"anthropic": "anthropic", "openai": "openai", "openai-compatible": "openai"}
STATUSES = (
    "running",
    "waiting_approval",
    "completed",
    "failed_before_reply",
    "failed_after_reply",
    "timed_out",
    "stopped",
)


class ScenarioError(ValueError):
    """The scenario file is not well-formed; the message says where."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SCompany(_Strict):
    id: str
    people: list[str]
    rights: RightsPolicy | None = None
    budget: CompanyBudget | None = None  # as PUT /companies/{company}/budget takes it (design §12.4)
    # its runs active at once, as POST /companies takes it (design §12.3)
    max_concurrent_runs: int = Field(default=DEFAULT_MAX_CONCURRENT_RUNS, ge=1, le=MAX_CONCURRENT_RUNS_LIMIT)


class SAgent(_Strict):
    id: str
    company: str
    provider: Literal["anthropic", "openai", "openai-compatible", "bedrock"]
    model: str
    instructions: str
    wake_from: Literal["anyone", "people", "own_company"] = "anyone"
    # design §2.2: the run's prompt is fitted into it
    max_context_tokens: int = Field(default=DEFAULT_MAX_CONTEXT_TOKENS, ge=MIN_CONTEXT_TOKENS)


class SFile(_Strict):
    """A room file: its ``text``, or a ``path`` relative to the scenario file. It goes through
    S3 and the ingest function like an upload."""

    name: str
    text: str | None = None
    path: str | None = None
    content_type: str | None = None
    _base: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _one_source(self) -> SFile:
        if (self.text is None) == (self.path is None):
            raise ValueError("give either text or path")
        return self

    def data(self) -> bytes:
        if self.text is not None:
            return self.text.encode("utf-8")
        assert self.path is not None
        path = Path(self.path)
        return ((self._base / path) if self._base and not path.is_absolute() else path).read_bytes()

    def media_type(self) -> str:
        import mimetypes

        return self.content_type or mimetypes.guess_type(self.name)[0] or "text/plain"


class SRoom(_Strict):
    id: str  # the room's name (a label): the player maps it to the id of the room it creates
    members: list[str]
    max_runs_per_chain: int = Field(default=DEFAULT_MAX_RUNS_PER_CHAIN, ge=1, le=MAX_RUNS_PER_CHAIN_LIMIT)
    files: list[SFile] = Field(default_factory=list)


class SPost(_Strict):
    as_: str = Field(alias="as")
    text: str
    to: list[str] = Field(default_factory=list)


class STask(_Strict):
    as_: str = Field(alias="as")
    to: str
    title: str
    body: str


class SDecide(_Strict):
    as_: str = Field(alias="as")
    action: str


class SAgentStep(_Strict):
    as_: str = Field(alias="as")
    agent: str


class SStep(_Strict):
    post: SPost | None = None
    task: STask | None = None
    approve: SDecide | None = None
    deny: SDecide | None = None
    pause: SAgentStep | None = None
    resume: SAgentStep | None = None
    redeliver_last_wake: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one(self) -> SStep:
        steps = (self.post, self.task, self.approve, self.deny, self.pause, self.resume, self.redeliver_last_wake)
        if sum(v is not None for v in steps) != 1:
            raise ValueError(
                "each step has exactly one of post, task, approve, deny, pause, resume, redeliver_last_wake"
            )
        return self


class SExpect(_Strict):
    replies: dict[str, int] = Field(default_factory=dict)
    open_tasks: int = 0
    memory_lines: int = 0
    runs: dict[str, int] = Field(default_factory=dict)
    model_requests: dict[str, int] | None = None
    never_seen_by: dict[str, list[str]] | None = None
    seen_by: dict[str, list[str]] | None = None  # text that must be in a model request of the agent


class Scenario(_Strict):
    companies: list[SCompany]
    agents: list[SAgent]
    room: SRoom
    model_replies: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    steps: list[SStep]
    expect: SExpect

    @model_validator(mode="after")
    def _refs(self) -> Scenario:
        companies = {c.id for c in self.companies}
        people = {p for c in self.companies for p in c.people}
        agents = {a.id for a in self.agents}
        for a in self.agents:
            if a.company not in companies:
                raise ValueError(f"agent {a.id}: unknown company {a.company!r}")
        for m in self.room.members:
            if m not in companies:
                raise ValueError(f"room member {m!r} is not a company")
        for agent_id, entries in self.model_replies.items():
            if agent_id not in agents:
                raise ValueError(f"model_replies: unknown agent {agent_id!r}")
            for i, e in enumerate(entries):
                if set(e) - {"delay_s"} not in ({"reply"}, {"error"}):
                    raise ValueError(f"model_replies.{agent_id}[{i}]: one of 'reply' or 'error' (and 'delay_s')")
                if not isinstance(e.get("delay_s", 0), int | float) or not 0 <= e.get("delay_s", 0) <= 60:
                    raise ValueError(f"model_replies.{agent_id}[{i}].delay_s: seconds, 0 to 60")
        for i, s in enumerate(self.steps):
            who = s.post or s.task or s.approve or s.deny
            if who is not None and who.as_ not in people:
                raise ValueError(f"steps[{i}]: unknown person {who.as_!r}")
            named = (s.post.to if s.post else []) + ([s.task.to] if s.task else [])
            for agent_id in named:
                if agent_id not in agents:
                    raise ValueError(f"steps[{i}]: unknown agent {agent_id!r}")
            decide = s.approve or s.deny
            if decide is not None:
                agent_id, _, n = decide.action.rpartition(":")
                if agent_id not in agents or not n.isdigit() or int(n) < 1:
                    raise ValueError(
                        f"steps[{i}]: action {decide.action!r} is not '<agent-id>:<n>' with a known agent and n >= 1"
                    )
        return self

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        """Read and validate a scenario file. Raises ScenarioError with the place of the fault."""
        try:
            with open(path, encoding="utf-8") as f:
                data = yaml.safe_load(f)  # the YAML error then names the file
        except (OSError, UnicodeDecodeError) as exc:
            raise ScenarioError(f"{path}: {exc}") from exc
        except yaml.YAMLError as exc:
            raise ScenarioError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ScenarioError(
                f"{path}: the file must be a mapping with companies, agents, room, model_replies, steps and expect"
            )
        try:
            sc = cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            msg = first["msg"].removeprefix("Value error, ")
            raise ScenarioError(f"{path}: {where + ': ' if where else ''}{msg}") from exc
        for i, sf in enumerate(sc.room.files):
            sf._base = Path(path).parent
            if sf.path is not None and not (sf._base / sf.path).is_file():
                raise ScenarioError(f"{path}: room.files.{i}.path: no file {sf.path!r} beside the scenario")
        return sc


@dataclass
class PlayResult:
    scenario: Scenario
    transcript: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    replies: dict[str, int] = field(default_factory=dict)
    model_requests: dict[str, int] = field(default_factory=dict)
    request_texts: dict[str, list[str]] = field(default_factory=dict)
    open_tasks: int = 0
    memory_lines: int = 0
    run_statuses: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def expect_ok(self) -> bool:
        return not self.failures

    def summary(self) -> dict[str, Any]:
        return {
            "replies": self.replies,
            "model_requests": self.model_requests,
            "open_tasks": self.open_tasks,
            "memory_lines": self.memory_lines,
            "runs": self.run_statuses,
            "expect_ok": self.expect_ok,
            "failures": self.failures,
        }


class Player:
    """Plays one scenario. ``settings``: overrides of the runtime settings; ``time_scale``:
    tests only (scaled Wait/Retry pauses); ``quiet_timeout_s``: per step."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        settings: dict[str, str] | None = None,
        time_scale: float | None = None,
        quiet_timeout_s: float = 120.0,
    ) -> None:
        self.sc = scenario
        self.settings = settings or {}
        self.time_scale = time_scale
        self.quiet_timeout_s = quiet_timeout_s
        self.company_keys = {c.id: f"sk-local-{c.id}-{secrets.token_hex(8)}" for c in scenario.companies}
        # The scenario names its room; the service generates room ids (design §5): the player maps
        # the name to the id of the room it creates.
        self._room_key = secrets.token_hex(16)  # the Idempotency-Key it creates the room with
        self.room_id = new_room_id(self._room_key)
        self.rooms = {scenario.room.id: self.room_id}

    # ------------------------------------------------------------------ play
    def play(self, inspect: Callable[[LocalStack, PlayResult], None] | None = None) -> PlayResult:
        """Play every step, then collect and check. ``inspect(stack, result)`` runs (tests) before
        the stack is torn down."""
        result = PlayResult(self.sc)
        agent_company = {a.id: a.company for a in self.sc.agents}
        server = ProviderServer(
            scripts={k: list(v) for k, v in self.sc.model_replies.items()},
            keys={a: self.company_keys[c] for a, c in agent_company.items()},
            substitute=self._substitute,
        )
        server.start()
        try:
            env = {PROVIDER_ENV[p]: server.base_url(p) for p in PROVIDER_ENV}
            env.update(self.settings)
            with LocalStack(settings=env, time_scale=self.time_scale) as stack:
                self.stack = stack
                # imported while the first run that waits waits, not on a later run's path
                warm_during_waits(
                    *sorted({PROVIDER_SDK[a.provider] for a in self.sc.agents if a.provider in PROVIDER_SDK})
                )
                self._setup(stack, server)
                for i, step in enumerate(self.sc.steps):
                    try:
                        self._step(stack, step, result)
                        stack.wait_quiet(self.quiet_timeout_s)
                    except TimeoutError as exc:
                        result.failures.append(f"step {i + 1}: {exc}")
                        break
                    except Exception as exc:  # noqa: BLE001 - a failed step is a failure of the play
                        result.failures.append(f"step {i + 1}: {type(exc).__name__}: {exc}")
                        break
                self._collect(stack, server, result)
                result.failures += [f"local stack: {e}" for e in stack.stats.errors]
                if inspect is not None:
                    inspect(stack, result)
        finally:
            server.stop()
        for agent in server.exhausted:
            result.failures.append(f"{agent}: model script exhausted (a request beyond its model_replies)")
        self._check(result)
        return result

    def _substitute(self, actions: Any) -> Any:
        """Replace ``"$task:N"`` by the id of the N-th task created in the room (as-is when none)."""
        tasks = quay_deps.default_deps().room.all_tasks(self.room_id)

        def sub(v: Any) -> Any:
            if isinstance(v, str) and v.startswith("$task:") and v[6:].isdigit():
                n = int(v[6:])
                return tasks[n - 1].id if 1 <= n <= len(tasks) else v
            if isinstance(v, dict):
                return {k: sub(x) for k, x in v.items()}
            if isinstance(v, list):
                return [sub(x) for x in v]
            return v

        return sub(actions)

    def _setup(self, stack: LocalStack, server: ProviderServer) -> None:
        d = quay_deps.default_deps()
        sm = stack.client("secretsmanager")
        svc = Services(d)
        # as the API sets them up (its domain services): agent ids are {company}.{name}, the room's
        # id is the service's (its Idempotency-Key's)
        for c in self.sc.companies:
            svc.companies.create(OPERATOR, c.id, c.people, c.rights, max_concurrent_runs=c.max_concurrent_runs)
            if c.budget is not None:
                svc.companies.set_budget(self._person_of(c.id), c.id, c.budget)
        for a in self.sc.agents:
            base_url = server.base_url("openai-compatible") if a.provider == "openai-compatible" else None
            name = quay_deps.secret_name(d.settings, a.company, a.provider)
            with contextlib.suppress(sm.exceptions.ResourceExistsException):
                sm.create_secret(Name=name, SecretString=self.company_keys[a.company])
            svc.agents.register(
                self._person_of(a.company),
                name=a.id,
                provider=a.provider,
                model=a.model,
                instructions=a.instructions,
                base_url=base_url,
                wake_from=a.wake_from,
                max_context_tokens=a.max_context_tokens,
            )
        creator = self.sc.room.members[0]
        made = svc.rooms.create(
            self._person_of(creator),
            name=self.sc.room.id,
            members=self.sc.room.members,
            max_runs_per_chain=self.sc.room.max_runs_per_chain,
            idempotency_key=self._room_key,
        )
        # the other companies are invited (design §5): the player accepts as a person of each
        for company in sorted(made.room.invited):
            svc.rooms.accept(self._person_of(company), self.room_id)
        for a in self.sc.agents:
            svc.rooms.place_agent(self._person_of(a.company), self.room_id, a.id)
        self._upload_files(stack, d)
        stack.wait_quiet(self.quiet_timeout_s)

    def _upload_files(self, stack: LocalStack, d: Any) -> None:
        """Each file as a member uploads it: declared (``uploading``), put into the files bucket
        (its S3 event goes to the ingest queue), ingested before the first step."""
        if not self.sc.room.files:
            return
        member = self.sc.room.members[0]
        person = next(c.people[0] for c in self.sc.companies if c.id == member and c.people)
        uploader = Author(kind="person", id=person, company=member)
        s3 = stack.client("s3")
        for f in self.sc.room.files:
            data = f.data()
            meta = room_files.declare_upload(
                d,
                self.room_id,
                name=f.name,
                content_type=f.media_type(),
                size=len(data),
                uploader=uploader,
                at=now_iso(),
            )
            s3.put_object(
                Bucket=d.files.bucket, Key=upload_key(self.room_id, meta.id), Body=data, ContentType=f.media_type()
            )
        stack.wait_quiet(self.quiet_timeout_s)
        for f in d.files.list_files(self.room_id):
            if f.status != "ready":
                raise RuntimeError(f"room file {f.name}: {f.status} ({f.reason})")

    def _person_of(self, company: str) -> Caller:
        """The company's first person, as the player acts for it (its set-up)."""
        person = next((c.people[0] for c in self.sc.companies if c.id == company and c.people), None)
        if person is None:
            raise ValueError(f"company {company!r} has no person to set up its agents and rooms")
        return Caller(company=company, member=person)

    def agent_id(self, name: str) -> str:
        """The id of the scenario's agent ``name`` (its ``id`` in the scenario is its name in its
        company): ``{company}.{name}``, as the API registers it."""
        company = next(a.company for a in self.sc.agents if a.id == name)
        return ids.agent_id(company, name)

    def _author(self, person: str) -> Author:
        company = next(c.id for c in self.sc.companies if person in c.people)
        return Author(kind="person", id=person, company=company)

    def _step(self, stack: LocalStack, step: SStep, result: PlayResult) -> None:
        d = quay_deps.default_deps()
        rooms = RoomService(d.room)
        if step.post:
            msg = rooms.post_message(self.room_id, self._author(step.post.as_), step.post.text, step.post.to)
            result.events.append(f"{step.post.as_} posted {msg.id}")
        elif step.task:
            task = rooms.create_task(
                self.room_id, self._author(step.task.as_), step.task.to, step.task.title, step.task.body
            )
            result.events.append(f"{step.task.as_} created task {task.id} for {step.task.to}")
        elif step.approve or step.deny:
            s = step.approve or step.deny
            assert s is not None
            agent_id, _, n = s.action.rpartition(":")
            mine = [a for a in d.room.approvals(self.room_id) if a.agent_id in (agent_id, self.agent_id(agent_id))]
            if not n.isdigit() or not 1 <= int(n) <= len(mine):
                raise LookupError(f"no approval request {s.action!r} (agent {agent_id} has {len(mine)})")
            approval = mine[int(n) - 1]
            decided = decide_approval(d, self.room_id, approval.id, self._author(s.as_), approve=bool(step.approve))
            result.events.append(
                f"{s.as_} {'approved' if step.approve else 'denied'} {decided.summary} "
                f"({agent_id}'s approval request {n})"
            )
        elif step.pause or step.resume:
            ps = step.pause or step.resume
            assert ps is not None
            who = self._author(ps.as_)
            agent = d.room.get_agent(self.agent_id(ps.agent) if "." not in ps.agent else ps.agent)
            if agent is None or agent.company != who.company:
                raise LookupError(f"{ps.as_} has no agent {ps.agent!r} to {'pause' if step.pause else 'resume'}")
            stops = Stops(d)
            done = stops.pause(agent, who) if step.pause else stops.resume(agent, who)
            result.events.append(
                f"{ps.as_} {'paused' if step.pause else 'resumed'} {agent.id} (changed: {done.changed})"
            )
        elif step.redeliver_last_wake is not None:
            body = stack.last_wake_body
            if body is None:
                raise LookupError("no wake has been delivered yet")
            stack.client("sqs").send_message(QueueUrl=stack.queue_urls["WakeQueue"], MessageBody=body)
            stack.wait_quiet(self.quiet_timeout_s)
            wake = Wake.model_validate_json(body)
            result.events.append(self._duplicate_report(d, stack, wake))

    def _duplicate_report(self, d: Any, stack: LocalStack, wake: Wake) -> str:
        from quayutec.logic.ids import execution_name

        deliveries = d.ledger.deliveries(wake.agent_id, wake.wake_id)
        name = execution_name(wake.agent_id, wake.wake_id)
        executions = [
            e
            for s in ("RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")
            for e in stack.client("stepfunctions").list_executions(
                stateMachineArn=stack.state_machine_arn, statusFilter=s
            )["executions"]
            if e["name"] == name
        ]
        layer = (
            "Step Functions refused it: ExecutionAlreadyExists for execution name " + name
            if deliveries.get("already_exists")
            else "Step Functions returned the running execution of the same name and input (" + name + ")"
        )
        counted = f"{deliveries['repeats']} repeat(s) counted, " if deliveries.get("repeats") else ""
        return (
            f"wake {wake.wake_id} for {wake.agent_id} delivered again ({counted}"
            f"{len(executions)} execution): {layer}; not run twice"
        )

    # ------------------------------------------------------------------ results
    def _collect(self, stack: LocalStack, server: ProviderServer, result: PlayResult) -> None:
        d = quay_deps.default_deps()
        room_id = self.room_id
        # The operator's view: every message, company-only notices of every company included
        # (design §12.5); what a company's people or agents read is filtered (the API, a run's context).
        result.transcript = [m.model_dump(mode="json") for m in d.room.all_messages(room_id)]
        result.tasks = [
            t.model_dump(mode="json")
            | {"events": [e.model_dump(mode="json") for e in d.room.task_events(room_id, t.id)]}
            for t in d.room.all_tasks(room_id)
        ]
        result.memory = [
            m.model_dump(mode="json") for m in d.room.all_memory(room_id, [c.id for c in self.sc.companies])
        ]
        result.approvals = [a.model_dump(mode="json") for a in d.room.approvals(room_id)]
        runs = sorted(d.ledger.runs_in_room(room_id), key=lambda x: x.started_at)
        for run in runs:
            result.runs.append(
                {
                    **run.model_dump(mode="json"),
                    "requests": [q.model_dump(mode="json") for q in d.ledger.model_requests(run.run_id)],
                    "actions": [a.model_dump(mode="json") for a in d.ledger.actions(run.run_id)],
                }
            )
        agents = [a.id for a in self.sc.agents]
        result.replies = {
            a: sum(1 for m in result.transcript if m["kind"] == "reply" and m["author"]["id"] == self.agent_id(a))
            for a in agents
        }
        result.model_requests = {a: server.count(a) for a in agents}
        result.request_texts = {
            a: [json.dumps(q.body) for q in server.requests if q.agent_id in (a, self.agent_id(a))] for a in agents
        }
        result.open_tasks = sum(1 for t in result.tasks if t["status"] == "open")
        result.memory_lines = len(result.memory)
        statuses = dict.fromkeys(STATUSES, 0)
        for run in runs:
            statuses[run.status] += 1
        result.run_statuses = {s: n for s, n in statuses.items() if n or s in FINAL_STATUSES}

    def _check(self, result: PlayResult) -> None:
        e = self.sc.expect
        agents = [a.id for a in self.sc.agents]
        for agent in agents:
            want = e.replies.get(agent, 0)
            if result.replies.get(agent, 0) != want:
                result.failures.append(f"replies[{agent}]: expected {want}, got {result.replies.get(agent, 0)}")
        if result.open_tasks != e.open_tasks:
            result.failures.append(f"open_tasks: expected {e.open_tasks}, got {result.open_tasks}")
        if result.memory_lines != e.memory_lines:
            result.failures.append(f"memory_lines: expected {e.memory_lines}, got {result.memory_lines}")
        for status in set(STATUSES) | set(e.runs):
            want = e.runs.get(status, 0)
            got = result.run_statuses.get(status, 0)
            if got != want:
                result.failures.append(f"runs[{status}]: expected {want}, got {got}")
        if e.model_requests is not None:
            for agent in agents:
                want = e.model_requests.get(agent, 0)
                got = result.model_requests.get(agent, 0)
                if got != want:
                    result.failures.append(f"model_requests[{agent}]: expected {want}, got {got}")
        for agent, texts in (e.seen_by or {}).items():
            for text in texts:
                if not any(text.lower() in body.lower() for body in result.request_texts.get(agent, [])):
                    result.failures.append(f"seen_by[{agent}]: {text!r} was in no model request")
        for agent, texts in (e.never_seen_by or {}).items():
            for text in texts:
                if any(text.lower() in body.lower() for body in result.request_texts.get(agent, [])):
                    result.failures.append(f"never_seen_by[{agent}]: {text!r} appeared in a model request")


def mutual_mentions(
    agents: int = 3, *, replies: int = 60, max_runs_per_chain: int | None = None, text: str = "@a1 start"
) -> Scenario:
    """A room of ``agents`` agents (``a1`` of acme, the rest of globex) whose every reply
    @mentions all the others, and one message of acme's ann that wakes ``a1`` (``text``): the
    room that makes a chain of wakes as wide as it can go (design §12.1; ``make bench``, the tests).
    ``replies``: scripted replies per agent; no ``expect`` (which agent answers how often depends
    on the order concurrent runs are claimed in)."""
    ids = [f"a{i}" for i in range(1, agents + 1)]
    room: dict[str, Any] = {"id": "mutual-mentions", "members": ["acme", "globex"]}
    if max_runs_per_chain is not None:
        room["max_runs_per_chain"] = max_runs_per_chain
    return Scenario.model_validate(
        {
            "companies": [{"id": "acme", "people": ["ann"]}, {"id": "globex", "people": ["gus"]}],
            "agents": [
                {
                    "id": a,
                    "company": "acme" if a == "a1" else "globex",
                    "provider": "anthropic",
                    "model": "claude-test",
                    "instructions": "Be brief.",
                }
                for a in ids
            ],
            "room": room,
            "model_replies": {
                a: [{"reply": {"text": " ".join(f"@{o}" for o in ids if o != a) + " over to you"}}] * replies
                for a in ids
            },
            "steps": [{"post": {"as": "ann", "text": text}}],
            "expect": {},
        }
    )


def two_company_backlog(waiting: int = 12, *, cap: int = 2, delay_s: float = 1.0) -> Scenario:
    """Fair turns (design §12.3): company ``xco`` (``max_concurrent_runs`` ``cap``) with
    ``waiting`` agents ``x1``… and company ``yco`` with one agent ``y1``, in one room; one
    message of xco's xena wakes them all. Every reply comes ``delay_s`` seconds after its request
    (the local provider server's ``delay_s``) and names no one. ``make bench`` and the tests."""
    xs = [f"x{i}" for i in range(1, waiting + 1)]
    agents = [*xs, "y1"]
    return Scenario.model_validate(
        {
            "companies": [
                {"id": "xco", "people": ["xena"], "max_concurrent_runs": cap},
                {"id": "yco", "people": ["yuri"]},
            ],
            "agents": [
                {
                    "id": a,
                    "company": "yco" if a == "y1" else "xco",
                    "provider": "anthropic",
                    "model": "claude-test",
                    "instructions": "Be brief.",
                }
                for a in agents
            ],
            # one message wakes every agent: the chain's run cap (24 by default) must not stop it first
            "room": {
                "id": "backlog",
                "members": ["xco", "yco"],
                "max_runs_per_chain": max(DEFAULT_MAX_RUNS_PER_CHAIN, len(agents)),
            },
            "model_replies": {a: [{"reply": {"text": f"{a} done"}, "delay_s": delay_s}] for a in agents},
            "steps": [{"post": {"as": "xena", "text": " ".join(f"@{a}" for a in agents) + " go"}}],
            "expect": {"replies": dict.fromkeys(agents, 1), "runs": {"completed": len(agents)}},
        }
    )
