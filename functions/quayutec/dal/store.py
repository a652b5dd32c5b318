"""The room table's store (single-table design, its stream is the wake outbox; design §3): one
class of the aggregates' stores, each in its own module. Keys (every one built in
:mod:`quayutec.dal.keys`) and indexes: design §14 (no local secondary index, so no item
collection is capped at 10 GB).

Item layout (pk / sk):

* ``COMPANY#{id}`` / ``META`` — a company, its people and rights policy; ``BUDGET`` its budget;
  ``ROOM#{room}`` a room it is a member of, ``AGENT#{agent}`` an agent it owns (its indexes)
* ``AGENT#{id}`` / ``META`` — an always-on agent's configuration (no key: keys live in Secrets Manager)
* ``ROOM#{id}`` / ``META`` — a room, its ``agents`` map (agent → company, so a run reads the room
  and its agents in one item) and its ``memory`` map (which memory partitions hold lines:
  ``room``, ``company#{c}``, so a run queries only those); ``MEMBER#{company}``,
  ``AGENT#{agent}`` and ``NAME#agent#{name}`` its members, its agents and their names
* ``ROOM#{id}#MSG`` / ``MSG#{msg}`` — a message, in a partition of the room's messages alone
  (keyed by its id: the put's condition makes a repeat a no-op; GSI ``by_time``: ``gsi2pk`` =
  its pk, ``gsi2sk`` = ``{created_at}#{msg}``)
* ``ROOM#{id}`` / ``TASK#{task}`` — a task (GSI ``open_tasks``: ``OPEN#{room}#{assignee}`` /
  ``{created_at}#{task}`` while open — a sparse index; a room's task list is the ``TASK#``
  range, put in creation order when read; GSI ``changes``: ``CHANGES#{room}#tasks`` /
  ``{changed_at}#{task}``, moved by every event)
* ``ROOM#{id}`` / ``TEV#{task}#{event}`` — a task event (created / update / close)
* ``ROOM#{id}`` / ``APPROVAL#{run}#{index}`` — an approval request (GSI ``approvals_by_company``:
  ``APPROVALS#{room}#{company}`` / ``{created_at}#{run}#{index}``; GSI ``changes``:
  ``CHANGES#{room}#approvals#{company}`` / ``{changed_at}#{run}:{index}``)
* ``ROOM#{id}`` / ``OUTBOX#{id}`` — the wakes of a run's action writes
* ``ROOM#{id}#MEM#room`` and ``ROOM#{id}#MEM#company#{c}`` / ``MEM#{id}`` — memory lines (GSI
  ``by_time``: ``gsi2pk`` = their pk, ``gsi2sk`` = ``{created_at}#{id}``)
* ``ROOM#{id}#FILES`` / ``FILE#{file}`` and ``INDEX`` — room files and the index pointer
  (:mod:`quayutec.dal.files`; a file's GSI ``changes``: ``CHANGES#{room}#files`` /
  ``{changed_at}#{file}``)

Any item may carry ``wakes`` (a list of :class:`~quayutec.models.Wake` dicts): the stream
dispatcher sends them to the wake queue when the item is inserted, so a write and its wakes are
one atomic write. Every write here is a conditional put keyed by the caller's deterministic id.
"""

from __future__ import annotations

from quayutec.dal.agents import AgentRecords
from quayutec.dal.approvals import ApprovalRecords
from quayutec.dal.audit import AuditRecords
from quayutec.dal.companies import CompanyRecords
from quayutec.dal.memory import MemoryRecords
from quayutec.dal.messages import MessageRecords
from quayutec.dal.rooms import RoomRecords
from quayutec.dal.tasks import TaskRecords


class RoomStore(
    AuditRecords, CompanyRecords, AgentRecords, RoomRecords, MessageRecords, TaskRecords, MemoryRecords, ApprovalRecords
):
    """Reads and conditional writes of the room table, by aggregate: companies
    (:mod:`~quayutec.dal.companies`), agents (:mod:`~quayutec.dal.agents`), rooms and placement
    (:mod:`~quayutec.dal.rooms`), messages (:mod:`~quayutec.dal.messages`), tasks
    (:mod:`~quayutec.dal.tasks`), memory (:mod:`~quayutec.dal.memory`) and approvals
    (:mod:`~quayutec.dal.approvals`). ``client``: a DynamoDB client taking Python values
    (defaults to :func:`quayutec.dal.aws.dynamodb`)."""
