"""Pure rules: wakes (design §3), rights precedence and malformed actions (design §4, §5), ids."""

from __future__ import annotations

import re

import pytest

from quayutec.logic import ids, rights, wakes
from quayutec.models import Agent, Author, Message, RightsPolicy, Task, now_iso

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

A1 = Agent(id="a1", company="acme", provider="anthropic", model="m")
ROOM = rights.RoomView(agent_company={"a1": "acme", "b1": "bolt"}, tasks={})


def test_execution_name_is_deterministic_short_and_safe() -> None:
    name = ids.execution_name("agent.with:odd/chars" * 5, "msg:x" * 40)
    assert name == ids.execution_name("agent.with:odd/chars" * 5, "msg:x" * 40)
    assert len(name) <= 80 and re.fullmatch(r"[A-Za-z0-9_-]+", name)
    assert ids.execution_name("a1", "w1") != ids.execution_name("a1", "w2")
    assert ids.execution_name("a1", "w1") != ids.execution_name("a2", "w1")


def test_message_wakes_one_per_agent_for_to_and_mention() -> None:
    msg = Message(
        id="m1",
        room_id="r",
        author=Author(kind="person", id="p"),
        text="@a1 and @b1 @a1",
        to=["a1"],
        created_at=now_iso(),
    )
    found = wakes.mentions(msg.text, ["a1", "b1", "c1"])
    assert found == ["a1", "b1"]
    ws = wakes.person_message_wakes(msg, ["a1", *found])
    assert [(w.agent_id, w.hop, w.wake_id) for w in ws] == [("a1", 0, "msg:m1"), ("b1", 0, "msg:m1")]


def test_mentions_ignore_emails_and_unknown_agents() -> None:
    assert wakes.mentions("mail bob@a1 or @zz, not @a1's", ["a1"]) == ["a1"]
    assert wakes.mentions("bob@a1.com", ["a1"]) == []


def test_run_wakes_never_self_once_per_agent_and_hop_limit() -> None:
    ws, notices = wakes.run_wakes(
        run_id="r",
        room_id="room",
        step="actions",
        run_agent="a1",
        run_hop=2,
        hop_limit=8,
        targets=[("a1", "task_event", "e", "t"), ("b1", "task_event", "e1", "t"), ("b1", "task_event", "e2", "t")],
        chain_id="m0",
        run_company="acme",
    )
    assert [(w.agent_id, w.hop, w.cause_id, w.wake_id) for w in ws] == [("b1", 3, "e1", "run:r:actions:b1")]
    assert [(w.chain_id, w.by_kind, w.by_company) for w in ws] == [("m0", "agent", "acme")]
    assert notices == []
    ws, notices = wakes.run_wakes(
        run_id="r",
        room_id="room",
        step="reply",
        run_agent="a1",
        run_hop=8,
        hop_limit=8,
        targets=[("b1", "message", "m", None)],
        chain_id="m0",
        run_company="acme",
    )
    assert ws == [] and len(notices) == 1
    assert notices[0].kind == "notice" and "hop limit 8" in notices[0].text and notices[0].author.kind == "system"


def test_policy_precedence_most_specific_wins() -> None:
    p = RightsPolicy(
        default="deny",
        actions={"create_task": "allow"},
        cross_company={"create_task": "ask"},
        agents={"a1": {"create_task": "deny"}},
    )
    assert rights.decide(p, "a1", "create_task", True)[0] == "deny"  # per agent and kind
    assert rights.decide(p, "a2", "create_task", True)[0] == "ask"  # cross company
    assert rights.decide(p, "a2", "create_task", False)[0] == "allow"  # actions
    assert rights.decide(p, "a2", "remember", False)[0] == "deny"  # default
    assert rights.decide(None, "a2", "remember", False)[0] == "allow"  # no policy


def test_malformed_actions_are_denied_with_reasons_never_raised() -> None:
    task = Task(
        id="t1",
        room_id="r",
        title="T",
        body="",
        to="b1",
        created_by=Author(kind="person", id="p", company="bolt"),
        status="closed",
        created_at=now_iso(),
        updated_at=now_iso(),
    )
    room = rights.RoomView(agent_company=ROOM.agent_company, tasks={"t1": task})
    cases = [
        ("fly", {"x": 1}, "unknown action kind 'fly'"),
        ("remember", {"text": "x"}, "missing field 'visibility'"),
        ("remember", {"text": "x", "visibility": "room", "extra": 1}, "unexpected field 'extra'"),
        ("remember", {"text": "x", "visibility": "world"}, "invalid field 'visibility'"),
        ("remember", None, "arguments are not a JSON object"),
        ("create_task", {"to": "zz", "title": "t", "body": "b"}, "agent 'zz' is not in the room"),
        ("update_task", {"task": "nope", "note": "n"}, "task 'nope' is not in this room"),
        ("close_task", {"task": "t1", "result": "r"}, "task 't1' is closed"),
    ]
    for name, args, reason in cases:
        rec = rights.decide_action(0, name, args, A1, None, room)
        assert rec.decision == "deny" and rec.outcome == "denied", name
        assert reason in rec.reason, (name, rec.reason)
    open_task = task.model_copy(update={"status": "open"})
    room = rights.RoomView(agent_company=ROOM.agent_company, tasks={"t1": open_task})
    rec = rights.decide_action(0, "update_task", {"task": "t1", "note": "n"}, A1, None, room)
    assert rec.decision == "deny" and "neither the task's assignee nor its creator" in rec.reason


