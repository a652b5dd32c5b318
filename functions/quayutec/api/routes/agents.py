"""Always-on agents of the caller's company. The provider key goes to Secrets Manager
(``{prefix}/{stage}/{company}/{provider}``, set or rotated; the API only
creates, puts and describes secrets, it never reads a key) and is never returned; another
company's agent configuration is never shown. A bedrock agent may give its company's role
(``role_arn``) instead of a key: the response shows the company's external id for the role's trust
policy (docs/design.md §5)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from quayutec.api.access import services
from quayutec.api.context import caller
from quayutec.api.routes._params import AgentId
from quayutec.api.schemas import AgentIn, AgentList, AgentOut, AgentUpdateIn
from quayutec.logic import ids
from quayutec.logic.agents import AgentView

router = APIGatewayRouter()


def _out(view: AgentView) -> AgentOut:
    out = AgentOut(**view.agent.model_dump(), name=ids.agent_name(view.agent.id), key_stored=view.key_stored)
    return out if view.stopping is None else out.model_copy(update={"stopping": view.stopping})


@router.post("/agents", status_code=201, tags=["agents"], summary="Register an always-on agent of the caller's company")
def register_agent(body: Annotated[AgentIn, Body()]) -> AgentOut:
    return _out(
        services().agents.register(
            caller(),
            name=body.name,
            provider=body.provider,
            model=body.model,
            instructions=body.instructions,
            base_url=body.base_url,
            wake_from=body.wake_from,
            max_context_tokens=body.max_context_tokens,
            role_arn=body.role_arn,
            api_key=body.api_key.get_secret_value() if body.api_key is not None else None,
        )
    )


@router.get("/agents", tags=["agents"], summary="The caller's company's agents")
def list_agents() -> AgentList:
    return AgentList(agents=[_out(v) for v in services().agents.list(caller())])


@router.get("/agents/<agent_id>", tags=["agents"], summary="One of the caller's company's agents")
def get_agent(agent_id: AgentId) -> AgentOut:
    return _out(services().agents.get(caller(), agent_id))


@router.post(
    "/agents/<agent_id>/pause",
    tags=["agents"],
    summary="Pause one of your company's agents: no run of it starts until it is resumed",
)
def pause_agent(agent_id: AgentId) -> AgentOut:
    """A person of the agent's company only (another company's agent answers 404). Its running
    runs write nothing more and end ``stopped``; those waiting on approvals are ended now
    (``stopping``). Idempotent: pausing a paused agent changes nothing but stops what it
    reaches again. Each pause is a notice in the agent's rooms naming who paused it (design §12.2)."""
    return _out(services().agents.pause(caller(), agent_id))


@router.post("/agents/<agent_id>/resume", tags=["agents"], summary="Resume one of your company's paused agents")
def resume_agent(agent_id: AgentId) -> AgentOut:
    """A person of the agent's company only. Idempotent; a notice in the agent's rooms names who
    resumed it (design §12.2)."""
    return _out(services().agents.resume(caller(), agent_id))


@router.patch("/agents/<agent_id>", tags=["agents"], summary="Change one of your company's agents")
def update_agent(agent_id: AgentId, body: Annotated[AgentUpdateIn, Body()]) -> AgentOut:
    """A person of the agent's company only (another company's agent, or a deleted one, answers
    404). Changes its model, instructions, `wake_from` or `max_context_tokens` (checked against the
    model it will have: a 400 names the window), or stores a new key for your company and its
    provider (every agent of your company on that provider reads it). Its runs already going keep
    what they read; the next run reads the change (docs/design.md §2.2). Its provider and name
    never change: register another agent instead."""
    return _out(
        services().agents.update(
            caller(),
            agent_id,
            model=body.model,
            instructions=body.instructions,
            wake_from=body.wake_from,
            max_context_tokens=body.max_context_tokens,
            api_key=body.api_key.get_secret_value() if body.api_key is not None else None,
        )
    )


@router.delete("/agents/<agent_id>", tags=["agents"], summary="Delete one of your company's agents, for good")
def delete_agent(agent_id: AgentId) -> AgentOut:
    """A person of the agent's company only. No run of it starts again; its running runs write
    nothing more and end `stopped` (those waiting on approvals now: `stopping`); it leaves every
    room it is in (a notice in each names who deleted it) and your company's policy rules for it
    end. Its past runs stay in the ledger, and its id is never given to another agent. Idempotent:
    deleting it again answers the same and finishes what a fault left (docs/design.md §12.2)."""
    return _out(services().agents.delete(caller(), agent_id))
