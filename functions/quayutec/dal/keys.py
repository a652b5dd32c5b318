"""Every key of the room table, in one place: its partition and sort keys and the keys of its
global secondary indexes (``open_tasks``: gsi1, ``by_time``: gsi2, ``approvals_by_company``:
gsi3, ``changes``: gsi4), docs/design.md §14; and, at the end, the ledger table's (its items:
:mod:`quayutec.dal.ledger`). The stores build their items and queries from these functions only.

Partitions (pk / sk):

* ``COMPANY#{id}`` / ``META`` — a company, its people and rights policy; ``BUDGET`` its budget;
  ``ROOM#{room}`` a room it is a member of; ``AGENT#{agent}`` an agent it owns
* ``AGENT#{id}`` / ``META`` — an always-on agent's configuration
* ``ROOM#{id}`` / ``META`` — a room; ``MEMBER#{company}``, ``AGENT#{agent}`` and
  ``NAME#agent#{name}`` its members, agents and agent names; ``TASK#{task}``,
  ``TEV#{task}#{event}``, ``APPROVAL#{run}#{index:03d}`` and ``OUTBOX#{id}``; a task is on
  ``by_time`` as ``ROOM#{id}#TASKS`` / ``{created_at}#{task}``
* ``ROOM#{id}#MSG`` / ``MSG#{msg}`` — a message
* ``ROOM#{id}#MEM#room`` and ``ROOM#{id}#MEM#company#{c}`` / ``MEM#{id}`` — memory lines
* ``ROOM#{id}#FILES`` / ``FILE#{file}`` and ``INDEX`` — room files (:mod:`quayutec.dal.files`)
* ``TOKEN#{hash}`` / ``META`` — a bearer token; ``COMPANY#{c}`` / ``TOKEN#{id}`` its company's index
  entry (:mod:`quayutec.dal.auth`)
"""

from __future__ import annotations

from quayutec.logic.ids import agent_name, name_key

#: The sort key of an entity's own item (a company, an agent, a room).
META = "META"

#: The key and index attributes of a room-table item (its table key and every GSI key): never
#: part of what the item says.
KEY_ATTRS = frozenset({"pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk", "gsi3pk", "gsi3sk", "gsi4pk", "gsi4sk"})
#: The attributes of a message's key on the ``by_time`` GSI (a page cursor holds them).
MESSAGE_KEY = ("pk", "sk", "gsi2pk", "gsi2sk")

# Sort-key prefixes (the ``begins_with`` of a range query).
ROOM_PREFIX = "ROOM#"
INVITE_PREFIX = "INVITE#"
AGENT_PREFIX = "AGENT#"
TASK_PREFIX = "TASK#"
MESSAGE_PREFIX = "MSG#"
APPROVAL_PREFIX = "APPROVAL#"
FILE_PREFIX = "FILE#"


# ------------------------------------------------------------------ companies
def company_pk(company_id: str) -> str:
    return f"COMPANY#{company_id}"


def company_key(company_id: str) -> dict[str, str]:
    """The key of a company's item."""
    return {"pk": company_pk(company_id), "sk": META}


def budget_key(company_id: str) -> dict[str, str]:
    """The key of a company's budget item (design §12.4)."""
    return {"pk": company_pk(company_id), "sk": "BUDGET"}


def company_room_key(company_id: str, room_id: str) -> dict[str, str]:
    """The company's index entry of a room it is a member of."""
    return {"pk": company_pk(company_id), "sk": f"{ROOM_PREFIX}{room_id}"}


def company_agent_key(company_id: str, agent_id: str) -> dict[str, str]:
    """The company's index entry of an agent it owns."""
    return {"pk": company_pk(company_id), "sk": f"{AGENT_PREFIX}{agent_id}"}


# ------------------------------------------------------------------ agents
def agent_key(agent_id: str) -> dict[str, str]:
    """The key of an agent's item."""
    return {"pk": f"AGENT#{agent_id}", "sk": META}


# ------------------------------------------------------------------ rooms
def room_pk(room_id: str) -> str:
    return f"ROOM#{room_id}"


def room_key(room_id: str) -> dict[str, str]:
    """The key of a room's item (its ``agents`` and ``memory`` maps)."""
    return {"pk": room_pk(room_id), "sk": META}