def test_reasons_never_quote_what_the_model_wrote() -> None:
    secret = "Internal: margin target 32%"
    rec = rights.decide_action(0, "remember", {"text": secret, "visibility": "everyone"}, A1, None, ROOM)
    assert secret not in rec.reason and "32%" not in rights.describe(rec)


def test_over_limit_actions_are_counted_not_decided() -> None:
    calls = [{"name": "remember", "input": {"text": f"{i}", "visibility": "room"}} for i in range(30)]
    records, over = rights.decide_all(calls, A1, None, ROOM)
    assert len(records) == 25 and over == 5
    assert all(r.decision == "allow" for r in records)


def test_cross_company_target_of_task_updates_is_the_creators_company() -> None:
    task = Task(
        id="t1",
        room_id="r",
        title="T",
        body="",
        to="a1",
        created_by=Author(kind="agent", id="b1", company="bolt"),
        created_at=now_iso(),
        updated_at=now_iso(),
    )
    room = rights.RoomView(agent_company=ROOM.agent_company, tasks={"t1": task})
    policy = RightsPolicy(cross_company={"close_task": "ask"})
    rec = rights.decide_action(0, "close_task", {"task": "t1", "result": "done"}, A1, policy, room)
    assert (rec.decision, rec.target_company) == ("ask", "bolt")


def test_policy_rules_under_an_agents_id_and_its_name_both_apply() -> None:
    """A company names its agent by id or by name in its policy: per kind, a rule under either
    counts (the id's first), so one form never hides the other's rules."""
    policy = RightsPolicy(agents={"a1": {"remember": "deny"}, "acme.a1": {"create_task": "ask"}})
    assert rights.decide(policy, "acme.a1", "remember", False) == ("deny", "rule agents.a1.remember")
    assert rights.decide(policy, "acme.a1", "create_task", False) == ("ask", "rule agents.acme.a1.create_task")
    both = RightsPolicy(agents={"a1": {"remember": "deny"}, "acme.a1": {"remember": "allow"}})
    assert rights.decide(both, "acme.a1", "remember", False)[0] == "allow"  # the id's rule first
    assert rights.decide(policy, "bolt.b1", "remember", False) == ("allow", "rule default")


def test_an_agent_reference_names_one_agent_letter_case_aside() -> None:
    room = ["acme.Planner", "bolt.b1", "legacy"]
    assert ids.resolve_agent("acme.Planner", room) == "acme.Planner"
    assert ids.resolve_agent("Planner", room) == "acme.Planner"
    assert ids.resolve_agent("planner", room) == "acme.Planner"  # one agent of that name, case aside
    assert ids.resolve_agent("legacy", room) == "legacy" and ids.resolve_agent("b1", room) == "bolt.b1"
    assert ids.resolve_agent("acme.b1", room) is None and ids.resolve_agent("nobody", room) is None
    assert ids.resolve_agent("x", ["acme.x", "bolt.x"]) is None  # two: names none (rooms refuse this)
    assert wakes.mentions("@PLANNER and @bolt.b1, @nobody", room) == ["acme.Planner", "bolt.b1"]


def test_a_run_of_a_full_chain_sends_no_wake() -> None:
    ws, notices = wakes.run_wakes(
        run_id="r",
        room_id="room",
        step="reply",
        run_agent="a1",
        run_hop=1,
        hop_limit=8,
        targets=[("b1", "message", "m", None)],
        chain_id="m0",
        run_company="acme",
        chain_full=True,
    )
    assert ws == [] and notices == []


def test_person_writes_start_their_chain() -> None:
    msg = Message(id="m1", room_id="r", author=Author(kind="person", id="ann", company="acme"), text="", created_at="t")
    [w] = wakes.person_message_wakes(msg, ["a1"])
    assert (w.chain_id, w.by_kind, w.by_company) == ("m1", "person", "acme")
    [t] = wakes.task_event_wakes("r", "t1", "tev1", ["a1"], hop=0, exclude=None, by_kind="person", by_company="bolt")
    assert (t.chain_id, t.by_company) == ("tev1", "bolt")


@pytest.mark.parametrize(
    ("wake_from", "by_kind", "by_company", "wakes_it"),
    [
        ("anyone", "agent", "bolt", True),
        ("people", "person", "bolt", True),
        ("people", "agent", "acme", False),
        ("own_company", "agent", "acme", True),
        ("own_company", "person", "acme", True),
        ("own_company", "agent", "bolt", False),
        ("own_company", "person", "bolt", False),
        ("own_company", "person", None, False),
    ],
)
def test_wake_from(wake_from: str, by_kind: str, by_company: str | None, wakes_it: bool) -> None:
    assert wakes.may_wake(wake_from, "acme", by_kind, by_company) is wakes_it
