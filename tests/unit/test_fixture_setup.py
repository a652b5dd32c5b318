"""Fixtures set up through the domain services (CONTRIBUTING.md, "Where things go"): no test, test
helper or fixture, nor the bench, creates a company, an agent, a room or a membership through the
data layer (``quayutec.dal``'s writes of those aggregates); they call ``logic.services`` as the API,
the scenario player and the chaos lab do, so the set-up passes the rules the runtime applies
(ids ``{company}.{name}``, membership, one agent per name, the limits; docs/design.md §5). The
tests of the data layer itself are the exceptions, each named below with what it tests."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

#: The data layer's writes of companies, agents, rooms and memberships (``quayutec.dal``).
#: These names are the data layer's only: the services register and place agents.
DAL_ONLY = {"put_company", "put_agent", "create_agent", "put_room", "add_room_agent"}
#: Names a service or the HTTP client (``quaycli``) has too: a data-layer write when called on a
#: store (``deps.room``, ``….room``, a ``RoomStore``) or given a model (``Room(...)``, ...).
SHARED = {"create_company", "add_person", "create_room", "add_member"}
MODELS = {"Company", "Agent", "Room"}
STORE_NAMES = {"room", "store", "directory", "room_store", "RoomStore"}

#: (file, test function) → what of the data layer it tests.
ALLOWED = {
    (
        "tests/api/test_api_ownership.py",
        "test_a_company_name_item_refuses_a_second_agent_of_a_name_even_past_the_check",
    ): ("the store's conditional write of the company's name item, past the service's check (a race)"),
    ("tests/run/test_item_limits.py", "test_the_room_item_at_its_limits"): (
        "the room item's size with 100 members and 1,500 agents (the store's item, not the rules)"
    ),
    ("tests/run/test_item_limits.py", "test_the_company_item_and_its_budget_at_their_limits"): (
        "the company item's size at its limits"
    ),
    ("tests/run/test_item_limits.py", "test_the_agent_item_at_its_limits"): "the agent item's size at its limits",
    ("tests/run/test_room_item.py", "test_a_room_written_again_keeps_its_agents_and_memory"): (
        "put_room keeps the room item's agents and memory marks"
    ),
    (
        "tests/api/test_api_ownership.py",
        "test_a_room_name_item_refuses_a_second_agent_of_a_name_even_past_the_api_check",
    ): "add_room_agent's name item refuses a second agent of a name (past the service's check)",
}


def _scanned() -> list[Path]:
    return [*sorted((REPO / "tests").rglob("*.py")), REPO / "scripts" / "bench.py"]


def _receiver_is_store(node: ast.expr) -> bool:
    """``d.room``, ``deps.room``, ``store``, ``RoomStore(...)``: the room table's store."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr in STORE_NAMES
    return isinstance(node, ast.Name) and node.id in STORE_NAMES


def _builds_model(call: ast.Call) -> bool:
    return any(
        isinstance(a, ast.Call)
        and (
            (isinstance(a.func, ast.Name) and a.func.id in MODELS)
            or (isinstance(a.func, ast.Attribute) and a.func.attr in MODELS)
        )
        for a in call.args
    )


def dal_setups(
    source: str, path: str, allowed: dict[tuple[str, str], str] = ALLOWED
) -> list[tuple[str, int, str, str]]:
    """The data-layer writes of companies, agents, rooms and memberships in ``source``: (path,
    line, enclosing function, call), those of the ``allowed`` tests left out."""
    tree = ast.parse(source)
    found: list[tuple[str, int, str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                attr = child.func.attr
                dal = attr in DAL_ONLY or (
                    attr in SHARED and (_receiver_is_store(child.func.value) or _builds_model(child))
                )
                if dal and (path, function) not in allowed:
                    found.append((path, child.lineno, function, attr))
            visit(child, name)

    visit(tree, "<module>")
    return found


def test_no_fixture_creates_agents_or_rooms_through_the_data_layer() -> None:
    found = [
        hit for p in _scanned() for hit in dal_setups(p.read_text(encoding="utf-8"), p.relative_to(REPO).as_posix())
    ]
    assert not found, "set up through quayutec.logic.services, not the data layer:\n" + "\n".join(
        f"{path}:{line} in {function}: .{call}(...)" for path, line, function, call in found
    )


def test_every_allowed_data_layer_test_exists() -> None:
    """An exception names a test that still writes through the data layer (else it goes)."""
    for path, function in ALLOWED:
        hits = dal_setups((REPO / path).read_text(encoding="utf-8"), path, allowed={})
        assert [h for h in hits if h[2] == function], f"{path}::{function} writes nothing through the dal"


@pytest.mark.parametrize(
    "planted",
    [
        'd.room.put_agent(Agent(id="acme.a1", company="acme", provider="openai", model="m"))',
        'default_deps().room.create_room(Room(id="r1", members=["acme"]))',
        'directory.create_room(Room(id="r1", members=["acme"]))',
        'd.room.add_room_agent("r1", "acme.a1", "acme")',
        'env.deps.room.add_member("r1", "bolt", 100)',
        'd.room.create_company(Company(id="acme", people=["ann"]))',
        'RoomStore("t").put_room(room)',
    ],
)
def test_a_planted_data_layer_setup_is_found(planted: str) -> None:
    source = f"def make_world(d):\n    {planted}\n"
    assert [(line, function) for _, line, function, _ in dal_setups(source, "tests/x/helpers.py")] == [
        (2, "make_world")
    ]


@pytest.mark.parametrize(
    "fine",
    [
        'svc.agents.register(ann, name="a1", provider="openai", model="m")',
        'svc.rooms.create(ann, name="r1", members=["bolt"], room_id="r1")',
        'svc.rooms.invite(ann, "r1", "bolt")',
        'svc.companies.add_person(OPERATOR, "acme", "amy")',
        'ann.create_room("harbour", ["bolt"])',  # the HTTP client: through the API
        'admin.create_company("acme", ["ann"])',
    ],
)
def test_the_services_and_the_api_client_are_not_flagged(fine: str) -> None:
    assert dal_setups(f"def make_world(svc, ann, admin):\n    {fine}\n", "tests/x/helpers.py") == []
