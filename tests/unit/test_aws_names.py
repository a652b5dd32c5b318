"""Every AWS name built from a company, room or agent id is one AWS accepts (design §5), for the
longest and oddest ids the models accept; anything else is refused where the id is created, with
a message that says what is allowed. moto accepts any name, so these are checked against the
services' documented patterns, written here with their source:

* Secrets Manager, CreateSecret ``Name`` (API reference): 1-512 characters of ASCII letters,
  digits and ``/_+=.@-``; and (user guide, "Create a secret") not ending in a hyphen followed by
  six characters, which a partial-ARN lookup would take for the random suffix.
* Step Functions, StartExecution ``name`` (API reference): 1-80 characters; for CloudWatch Logs
  only ``0-9 A-Z a-z - _``.
* S3 object keys (user guide, "Naming Amazon S3 objects"): at most 1024 bytes of UTF-8; the safe
  characters are ``0-9 a-z A-Z ! - _ . * ' ( )`` and ``/`` between the parts of a prefix; no part
  ``.`` or ``..``.
* CloudWatch ``Dimension`` ``Value`` (API reference): 1-1024 characters, ASCII only, at least one
  that is not white space.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

from quayutec import resources as R
from quayutec.api.schemas import AgentIn, CompanyIn, MemberIn, MessageIn, RoomAgentIn, RoomIn
from quayutec.dal.files import index_key, parse_upload_key, upload_key
from quayutec.dal.rundata import run_data_key
from quayutec.deps import secret_name
from quayutec.logic import ids
from quayutec.logic.files import new_file_id
from quayutec.models import ID_RULE, Agent, AgentId, Company, CompanyId, ProviderKind, Room, RoomId
from quayutec.settings import Settings

pytestmark = pytest.mark.unit

SECRET_NAME = re.compile(r"[A-Za-z0-9/_+=.@-]{1,512}")
SECRET_RANDOM_SUFFIX = re.compile(r".*-.{6}")  # what a name must not be: ending in "-" and six more
EXECUTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
S3_SAFE_KEY = re.compile(r"[0-9A-Za-z!_.*'()/-]+")
DIMENSION_VALUE = re.compile(r"[\x00-\x7f]*\S[\x00-\x7f]*")

#: The longest ids the models accept, of every character they allow (first and last included).
LONGEST_COMPANY = ("Z9_-" * 16)[:63]
ODD_COMPANY = "0-_"
LONGEST_ROOM = ("r_-Q8" * 13)[:63]
LONGEST_AGENT = f"{LONGEST_COMPANY}.{('a-_9Z' * 13)[:63]}"
COMPANIES = [LONGEST_COMPANY, ODD_COMPANY, "acme", "a"]
#: (no random id: pytest-xdist workers must collect the same parameters)
ROOMS = [LONGEST_ROOM, ids.new_room_id("a-key"), ids.new_room_id("k"), "r1", "r-cato", "0"]
AGENTS = [LONGEST_AGENT, f"{ODD_COMPANY}.9", ids.agent_id("acme", "planner"), "a1", ("x-" * 32)[:63]]

#: Ids AWS would refuse (or that a name AWS accepts would no longer tell apart): each refused.
REFUSED = ["acme:eu", "a/b", "a b", "a.b.c", "é", "-lead", "_lead", "x" * 64, "", "a\n", "a+b", "a@b", "a=b", "a*"]
AGENT_REFUSED = [*REFUSED, ".a", "a.", "a..b", "a:b.c", "x" * 64 + ".y", "y." + "x" * 64]


def _settings() -> Settings:
    tables = {t.env_var: t.default_name for t in R.TABLES}
    return Settings.model_validate({**tables, R.RUN_DATA_BUCKET.env_var: "b", R.STAGE_ENV: "prod"})


def test_the_ids_are_what_the_models_accept() -> None:
    for company in COMPANIES:
        assert Company(id=company).id == company
    for room in ROOMS:
        assert Room(id=room, members=COMPANIES).id == room
    for agent in AGENTS:
        assert Agent(id=agent, company=LONGEST_COMPANY, provider="anthropic", model="m").id == agent
    assert len(LONGEST_AGENT) == 127


@pytest.mark.parametrize("provider", ProviderKind.__args__)  # type: ignore[attr-defined]
@pytest.mark.parametrize("company", COMPANIES)
def test_secret_names(company: str, provider: str) -> None:
    name = secret_name(_settings(), company, provider)
    assert SECRET_NAME.fullmatch(name), name
    assert not SECRET_RANDOM_SUFFIX.fullmatch(name), name
    assert name.split("/")[2] == company  # one company per secret: its id is one part


@pytest.mark.parametrize("agent", AGENTS)
def test_execution_names(agent: str) -> None:
    run_id = ids.execution_name(agent, ids.message_wake_id("m-" + "9" * 60))
    wakes = [
        ids.message_wake_id("m1"),
        ids.task_event_wake_id("tev-" + run_id + "-007"),
        ids.run_wake_id(run_id, "actions", LONGEST_AGENT),
    ]
    names = {ids.execution_name(agent, w) for w in wakes}
    assert len(names) == len(wakes)
    for name in names:
        assert EXECUTION_NAME.fullmatch(name), name


def _assert_s3_key(key: str) -> None:
    assert len(key.encode()) <= 1024, key
    assert S3_SAFE_KEY.fullmatch(key), key
    assert all(part not in ("", ".", "..") for part in key.split("/")), key


@pytest.mark.parametrize("room", ROOMS)
def test_s3_keys(room: str) -> None:
    file_id = new_file_id()
    key = upload_key(room, file_id)
    _assert_s3_key(key)
    assert parse_upload_key(key) == (room, file_id)
    _assert_s3_key(index_key(room, 99_999_999))
    for agent in AGENTS:
        run_id = ids.execution_name(agent, ids.run_wake_id("x", "reply", agent))
        for name in ("context", "reply"):
            _assert_s3_key(run_data_key(run_id, name))


def test_metric_dimension_values() -> None:
    for value in [*COMPANIES, *ROOMS, *AGENTS]:
        assert len(value) <= 1024 and DIMENSION_VALUE.fullmatch(value), value


def _accepted(model: type[BaseModel], field: str) -> st.SearchStrategy[str]:
    """Any id the model's own schema says it accepts (its pattern and length)."""
    schema = model.model_json_schema()["properties"][field]
    return st.from_regex(schema["pattern"], fullmatch=True).filter(lambda v: len(v) <= schema["maxLength"])


