"""A replay decides a run's actions again from the room facts each decision recorded (design §5.1):
the same facts and policy give the same decisions; a changed policy shows where they differ; an
action that read the room but kept no facts cannot be replayed."""

from __future__ import annotations

import pytest

from quayutec.errors import Conflict
from quayutec.logic import rights
from quayutec.logic.replay import redecide
from quayutec.models import Agent, Author, RightsPolicy, Task

pytestmark = pytest.mark.unit

A1 = Agent(id="acme.a1", company="acme", provider="anthropic", model="m")
CALLS = [
    {"name": "create_task", "input": {"to": "b1", "title": "map the stalls", "body": "north quay"}},
    {"name": "close_task", "input": {"task": "t1", "result": "done"}},
    {"name": "remember", "input": {"text": "x", "visibility": "room"}},
    {"name": "no_such_kind", "input": {}},
]
ROOM = rights.RoomView(
    agent_company={"acme.a1": "acme", "bolt.b1": "bolt", "bolt.b9": "bolt"},
    tasks={
        "t1": Task(
            id="t1",
            room_id="r1",
            title="t",
            body="long body the replay does not need",
            to="acme.a1",
            created_by=Author(kind="person", id="bob", company="bolt"),
            created_at="2026-12-01T00:00:00Z",
            updated_at="2026-12-01T00:00:00Z",
        )
    },
)


def _decide(policy: RightsPolicy) -> list:
    return rights.decide_all(CALLS, A1, policy, ROOM)[0]


def test_each_decision_records_only_the_facts_it_read() -> None:
    create, close, remember, unknown = _decide(RightsPolicy())
    assert create.inputs == {"agents": {"bolt.b1": "bolt"}}, "the agent `to` resolved to, not the room"
    assert close.inputs == {
        "task": {
            "id": "t1",
            "to": "acme.a1",
            "status": "open",
            "created_by": {"kind": "person", "id": "bob", "company": "bolt"},
        }
    }
    assert remember.inputs == {} and unknown.inputs == {}


def test_the_same_facts_and_policy_decide_the_same_and_a_new_policy_differs() -> None:
    policy = RightsPolicy(cross_company={"create_task": "ask"})
    recorded = _decide(policy)
    then, now = redecide(recorded, CALLS, A1, policy)
    assert [t.decision for t in then] == [n.decision for n in now] == ["ask", "allow", "allow", "deny"]
    assert [n.reason for n in now] == [t.reason for t in then]
    stricter = RightsPolicy(cross_company={"create_task": "ask"}, actions={"remember": "deny"})
    _, now = redecide(recorded, CALLS, A1, stricter)
    assert [(n.index, n.decision) for n in now] == [(0, "ask"), (1, "allow"), (2, "deny"), (3, "deny")]
    assert now[2].reason == "acme policy: rule actions.remember = deny"


def test_a_room_reading_action_without_recorded_facts_cannot_be_replayed() -> None:
    recorded = [a.model_copy(update={"inputs": None}) for a in _decide(RightsPolicy())]
    with pytest.raises(Conflict, match="action 0 \\(create_task\\) was decided before"):
        redecide(recorded, CALLS, A1, RightsPolicy())
    only_memory = [a for a in recorded if a.kind == "remember"]  # it read nothing of the room
    then, now = redecide(only_memory, CALLS, A1, RightsPolicy())
    assert [t.decision for t in then] == [n.decision for n in now] == ["allow"]
