"""The run state is the same size (its counters' digits aside) in a room of 10 agents and one of
1,000 (docs/design.md §2: it carries ids and small facts, no roster of the room), and an agent
of a big room is still named by one bounded read (a mention, an action's ``to``)."""

from __future__ import annotations

import contextvars

from runhelpers import BOB, Env

from quaylab.costs import plain_runs
from quaylocal import calls as C
from quayutec.logic.room_service import RoomService
from quayutec.logic.services import Services
from quayutec.models import Author


def _add_agents(env: Env, start: int, stop: int) -> None:
    d = env.deps
    with C.owner(C.SETUP):
        svc = Services(d)  # bolt's person registers and places them, as through the API
        for i in range(start, stop):
            svc.agents.register(BOB, name=f"n{i:04d}", provider="openai", model="gpt-test")
            svc.rooms.place_agent(BOB, "r1", f"bolt.n{i:04d}")


def test_the_state_is_the_same_size_with_10_or_1000_agents(env: Env) -> None:
    _add_agents(env, 0, 8)  # with a1 and b1: 10 agents
    _, small = plain_runs(env.stack, env.server, 2)
    _add_agents(env, 8, 998)  # 1,000 agents
    assert len(env.deps.room.room_agent_ids("r1")) == 1000
    _, large = plain_runs(env.stack, env.server, 2)
    # the same but for the digits of its counters (times, costs, the count of agents the prompt left out)
    assert 0 < small.state_bytes < 16 * 1024 and abs(large.state_bytes - small.state_bytes) <= 64, (
        small.state_bytes,
        large.state_bytes,
    )
    assert (small.aws_calls, small.lambda_invocations) == (large.aws_calls, large.lambda_invocations)
    # the newest agent of the 1,000 is named as the first one: one bounded read, not the roster
    rooms = RoomService(env.deps.room)
    msg = contextvars.copy_context().run(
        rooms.post_message, "r1", Author(kind="person", id="ann", company="acme"), "@N0997 and @n0000, @b1", []
    )
    assert msg.mentions == ["bolt.n0997", "bolt.n0000", "bolt.b1"], msg.mentions