def member_key(room_id: str, company_id: str) -> dict[str, str]:
    return {"pk": room_pk(room_id), "sk": f"MEMBER#{company_id}"}


def invitation_key(room_id: str, company_id: str) -> dict[str, str]:
    """A company's pending invitation to a room (design §5): who invited it, when."""
    return {"pk": room_pk(room_id), "sk": f"{INVITE_PREFIX}{company_id}"}


def company_invitation_key(company_id: str, room_id: str) -> dict[str, str]:
    """The company's index entry of a pending invitation (its ``GET`` list of invitations)."""
    return {"pk": company_pk(company_id), "sk": f"{INVITE_PREFIX}{room_id}"}


def room_agent_key(room_id: str, agent_id: str) -> dict[str, str]:
    """The link of an agent placed in a room."""
    return {"pk": room_pk(room_id), "sk": f"{AGENT_PREFIX}{agent_id}"}


def company_agent_name_key(company_id: str, name: str) -> dict[str, str]:
    """The company's holder of an agent name (letter case aside: one agent per name in a
    company, written in the agent's create transaction, kept after its delete: a name is never
    given to another agent)."""
    return {"pk": company_pk(company_id), "sk": agent_name_sk(name)}


def room_agent_name_key(room_id: str, name: str) -> dict[str, str]:
    """The room's holder of an agent name (letter case aside: one agent per name in a room)."""
    return {"pk": room_pk(room_id), "sk": agent_name_sk(name)}


def agent_name_sk(name: str) -> str:
    """The sort key of a holder of an agent name, in a company's partition or a room's."""
    return f"NAME#agent#{name_key(name)}"


def room_ref_key(room_id: str, ref: str) -> dict[str, str]:
    """The item that answers for an agent ref in a room: its link (a full id, ``acme.planner``)
    or the room's holder of its name (``Planner``)."""
    return room_agent_key(room_id, ref) if "." in ref else room_agent_name_key(room_id, ref)


def agent_name_key(room_id: str, agent_id: str) -> dict[str, str]:
    """The room's name item of agent ``agent_id``."""
    return room_agent_name_key(room_id, agent_name(agent_id))


def outbox_key(room_id: str, outbox_id: str) -> dict[str, str]:
    return {"pk": room_pk(room_id), "sk": f"OUTBOX#{outbox_id}"}


# ------------------------------------------------------------------ by_time (gsi2)
def time_sk(created_at: str, item_id: str) -> str:
    """An item's sort key on the ``by_time`` GSI: time order, ties by id (design §14)."""
    return f"{created_at}#{item_id}"


# ------------------------------------------------------------------ changes (gsi4; the ledger's run_changes)
#: The kinds of change a room's changes feed reads from a ``changes`` partition of their own
#: (messages come from ``by_time``), design §9, §14.
CHANGE_KINDS = ("tasks", "approvals", "files", "runs")


def changes_pk(room_id: str, kind: str, company: str | None = None) -> str:
    """The partition of a room's ``changes`` index (``gsi4pk`` on the room table, ``chg_pk`` on
    the ledger's ``run_changes``) for ``kind`` (:data:`CHANGE_KINDS`): room-wide for tasks and
    files, a company's own for its approvals and runs (design §14)."""
    return f"CHANGES#{room_id}#{kind}" + (f"#{company}" if company else "")


def change_sk(changed_at: str, item_id: str) -> str:
    """An item's sort key on the changes indexes: the time of its last change, ties by id; moved
    by every write that changes the item, so a range past a cursor holds what changed since."""
    return f"{changed_at}#{item_id}"


# ------------------------------------------------------------------ messages
def message_pk(room_id: str) -> str:
    """The partition of a room's messages, apart from its tasks, approvals and members
    (design §14)."""
    return f"ROOM#{room_id}#MSG"


def message_key(room_id: str, message_id: str) -> dict[str, str]:
    """By id alone: the put's condition stops a repeat."""
    return {"pk": message_pk(room_id), "sk": f"{MESSAGE_PREFIX}{message_id}"}


# ------------------------------------------------------------------ tasks
def task_key(room_id: str, task_id: str) -> dict[str, str]:
    return {"pk": room_pk(room_id), "sk": f"{TASK_PREFIX}{task_id}"}


def tasks_by_time_pk(room_id: str) -> str:
    """The ``by_time`` GSI partition (``gsi2pk``) of a room's tasks, in creation order (sort key
    :func:`time_sk`): a page of them is one bounded query (design §14)."""
    return f"ROOM#{room_id}#TASKS"


