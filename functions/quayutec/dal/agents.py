"""Always-on agents in the room table: an agent's configuration (no key: keys live in Secrets
Manager), its company's index of its agents and its pause (design §12.2, §5)."""

from __future__ import annotations

from quayutec.dal import keys
from quayutec.dal.aws import (
    paginate_query,
    transient_errors,
    update_if,
)
from quayutec.dal.table import RoomTable, strip
from quayutec.models import (
    Agent,
)


class AgentRecords(RoomTable):
    """An agent's item (``AGENT#{id}`` / ``META``) and its company's index entry."""

    def put_agent(self, agent: Agent) -> None:
        with transient_errors():
            self.db.put_item(
                TableName=self.table,
                Item={
                    **keys.agent_key(agent.id),
                    "type": "agent",
                    **agent.model_dump(mode="json", exclude_none=True),
                },
            )

    def get_agent(self, agent_id: str) -> Agent | None:
        item = self._item(keys.agent_key(agent_id))
        return Agent.model_validate(strip(item)) if item else None

    def create_agent(self, agent: Agent) -> bool:
        """Write a new agent, the company's agent index and its holder of the agent's name, in
        one transaction; ``False`` when the id is taken or the company has an agent of that name
        in another letter case (also when two registrations race)."""
        return self._transact(
            [
                self._put(
                    {
                        **keys.company_agent_name_key(agent.company, agent.id.rsplit(".", 1)[-1]),
                        "type": "company_agent_name",
                        "agent_id": agent.id,
                    }
                ),
                self._put(
                    {
                        **keys.agent_key(agent.id),
                        "type": "agent",
                        **agent.model_dump(mode="json", exclude_none=True),
                    }
                ),
                self._put(
                    {
                        **keys.company_agent_key(agent.company, agent.id),
                        "type": "company_agent",
                        "agent_id": agent.id,
                    },
                    None,
                ),
            ]
        )

    def company_agent_named(self, company: str, name: str) -> str | None:
        """The id of the company's agent named ``name`` (letter case aside), deleted ones
        included, from its name item: one read whatever the company's size. ``None`` when no
        agent registered since name items were written holds it (docs/deploy.md: the backfill
        for older agents)."""
        item = self._item(keys.company_agent_name_key(company, name))
        return str(item["agent_id"]) if item else None

    def agents_of(self, company: str) -> list[str]:
        items = paginate_query(
            self.db.query,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": keys.company_pk(company), ":p": keys.AGENT_PREFIX},
        )
        return [i["agent_id"] for i in items]

    def set_agent_paused(self, agent_id: str, by: str, at: str) -> bool:
        """Mark an existing agent paused by ``by`` at ``at`` (ISO-8601) and count the pause
        (``pauses``: every run claimed before it fails its stop guard from now on, design §12.2);
        ``False`` when it is paused already (the first pause stands) or does not exist. Raises
        TransientError on throttling."""
        return update_if(
            self.db,
            TableName=self.table,
            Key=keys.agent_key(agent_id),
            UpdateExpression="SET paused_at = :at, paused_by = :by ADD pauses :one",
            ConditionExpression="attribute_exists(pk) AND attribute_not_exists(paused_at)",
            ExpressionAttributeValues={":at": at, ":by": by, ":one": 1},
        )

    def clear_agent_paused(self, agent_id: str) -> bool:
        """Resume a paused agent; ``False`` when it was not paused. Raises TransientError on
        throttling."""
        return update_if(
            self.db,
            TableName=self.table,
            Key=keys.agent_key(agent_id),
            UpdateExpression="REMOVE paused_at, paused_by",
            ConditionExpression="attribute_exists(paused_at)",
        )

    def update_agent_config(self, agent_id: str, changes: dict[str, object]) -> bool:
        """Set ``changes`` (configuration attributes of :class:`~quayutec.models.Agent`: model,
        instructions, wake_from, max_context_tokens) on an existing agent that is not deleted;
        ``False`` when it does not exist or is deleted. A run reads its agent at its claim, so a
        change applies from the next run (design §2.2). Raises TransientError on throttling."""
        if not changes:
            return self.get_agent(agent_id) is not None
        names = {f"#a{i}": name for i, name in enumerate(changes)}
        values = {f":v{i}": value for i, value in enumerate(changes.values())}
        return update_if(
            self.db,
            TableName=self.table,
            Key=keys.agent_key(agent_id),
            UpdateExpression="SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(changes))),
            ConditionExpression="attribute_exists(pk) AND attribute_not_exists(deleted_at)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def set_agent_deleted(self, agent_id: str, by: str, at: str) -> bool:
        """Mark an existing agent deleted by ``by`` at ``at`` (ISO-8601): it is paused too (unless
        it was already) and its pause count grows, so every run claimed before fails its stop
        guard and no run of it starts again (design §12.2). ``False`` when it is deleted already
        (the first delete stands) or does not exist. Raises TransientError on throttling."""
        return update_if(
            self.db,
            TableName=self.table,
            Key=keys.agent_key(agent_id),
            UpdateExpression=(
                "SET deleted_at = :at, deleted_by = :by, paused_at = if_not_exists(paused_at, :at), "
                "paused_by = if_not_exists(paused_by, :by) ADD pauses :one"
            ),
            ConditionExpression="attribute_exists(pk) AND attribute_not_exists(deleted_at)",
            ExpressionAttributeValues={":at": at, ":by": by, ":one": 1},
        )
