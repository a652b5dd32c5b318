"""A big room reads what a small one reads (design §14): one page of every listing (messages,
runs, approvals, tasks, memory) and one plain run make the same AWS calls and read the same
number of items in a room with 10x the history of a small one. The counts ``make bench`` prints
in its ``big_room`` object, pinned."""

from __future__ import annotations

from runhelpers import Env

from quaylab.big_room import LISTINGS, PAGE_LIMIT, big_room_figures

#: One page of each listing at PAGE_LIMIT: one query each (runs: two, its runs and its refused
#: wakes; memory: two, room-wide and the company's own), each after the room's membership read.
CALLS_PER_PAGE = {"messages": 2, "runs": 3, "approvals": 2, "tasks": 2, "memory": 3}


def test_a_10x_room_reads_what_a_small_one_reads(env: Env) -> None:
    figures = big_room_figures(env.deps, env.stack, env.server, scale=10)
    small, large = figures["pages"]["small"], figures["pages"]["large"]
    assert small == large, (small, large)
    assert {name: small[name]["aws_calls"] for name in LISTINGS} == CALLS_PER_PAGE
    assert all(small[name]["items"] == PAGE_LIMIT for name in LISTINGS if name != "runs"), small
    assert figures["reads_per_page"]["small"] == figures["reads_per_page"]["large"]
    assert figures["calls_per_page"] == {"small": sum(CALLS_PER_PAGE.values()), "large": sum(CALLS_PER_PAGE.values())}
    assert figures["reads_per_run"]["small"] == figures["reads_per_run"]["large"], figures["reads_per_run"]