def task_event_prefix(task_id: str) -> str:
    return f"TEV#{task_id}#"


def task_event_key(room_id: str, task_id: str, event_id: str) -> dict[str, str]:
    return {"pk": room_pk(room_id), "sk": f"{task_event_prefix(task_id)}{event_id}"}


def open_tasks_pk(room_id: str, agent_id: str) -> str:
    """The ``open_tasks`` GSI partition (``gsi1pk``) of an agent's open tasks in a room: sparse,
    set while a task is open."""
    return f"OPEN#{room_id}#{agent_id}"


# ------------------------------------------------------------------ memory
def memory_partition(visibility: str, company: str) -> str:
    """A memory partition's name in the room item's ``memory`` map: ``room`` for room-wide lines,
    ``company#{company}`` for a company's own."""
    return "room" if visibility == "room" else f"company#{company}"


def memory_pk(room_id: str, visibility: str, company: str) -> str:
    return f"ROOM#{room_id}#MEM#{memory_partition(visibility, company)}"


def memory_key(room_id: str, visibility: str, company: str, line_id: str) -> dict[str, str]:
    """By id alone: the put's condition stops a repeat."""
    return {"pk": memory_pk(room_id, visibility, company), "sk": f"MEM#{line_id}"}


# ------------------------------------------------------------------ approvals
def approval_prefix(run_id: str) -> str:
    return f"{APPROVAL_PREFIX}{run_id}#"


def approval_key(room_id: str, run_id: str, index: int) -> dict[str, str]:
    return {"pk": room_pk(room_id), "sk": f"{approval_prefix(run_id)}{index:03d}"}


def approvals_pk(room_id: str, company: str) -> str:
    """The ``approvals_by_company`` GSI partition (``gsi3pk``) of a company's approvals in a room."""
    return f"APPROVALS#{room_id}#{company}"


def approvals_sk(created_at: str, run_id: str, index: int) -> str:
    return f"{created_at}#{run_id}#{index:03d}"


# ------------------------------------------------------------------ files (quayutec.dal.files)
def files_pk(room_id: str) -> str:
    return f"ROOM#{room_id}#FILES"


def file_key(room_id: str, file_id: str) -> dict[str, str]:
    return {"pk": files_pk(room_id), "sk": f"{FILE_PREFIX}{file_id}"}


def file_gone_key(room_id: str, file_id: str) -> dict[str, str]:
    """A deleted file's tombstone, next to the file records (``GONE#``: no ``FILE#`` listing
    reads it): it holds the file's place in the room's changes feed (design §9, §14)."""
    return {"pk": files_pk(room_id), "sk": f"GONE#{file_id}"}


def index_pointer_key(room_id: str) -> dict[str, str]:
    """The room's retrieval index pointer (its version and object key)."""
    return {"pk": files_pk(room_id), "sk": "INDEX"}


# ------------------------------------------------------------------ tokens (quayutec.dal.auth)
AUDIT_PREFIX = "AUDIT#"


def audit_key(company_id: str, at: str, audit_id: str) -> dict[str, str]:
    """An entry of a company's audit trail (design §5): in the company's partition, time-ordered."""
    return {"pk": company_pk(company_id), "sk": f"{AUDIT_PREFIX}{at}#{audit_id}"}


TOKEN_PREFIX = "TOKEN#"


def token_key(digest: str) -> dict[str, str]:
    """A bearer token's item, by the hash of the token."""
    return {"pk": f"{TOKEN_PREFIX}{digest}", "sk": META}


def company_token_key(bucket: str, token_id: str) -> dict[str, str]:
    """A token's entry in its company's index (``bucket``: the company, or the operators')."""
    return {"pk": company_pk(bucket), "sk": f"{TOKEN_PREFIX}{token_id}"}


# ------------------------------------------------------------------ the ledger table (quayutec.dal.ledger)
def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def run_key(run_id: str) -> dict[str, str]:
    """A run's entry."""
    return {"pk": run_pk(run_id), "sk": "RUN"}


REQUEST_PREFIX = "REQ#"
ACTION_PREFIX = "ACT#"


def request_key(run_id: str, n: int) -> dict[str, str]:
    """Model request ``n`` of a run."""
    return {"pk": run_pk(run_id), "sk": f"{REQUEST_PREFIX}{n}"}


