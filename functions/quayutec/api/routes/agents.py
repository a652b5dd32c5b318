"""Always-on agents of the caller's company. The provider key goes to Secrets Manager
(``{prefix}/{stage}/{company}/{provider}``, set or rotated; the API only
creates, puts and describes secrets, it never reads a key) and is never returned; another
company's agent configuration is never shown. A bedrock agent may give its company's role
(``role_arn``) instead of a key: the response shows the company's external id for the role's trust
policy (docs/design.md §5)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import ValidationError

from quayutec.api.access import Services, own_agent, services
from quayutec.api.context import caller
from quayutec.api.routes._params import AgentId
from quayutec.api.schemas import AgentIn, AgentList, AgentOut
from quayutec.dal import aws
from quayutec.dal.aws import error_code, transient_errors
from quayutec.deps import secret_name
from quayutec.errors import Conflict, InvalidInput
from quayutec.logic import ids
from quayutec.logic.stops import Stops
from quayutec.models import MAX_CONTEXT_TOKENS_LIMIT, MIN_CONTEXT_TOKENS, Agent
from quayutec.windows import context_window

router = APIGatewayRouter()


def _secrets(svc: Services) -> Any:
    client = svc.deps.extra.get("secretsmanager")
    if client is None:
        client = svc.deps.extra["secretsmanager"] = aws.secretsmanager()
    return client


def _key_stored(svc: Services, company: str, provider: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        with transient_errors():
            _secrets(svc).describe_secret(SecretId=secret_name(svc.deps.settings, company, provider))
        return True
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return False
        raise


def _store_key(svc: Services, company: str, provider: str, key: str) -> None:
    """Create the company's secret for the provider, or rotate it (a new version)."""
    from botocore.exceptions import ClientError

    name = secret_name(svc.deps.settings, company, provider)
    sm = _secrets(svc)
    with transient_errors():
        try:
            sm.create_secret(Name=name, SecretString=key, Description=f"quayutec: {provider} key of company {company}")
        except ClientError as exc:
            if error_code(exc) != "ResourceExistsException":
                raise
            sm.put_secret_value(SecretId=name, SecretString=key)


def _context_problem(tokens: int, provider: str, model: str) -> str | None:
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


def _out(svc: Services, agent: Agent) -> AgentOut:
    return AgentOut(
        **agent.model_dump(), name=ids.agent_name(agent.id), key_stored=_key_stored(svc, agent.company, agent.provider)
    )


@router.post("/agents", status_code=201, tags=["agents"], summary="Register an always-on agent of the caller's company")
def register_agent(body: Annotated[AgentIn, Body()]) -> AgentOut:
    company = caller().require_company()
    svc = services()
    if body.provider == "openai-compatible" and not body.base_url:
        raise InvalidInput("base_url: an openai-compatible agent needs its owner's model address")
    if body.base_url is not None:  # https to a public address (SPEC §5); checked again at each request
        from quayutec.providers.egress import url_problem  # registration only: not at import

        problem = url_problem(body.base_url, allow_loopback=svc.deps.settings.allow_loopback_model_urls)
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
    problem = _context_problem(body.max_context_tokens, body.provider, body.model)
    if problem:
        raise InvalidInput(problem)
    if body.role_arn is not None:  # a company role instead of a key (docs/design.md §5)
        if body.provider != "bedrock":
            raise InvalidInput(f"role_arn: only a bedrock agent runs under a role, not a {body.provider} one")
        if body.api_key is not None:
            raise InvalidInput("role_arn: give either an api_key or a role_arn, not both")
        from quayutec.providers.roles import role_arn_problem  # registration only: not at import

        problem = role_arn_problem(body.role_arn)
        if problem:
            raise InvalidInput(f"role_arn: {problem}")
    elif body.api_key is None and not _key_stored(svc, company, body.provider):
        raise InvalidInput(f"api_key: no {body.provider} key is stored for company {company!r} yet")
    # The id is scoped to the caller's company (SPEC §5): "taken" can only be about its own agent.
    agent = Agent(
        id=ids.agent_id(company, body.name),
        company=company,
        provider=body.provider,
        model=body.model,
        instructions=body.instructions,
        base_url=body.base_url,
        wake_from=body.wake_from,
        max_context_tokens=body.max_context_tokens,
        role_arn=body.role_arn,
    )
    mine = [a for a in svc.directory.agents_of(company) if ids.name_key(ids.agent_name(a)) == ids.name_key(body.name)]
    if mine:  # a name is one name, letter case aside (@Planner and @planner are one agent)
        raise Conflict(f"your company has an agent named {ids.agent_name(mine[0])!r} already ({mine[0]})")
    if svc.deps.room.get_agent(agent.id) is not None:
        raise Conflict(f"your company has an agent named {body.name!r} already ({agent.id})")
    if body.api_key is not None:  # first the key: an agent is never left registered without it
        _store_key(svc, company, body.provider, body.api_key.get_secret_value())
    if body.role_arn is not None:  # the company's external id, generated on its first role
        from quayutec.providers.roles import new_external_id

        agent = agent.model_copy(update={"external_id": svc.directory.external_id(company, new_external_id())})
    if not svc.directory.create_agent(agent):
        raise Conflict(f"your company has an agent named {body.name!r} already ({agent.id})")
    return _out(svc, agent)


@router.get("/agents", tags=["agents"], summary="The caller's company's agents")
def list_agents() -> AgentList:
    company = caller().require_company()
    svc = services()
    agents = [svc.deps.room.get_agent(a) for a in svc.directory.agents_of(company)]
    return AgentList(agents=[_out(svc, a) for a in agents if a is not None])


@router.get("/agents/<agent_id>", tags=["agents"], summary="One of the caller's company's agents")
def get_agent(agent_id: AgentId) -> AgentOut:
    svc = services()
    return _out(svc, own_agent(svc, agent_id, caller()))


@router.post(
    "/agents/<agent_id>/pause",
    tags=["agents"],
    summary="Pause one of your company's agents: no run of it starts until it is resumed",
)
def pause_agent(agent_id: AgentId) -> AgentOut:
    """A person of the agent's company only (another company's agent answers 404). Its running
    runs write nothing more and end ``stopped``; those waiting on approvals are ended now
    (``stopping``). Idempotent: pausing a paused agent changes nothing but stops what it
    reaches again. Each pause is a notice in the agent's rooms naming who paused it (design §3)."""
    who = caller()
    svc = services()
    agent = own_agent(svc, agent_id, who)
    paused = Stops(svc.deps).pause(agent, who.author())
    return _out(svc, paused.agent).model_copy(update={"stopping": paused.stopping})


@router.post("/agents/<agent_id>/resume", tags=["agents"], summary="Resume one of your company's paused agents")
def resume_agent(agent_id: AgentId) -> AgentOut:
    """A person of the agent's company only. Idempotent; a notice in the agent's rooms names who
    resumed it (design §3)."""
    who = caller()
    svc = services()
    agent = own_agent(svc, agent_id, who)
    return _out(svc, Stops(svc.deps).resume(agent, who.author()).agent)
