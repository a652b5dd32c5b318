"""Always-on agents (docs/design.md §2.2, §3, §5): registration under the caller's company
(its id is ``{company}.{name}``, a name being one name letter case aside), the provider key in
Secrets Manager (``{prefix}/{stage}/{company}/{provider}``: created or rotated, never read
here) or a company role for a bedrock agent, and pause / resume. The domain service of
``/agents``; the scenario player, the chaos lab and the test fixtures register agents through
it too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from quayutec.dal import aws
from quayutec.dal.aws import error_code, transient_errors
from quayutec.deps import Deps, secret_name
from quayutec.errors import Conflict, InvalidInput, NotFound
from quayutec.logic import ids
from quayutec.logic.access import Principal, own_agent
from quayutec.logic.stops import Stops
from quayutec.logic.wakes import WakeFrom
from quayutec.models import DEFAULT_MAX_CONTEXT_TOKENS, MAX_CONTEXT_TOKENS_LIMIT, MIN_CONTEXT_TOKENS, Agent
from quayutec.windows import context_window


@dataclass(frozen=True)
class AgentView:
    """An agent as its company sees it: its configuration, whether its company's key for its
    provider is stored, and (after a pause) how many of its runs waiting on approvals were ended."""

    agent: Agent
    key_stored: bool
    stopping: int | None = None


def context_problem(tokens: int, provider: str, model: str) -> str | None:
    """Why ``tokens`` is no agent's ``max_context_tokens`` on this model (design §2.2), or ``None``."""
    if tokens < MIN_CONTEXT_TOKENS:
        return (
            f"max_context_tokens: {tokens:,} is less than {MIN_CONTEXT_TOKENS:,}, the least that holds "
            "an agent's instructions, the wake's cause and a reply"
        )
    window = context_window(model, provider)
    if window is not None and tokens > window:
        return f"max_context_tokens: {tokens:,} is more than {model}'s context window of {window:,} tokens"
    if tokens > MAX_CONTEXT_TOKENS_LIMIT:
        return f"max_context_tokens: {tokens:,} is more than {MAX_CONTEXT_TOKENS_LIMIT:,}, the most an agent may have"
    return None