def action_key(run_id: str, index: int) -> dict[str, str]:
    """Declared action ``index`` of a run."""
    return {"pk": run_pk(run_id), "sk": f"{ACTION_PREFIX}{index:03d}"}


def delivery_key(agent_id: str, wake_id: str) -> dict[str, str]:
    """A wake's repeated deliveries."""
    return {"pk": f"WAKE#{agent_id}#{wake_id}", "sk": "DELIVERY"}


def not_started_key(agent_id: str, wake_id: str) -> dict[str, str]:
    """A wake the claim refused, and why."""
    return {"pk": f"WAKE#{agent_id}#{wake_id}", "sk": "NOT_STARTED"}


def runs_by_room_pk(room_id: str) -> str:
    """The ``runs_by_room`` GSI partition (``gsi1pk``) of a room's runs."""
    return f"ROOM#{room_id}"


def not_started_by_room_pk(room_id: str) -> str:
    """The ``runs_by_room`` GSI partition (``gsi1pk``) of a room's refused wakes."""
    return f"NOT_STARTED#{room_id}"


#: The ledger's ``live_by_room`` index (design §9, §14): what every member of a room may know is
#: going on in it, in one partition per room. A run without a final status carries
#: ``live_room`` = its room and ``live_sk`` = ``~run#{started_at}#{run}`` (the final write
#: removes both); a refused wake, ``live_sk`` = ``{at}#{agent}#{wake}``. ``~`` sorts after every
#: ISO-8601 time, so one range ``live_sk > {time}`` holds the refusals since then and then every
#: run in flight.
LIVE_ATTRS = ("live_room", "live_sk")
LIVE_RUN_PREFIX = "~run#"


def live_run_attrs(room_id: str, started_at: str, run_id: str) -> dict[str, str]:
    """A run in flight's keys on ``live_by_room``."""
    return {"live_room": room_id, "live_sk": f"{LIVE_RUN_PREFIX}{started_at}#{run_id}"}


def live_refusal_attrs(room_id: str, at: str, agent_id: str, wake_id: str) -> dict[str, str]:
    """A refused wake's keys on ``live_by_room`` (``at``: when the claim refused it)."""
    return {"live_room": room_id, "live_sk": f"{at}#{agent_id}#{wake_id}"}


def by_company_sk(company: str, at: str, item_id: str) -> str:
    """A run's (or a refused wake's) sort key on ``runs_by_room``: the company first, so its
    items of a room are one key range, newest last (design §14)."""
    return f"{company}#{at}#{item_id}"


def spend_key(company: str, period: str) -> dict[str, str]:
    """The key of ``company``'s spend counter for ``period`` (``D#…`` / ``M#…``, design §12.4)."""
    return {"pk": f"SPEND#{company}", "sk": period}


def chain_key(room_id: str, chain_id: str) -> dict[str, str]:
    """The key of a chain's counter item in the ledger table (design §12.1)."""
    return {"pk": f"CHAIN#{room_id}#{chain_id}", "sk": "CHAIN"}


#: Fair turns (design §12.3): a company's turns partition in the ledger table holds its counter
#: (``TURNS``: ``active``, ``waiting``, ``cap``), one ``HOLD#{run}`` per run holding a turn and one
#: ``WAIT#{arrival}#{run}`` per run waiting for one, oldest first.
TURNS_SK = "TURNS"
HOLD_PREFIX = "HOLD#"
WAIT_PREFIX = "WAIT#"


def turns_pk(company: str) -> str:
    return f"TURNS#{company}"


def turns_key(company: str) -> dict[str, str]:
    """The key of ``company``'s turns counter (design §12.3)."""
    return {"pk": turns_pk(company), "sk": TURNS_SK}


def hold_key(company: str, run_id: str) -> dict[str, str]:
    """The key of run ``run_id``'s turn of ``company`` (design §12.3)."""
    return {"pk": turns_pk(company), "sk": f"{HOLD_PREFIX}{run_id}"}


def wait_key(company: str, arrival: str, run_id: str) -> dict[str, str]:
    """The key of run ``run_id``'s place in ``company``'s line, by ``arrival`` (design §12.3)."""
    return {"pk": turns_pk(company), "sk": f"{WAIT_PREFIX}{arrival}#{run_id}"}
