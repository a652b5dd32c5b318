"""Issue 10, finding 4: authors are typed wherever ids are compared (design §5). Company bolt's
person ``bob`` creates a task for bolt's agent; company acme registers an agent named
``bob`` (``acme.bob``): it is neither the task's creator (a person) nor its assignee, so its ``update_task`` and
``close_task`` are denied and nothing is written, through the real run path."""

from __future__ import annotations

import pytest
from runhelpers import ANN as ACME_ANN
from runhelpers import Env

from quayutec.logic import rights
from quayutec.logic.room_service import RoomService
from quayutec.logic.services import Services
from quayutec.models import Agent, Author, Task

ANN = Author(kind="person", id="ann", company="acme")
BOB = Author(kind="person", id="bob", company="bolt")


def test_an_agent_named_like_the_creating_person_cannot_update_or_close_the_task(env: Env) -> None:
    d = env.deps
    rooms = RoomService(d.room)
    task = rooms.create_task("r1", BOB, "b1", "Bolt's own work", "For b1 only.")
    env.stack.wait_quiet(30)
    svc = Services(d)  # acme's person registers and places it, as through the API
    svc.agents.register(ACME_ANN, name="bob", provider="anthropic", model="claude-test", instructions=".")
    svc.rooms.place_agent(ACME_ANN, "r1", "bob")
    env.server.keys["bob"] = env.keys["acme"]
    env.server.set_script(
        "bob",
        [
            {
                "reply": {
                    "text": "Taking over bob's task.",
                    "actions": [
                        {"kind": "update_task", "task": task.id, "note": "hijacked"},
                        {"kind": "close_task", "task": task.id, "result": "closed by acme's agent"},
                    ],
                }
            }
        ],
    )
    rooms.post_message("r1", ANN, "@bob tidy up", [])
    env.stack.wait_quiet(30)
    [run] = [r for r in d.ledger.runs_in_room("r1") if r.agent_id == "acme.bob"]
    assert run.status == "completed", run
    actions = d.ledger.actions(run.run_id)
    assert [(a.kind, a.decision, a.outcome) for a in actions] == [
        ("update_task", "deny", "denied"),
        ("close_task", "deny", "denied"),
    ], actions
    assert all("neither the task's assignee nor its creator" in a.reason for a in actions)
    after = d.room.get_task("r1", task.id)
    assert after is not None and after.status == "open"
    assert [e.kind for e in d.room.task_events("r1", task.id)] == ["created"]


@pytest.mark.unit
def test_the_agent_that_created_a_task_still_may_update_it() -> None:
    """The typed check keeps what the rule allows: an agent's own task, and its assignee."""
    a1 = Agent(id="a1", company="acme", provider="anthropic", model="m")
    b1 = Agent(id="b1", company="bolt", provider="openai", model="m")
    task = Task(
        id="t1",
        room_id="r1",
        title="t",
        body="",
        to="b1",
        created_by=Author(kind="agent", id="a1", company="acme"),
        created_at="x",
        updated_at="x",
    )
    view = rights.RoomView(agent_company={"a1": "acme", "b1": "bolt"}, tasks={"t1": task})
    for agent in (a1, b1):
        rec = rights.decide_action(0, "update_task", {"task": "t1", "note": "n"}, agent, None, view)
        assert rec.decision == "allow", (agent.id, rec.reason)
    person_task = task.model_copy(update={"created_by": Author(kind="person", id="a1", company="acme")})
    view = rights.RoomView(agent_company={"a1": "acme", "b1": "bolt"}, tasks={"t1": person_task})
    rec = rights.decide_action(0, "close_task", {"task": "t1", "result": "r"}, a1, None, view)
    assert rec.decision == "deny", "a person's id is not an agent's id"