class Agents:
    """``deps``: the runtime's stores and settings; its ``extra["secretsmanager"]``, when set,
    is the Secrets Manager client (else the factory's)."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = deps.room

    # ------------------------------------------------------------------ the company's key
    def _secrets(self) -> Any:
        client = self.deps.extra.get("secretsmanager")
        if client is None:
            client = self.deps.extra["secretsmanager"] = aws.secretsmanager()
        return client

    def key_stored(self, company: str, provider: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            with transient_errors():
                self._secrets().describe_secret(SecretId=secret_name(self.deps.settings, company, provider))
            return True
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return False
            raise

    def _store_key(self, company: str, provider: str, key: str) -> None:
        """Create the company's secret for the provider, or rotate it (a new version)."""
        from botocore.exceptions import ClientError

        name = secret_name(self.deps.settings, company, provider)
        sm = self._secrets()
        with transient_errors():
            try:
                sm.create_secret(
                    Name=name, SecretString=key, Description=f"quayutec: {provider} key of company {company}"
                )
            except ClientError as exc:
                if error_code(exc) != "ResourceExistsException":
                    raise
                sm.put_secret_value(SecretId=name, SecretString=key)

    def view(self, agent: Agent) -> AgentView:
        return AgentView(agent=agent, key_stored=self.key_stored(agent.company, agent.provider))

    # ------------------------------------------------------------------ registration
    def register(
        self,
        who: Principal,
        *,
        name: str,
        provider: str,
        model: str,
        instructions: str = "",
        base_url: str | None = None,
        wake_from: WakeFrom = "anyone",
        max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS,
        role_arn: str | None = None,
        api_key: str | None = None,
    ) -> AgentView:
        """Register agent ``{company}.{name}`` of the caller's company. Its key is stored first
        (an agent is never left registered without it); a role instead of a key gives the
        company's external id (generated on its first role).

        Raises Forbidden (an operator), pydantic's ValidationError (``body.base_url`` is no
        public https address), InvalidInput (context size, a role on another provider, a key
        and a role, no key stored), Conflict (the company has an agent of that name)."""
        company = who.require_company()
        if provider == "openai-compatible" and not base_url:
            raise InvalidInput("base_url: an openai-compatible agent needs its owner's model address")
        if base_url is not None:  # https to a public address (docs/design.md §5); checked again at each request
            from quayutec.providers.egress import url_problem  # registration only: not at import

            problem = url_problem(base_url, allow_loopback=self.deps.allow_loopback_model_urls)
            if problem:
                raise ValidationError.from_exception_data(
                    "AgentIn",
                    [
                        {
                            "type": "value_error",
                            "loc": ("body", "base_url"),
                            "input": None,
                            "ctx": {"error": ValueError(problem)},
                        }
                    ],
                )
        problem = context_problem(max_context_tokens, provider, model)
        if problem:
            raise InvalidInput(problem)
        if role_arn is not None:  # a company role instead of a key (docs/design.md §5)
            if provider != "bedrock":
                raise InvalidInput(f"role_arn: only a bedrock agent runs under a role, not a {provider} one")
            if api_key is not None:
                raise InvalidInput("role_arn: give either an api_key or a role_arn, not both")
            from quayutec.providers.roles import role_arn_problem  # registration only: not at import

            problem = role_arn_problem(role_arn)
            if problem:
                raise InvalidInput(f"role_arn: {problem}")
        elif api_key is None and not self.key_stored(company, provider):
            raise InvalidInput(f"api_key: no {provider} key is stored for company {company!r} yet")
        # The id is scoped to the caller's company (docs/design.md §5): "taken" can only be about its own agent.
        agent = Agent(
            id=ids.agent_id(company, name),
            company=company,
            provider=provider,
            model=model,
            instructions=instructions,
            base_url=base_url,
            max_context_tokens=max_context_tokens,
            wake_from=wake_from,
            role_arn=role_arn,
        )
        # one read of the company's holder of the name, whatever its count of agents; the create
        # transaction's condition on that item settles two registrations that race
        holder = self.store.company_agent_named(company, name) or agent.id
        taken = self.store.get_agent(holder)
        if taken is not None:  # a name is one name, letter case aside (@Planner and @planner are one agent)
            if taken.deleted_at is not None:
                raise Conflict(
                    f"your company's agent {taken.id} was deleted at {taken.deleted_at}: an agent's id is "
                    "never given to another (its runs in the ledger name it); choose another name"
                )
            raise Conflict(f"your company has an agent named {ids.agent_name(taken.id)!r} already ({taken.id})")
        if api_key is not None:  # first the key: an agent is never left registered without it
            self._store_key(company, provider, api_key)
        if role_arn is not None:  # the company's external id, generated on its first role
            from quayutec.providers.roles import new_external_id

            agent = agent.model_copy(update={"external_id": self.store.external_id(company, new_external_id())})
        if not self.store.create_agent(agent):
            raise Conflict(f"your company has an agent named {name!r} already ({agent.id})")
        return self.view(agent)

    # ------------------------------------------------------------------ reads, pause, resume
    def list(self, who: Principal) -> list[AgentView]:
        company = who.require_company()
        agents = [self.store.get_agent(a) for a in self.store.agents_of(company)]
        return [self.view(a) for a in agents if a is not None and a.deleted_at is None]

    def get(self, who: Principal, agent_ref: str) -> AgentView:
        """One of the caller's company's agents, by id or name; NotFound otherwise."""
        return self.view(own_agent(self.store, agent_ref, who))

    def pause(self, who: Principal, agent_ref: str) -> AgentView:
        """Pause one of the caller's company's agents (:meth:`quayutec.logic.stops.Stops.pause`)."""
        agent = own_agent(self.store, agent_ref, who)
        paused = Stops(self.deps).pause(agent, who.author())
        return AgentView(
            agent=paused.agent,
            key_stored=self.key_stored(paused.agent.company, paused.agent.provider),
            stopping=paused.stopping,
        )

    def resume(self, who: Principal, agent_ref: str) -> AgentView:
        agent = own_agent(self.store, agent_ref, who)
        return self.view(Stops(self.deps).resume(agent, who.author()).agent)

    # ------------------------------------------------------------------ update, delete
    def update(
        self,
        who: Principal,
        agent_ref: str,
        *,
        model: str | None = None,
        instructions: str | None = None,
        wake_from: WakeFrom | None = None,
        max_context_tokens: int | None = None,
        api_key: str | None = None,
    ) -> AgentView:
        """Change one of the caller's company's agents: its model, instructions, who may wake it,
        its context size (checked against the model it will have, as at registration) and its
        company's key for its provider (``api_key``: a new version of the company's secret, which
        every agent of the company on that provider reads; refused for an agent under a role).
        ``None`` leaves a field as it is. Runs already claimed keep what they read; the next
        run reads the change (design §2.2). Raises NotFound (no such agent of the caller's
        company, or deleted), InvalidInput (context size, a key for a role agent)."""
        agent = own_agent(self.store, agent_ref, who)
        changes: dict[str, object] = {}
        if model is not None:
            changes["model"] = model
        if instructions is not None:
            changes["instructions"] = instructions
        if wake_from is not None:
            changes["wake_from"] = wake_from
        tokens = max_context_tokens if max_context_tokens is not None else agent.max_context_tokens
        if max_context_tokens is not None or model is not None:
            problem = context_problem(tokens, agent.provider, model or agent.model)
            if problem:
                if max_context_tokens is None:  # the model changed under the agent's current size
                    problem += " (the agent's current max_context_tokens: give a new one with the model)"
                raise InvalidInput(problem)
            if max_context_tokens is not None:
                changes["max_context_tokens"] = max_context_tokens
        if api_key is not None:
            if agent.role_arn is not None:
                raise InvalidInput(f"api_key: {agent.id} runs under its company's role {agent.role_arn}, not a key")
            self._store_key(agent.company, agent.provider, api_key)
        if changes and not self.store.update_agent_config(agent.id, changes):
            raise NotFound(f"agent {agent.id!r} was deleted meanwhile")
        return self.view(self.store.get_agent(agent.id) or agent.model_copy(update=changes))

    def delete(self, who: Principal, agent_ref: str) -> AgentView:
        """Delete one of the caller's company's agents for good (:meth:`quayutec.logic.stops.Stops.delete`):
        no run of it starts, its running runs end ``stopped``, it leaves every room and its
        policy rules end; its past runs stay in the ledger. Idempotent: deleting it again
        answers the same agent and finishes what a fault left. Raises NotFound."""
        agent = own_agent(self.store, agent_ref, who, deleted=True)
        done = Stops(self.deps).delete(agent, who.author())
        return AgentView(
            agent=done.agent,
            key_stored=self.key_stored(done.agent.company, done.agent.provider),
            stopping=done.stopping,
        )