@settings(max_examples=300, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(
    company=_accepted(Company, "id"),
    room=_accepted(Room, "id"),
    agent=_accepted(Agent, "id"),
    provider=st.sampled_from(ProviderKind.__args__),  # type: ignore[attr-defined]
)
def test_any_id_the_models_accept_makes_names_aws_accepts(company: str, room: str, agent: str, provider: str) -> None:
    """Not only the ids above: whatever the models' schemas allow (what the API documents)."""
    Agent(id=agent, company=company, provider="anthropic", model="m")
    Room(id=room, members=[company])
    name = secret_name(_settings(), company, provider)
    assert SECRET_NAME.fullmatch(name) and not SECRET_RANDOM_SUFFIX.fullmatch(name), name
    run_id = ids.execution_name(agent, ids.run_wake_id("x", "reply", agent))
    assert EXECUTION_NAME.fullmatch(run_id), run_id
    for key in (upload_key(room, new_file_id()), index_key(room, 1), run_data_key(run_id, "context")):
        _assert_s3_key(key)
    for value in (company, room, agent):
        assert len(value) <= 1024 and DIMENSION_VALUE.fullmatch(value), value


@pytest.mark.parametrize("bad", REFUSED)
def test_other_ids_are_refused_saying_what_is_allowed(bad: str) -> None:
    for adapter in (TypeAdapter(CompanyId), TypeAdapter(RoomId)):
        with pytest.raises(ValidationError, match=re.escape(ID_RULE)):
            adapter.validate_python(bad)
    with pytest.raises(ValidationError, match=re.escape(ID_RULE)):
        CompanyIn(id=bad)
    with pytest.raises(ValidationError, match=re.escape(ID_RULE)):
        AgentIn(name=bad, provider="anthropic", model="m")
    for body in (MemberIn, RoomIn):
        with pytest.raises(ValidationError):
            body.model_validate({"company": bad} if body is MemberIn else {"members": [bad]})


@pytest.mark.parametrize("bad", AGENT_REFUSED)
def test_agent_ids_with_anything_else_are_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(ID_RULE)):
        TypeAdapter(AgentId).validate_python(bad)
    with pytest.raises(ValidationError):
        RoomAgentIn(agent=bad)
    with pytest.raises(ValidationError):
        MessageIn(text="hi", to=[bad])
