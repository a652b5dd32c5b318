"""The claim table and the run ledger (design §2.1, §2.8).

Ledger item layout (pk / sk), in its own table apart from the room table:

* ``RUN#{run}`` / ``RUN`` — the run: wake, status, times, reply id, error, what was not done
  (GSI ``runs_by_room``: ``ROOM#{room}`` / ``{company}#{started_at}#{run}``, so a company's
  runs in a room are one key range: design §14; GSI ``run_changes``:
  ``CHANGES#{room}#runs#{company}`` / ``{changed_at}#{run}``, moved by every update: the room's
  changes feed, design §9)
* ``RUN#{run}`` / ``REQ#{n}`` — model request n (recorded *before* it is sent: the cap counts these);
  its outcome write carries the stored reply (``reply``: its JSON text, a string, so whatever
  the model wrote — numbers DynamoDB cannot hold, empty keys — is stored as it came and the
  item's size is the text's; or ``reply_at = "run-data"`` when it was too large for an item and
  went to the run-data bucket)
* ``RUN#{run}`` / ``ACT#{index:03d}`` — a declared action, its decision and outcome
* ``WAKE#{agent}#{wake}`` / ``DELIVERY`` — the wake's repeated deliveries and how each ended (a
  first delivery writes nothing)
* ``WAKE#{agent}#{wake}`` / ``NOT_STARTED`` — a wake the claim refused and why (written with the
  refusal, in one transaction; GSI ``runs_by_room``: ``NOT_STARTED#{room}`` /
  ``{company}#{at}#{wake}``)
* ``SPEND#{company}`` / ``D#{yyyy-mm-dd}`` and ``M#{yyyy-mm}`` — a company's spend counters per
  UTC day and month (design §12.4): ``committed_usd`` (micro-USD) and ``committed_tokens`` (models
  without a price), of which ``reserved_*`` are reserves of requests not yet settled, and per
  agent (``agent_usd:{agent}``, ``agent_tokens:{agent}``) and per model (``model_usd:{model}``,
  ``model_tokens:{model}``); each request's reserve is added in the transaction that records it,
  and settled to its reported usage by its outcome's, once
* ``CHAIN#{room}#{chain}`` / ``CHAIN`` — a chain of wakes: ``runs`` it started (counted by each
  claim, in the claim's transaction) and, once a person stopped it, ``stopped_at``/``stopped_by``
  (design §12.1, §12.2)

Active runs (design §12.2): a run entry without a final status carries ``active_agent`` (its agent)
and ``active_chain`` (``{room}#{chain}``), the partition keys of the sparse GSIs
``active_by_agent`` and ``active_by_chain`` (sort key ``started_at``); the final write removes
them, so each index holds the runs a pause or a chain's stop has to reach.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from quayutec import spans as phase_spans
from quayutec.dal import keys
from quayutec.dal.aws import (
    Guard,
    dynamodb,
    is_condition_failure,
    paginate_query,
    plain_item,
    put_guarded,
    put_new,
    transact_refusals,
    transient_errors,
    update_if,
)
from quayutec.dal.keys import by_company_sk, chain_key, spend_key
from quayutec.dal.pages import KeySpec, Page, Rows, decode_cursor, query_rows
from quayutec.errors import RunStopped, TransientError
from quayutec.models import (
    FINAL_STATUSES,
    ActionRecord,
    ModelRequestRecord,
    NotStartedRecord,
    RunRecord,
    now_iso,
)
from quayutec.resources import ACTIVE_RUN_FIELDS

_FINAL = sorted(FINAL_STATUSES)
#: A reply's JSON text up to this size rides on its request's ledger item (a DynamoDB item holds
#: 400 KB, attribute names and the request's other fields included; a string's size is its
#: UTF-8 length: DynamoDB developer guide, item sizes).
MAX_INLINE_REPLY_BYTES = 380_000
#: ``reply_at`` of a request whose reply was too large for its item: stored in run data.
REPLY_IN_RUN_DATA = "run-data"
#: The key of a ``runs_by_room`` item (a page cursor's key): the table's and the index's.
RUNS_BY_ROOM_KEY = ("pk", "sk", "gsi1pk", "gsi1sk")


def _plain(value: Any) -> Any:
    """DynamoDB values back to JSON-ish Python (Decimal → int/float)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _dec(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: _dec(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dec(v) for v in value]
    return value


def _request_item(run_id: str, req: ModelRequestRecord) -> dict[str, Any]:
    """The ledger item of model request ``req.n`` of run ``run_id``: pending, or with its outcome."""
    return _dec({**keys.request_key(run_id, req.n), **req.model_dump(mode="json", exclude_none=True)})


@dataclass(frozen=True)
class SpendCount:
    """One request's count in its company's spend counters: ``unit`` ``usd`` (micro-USD) or
    ``tokens``; ``amount`` added to the company's, the agent's, the model's and the room's
    (``room_{unit}:{room}``, when ``room_id`` is set) counters and, as a reserve, to
    ``reserved_*`` (``reserved`` negative: a settlement takes it off again); ``checks``:
    ``(attribute, most it may hold before)`` per limit, on that period's item."""

    company: str
    agent_id: str
    model: str
    period: str
    unit: str
    amount: int
    reserved: int
    checks: tuple[tuple[str, int], ...] = ()
    room_id: str = ""

    def entry(self, table: str) -> dict[str, Any]:
        names = {
            "#c": f"committed_{self.unit}",
            "#r": f"reserved_{self.unit}",
            "#a": f"agent_{self.unit}:{self.agent_id}",
            "#m": f"model_{self.unit}:{self.model}",
        }
        values: dict[str, Any] = {":n": self.amount, ":r": self.reserved, ":co": self.company}
        room = ""
        if self.room_id:  # the room's spend (design §12.4): what GET /rooms/{room}/cost reads
            names["#o"] = f"room_{self.unit}:{self.room_id}"
            room = ", #o :n"
        update: dict[str, Any] = {
            "TableName": table,
            "Key": spend_key(self.company, self.period),
            "UpdateExpression": f"ADD #c :n, #r :r, #a :n, #m :n{room} SET company = :co",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        if self.checks:
            parts = []
            for i, (attr, most) in enumerate(self.checks):
                names[f"#k{i}"], values[f":k{i}"] = attr, most
                parts.append(f"(attribute_not_exists(#k{i}) OR #k{i} <= :k{i})")
            update["ConditionExpression"] = " AND ".join(parts)
            update["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return {"Update": update}


class BudgetRefused(Exception):
    """The request's reserve would pass a budget: nothing was recorded. ``counters``: the spend
    counter items (plain values) whose condition failed, by period sort key."""

    def __init__(self, counters: dict[str, dict[str, Any]]) -> None:
        super().__init__("a budget's condition failed")
        self.counters = counters


class ClaimOutcome:
    CLAIMED = "claimed"  # this execution made the claim now
    OWN = "own"  # the claim already belongs to this execution (a retried Claim step)
    OTHER = "other"  # another execution holds the claim: do nothing
    REFUSED = "refused"  # claimed by this execution as not started (Claim.not_started says why)


@dataclass(frozen=True)
class Claim:
    """What a claim found: a :class:`ClaimOutcome` value, and for ``REFUSED`` why the wake
    starts no run (``chain_full``, ``chain_stopped``, ``wake_from``: models.NotStartedReason)."""

    outcome: str
    not_started: str | None = None
    #: ``REFUSED``: whether the claim item records the refusal already (``False``: the caller
    #: records it with :meth:`LedgerStore.refuse`, after what must come first).
    recorded: bool = True


@dataclass(frozen=True)
class ActiveRun:
    """A run as the active-runs indexes hold it (``resources.ACTIVE_RUN_FIELDS``)."""

    run_id: str
    room_id: str
    agent_id: str
    chain_id: str
    status: str


#: The sparse GSIs of the runs without a final status (design §12.2), by agent and by chain.
ACTIVE_BY_AGENT = "active_by_agent"
ACTIVE_BY_CHAIN = "active_by_chain"
#: The sparse GSI of a room's runs in flight and refused wakes (design §9, keys.LIVE_ATTRS).
LIVE_BY_ROOM = "live_by_room"
#: Items of ``live_by_room`` one read takes at most: more runs in flight than a room has agents
#: (each agent runs one wake at a time, design §12.3), and the refusals of a poll's interval.
LIVE_READ_LIMIT = 100
#: The attributes the final write removes (the active-runs indexes' partition keys).
_ACTIVE_KEYS = ("active_agent", "active_chain", *keys.LIVE_ATTRS)


def pause_condition(pauses: int) -> tuple[str, dict[str, Any]]:
    """The condition, with its values, that an agent item is not paused and was paused
    ``pauses`` times: what the claim saw (design §12.2). A run claimed before a pause fails it
    for good, also once the agent is resumed."""
    if pauses == 0:  # never paused: an agent item without the count holds it as 0
        return (
            "attribute_not_exists(paused_at) AND (attribute_not_exists(pauses) OR pauses = :pauses)",
            {":pauses": 0},
        )
    return "attribute_not_exists(paused_at) AND pauses = :pauses", {":pauses": pauses}


class LiveRefusal(NamedTuple):
    """A refused wake as ``live_by_room`` holds it (resources.LIVE_FIELDS)."""

    agent_id: str
    reason: str
    cause_kind: str
    cause_id: str


def _not_woken_update(message_item: tuple[str, dict[str, str]], agent_id: str, reason: str) -> dict[str, Any]:
    """The ``TransactWriteItems`` entry that adds ``{"agent", "why"}`` to an existing message's
    ``not_woken`` (design §9): in the refusal's transaction, so it is written once."""
    table, key = message_item
    return {
        "Update": {
            "TableName": table,
            "Key": key,
            "UpdateExpression": "SET not_woken = list_append(if_not_exists(not_woken, :none), :one)",
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeValues": {":none": [], ":one": [{"agent": agent_id, "why": reason}]},
        }
    }


def stop_guard(
    ledger_table: str,
    room_id: str,
    chain_id: str,
    agent_item: tuple[str, dict[str, str]],
    pauses: int,
    placement: tuple[str, dict[str, str]],
    placed: str | None = None,
) -> Guard:
    """A run's stop guard (design §12.2): ``ConditionCheck`` entries that hold while its chain is
    not stopped, its agent (``agent_item``: table and key) not paused since its claim
    (``pauses``: the pause count the claim saw) and still placed in the room (``placement``:
    table and key of its link item: taken out, or its company left the room, design §5). Each run
    write to the room carries them in its transaction, so none lands once a pause, a stop or a
    removal has been answered. ``placed``: the link's ``placement`` the claim read; then the
    link must still be that placement (an agent taken out and placed again is a new placement:
    the runs from before stay stopped, as after a pause and a quick resume)."""
    table, key = placement
    linked: dict[str, Any] = {"TableName": table, "Key": key, "ConditionExpression": "attribute_exists(pk)"}
    if placed is not None:
        linked |= {"ConditionExpression": "placement = :placed", "ExpressionAttributeValues": {":placed": placed}}
    return [
        {
            "ConditionCheck": {
                "TableName": ledger_table,
                "Key": chain_key(room_id, chain_id),
                "ConditionExpression": "attribute_not_exists(stopped_at)",
            }
        },
        pause_check(agent_item, pauses),
        {"ConditionCheck": linked},
    ]


def pause_check(agent_item: tuple[str, dict[str, str]], pauses: int) -> dict[str, Any]:
    """The ``ConditionCheck`` entry that the agent item (``agent_item``: its table and key)
    holds :func:`pause_condition` for ``pauses``: in the claim's transaction and in every stop
    guard."""
    table, key = agent_item
    condition, values = pause_condition(pauses)
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": key,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
    }


class LedgerStore:
    """Claim + ledger access. ``client``: a DynamoDB client taking Python values."""

    def __init__(self, ledger_table: str, claim_table: str, client: Any | None = None) -> None:
        self.table = ledger_table
        self.claim_table = claim_table
        self._client = client

    @property
    def db(self) -> Any:
        return self._client or dynamodb()

    # ------------------------------------------------------------------ claim
    def claim(
        self,
        run: RunRecord,
        execution_start: str,
        *,
        max_runs_per_chain: int,
        agent_item: tuple[str, dict[str, str]] | None = None,
        pauses: int = 0,
    ) -> Claim:
        """Claim ``(agent_id, wake_id)`` for ``run.execution_arn``, count the run in its chain and
        open its ledger entry, in one transaction (design §2.1, §12.1). The claim is never released.

        The claim item's own condition decides first: held by this execution (a retried Claim
        step; the transaction counted nothing) is ``OWN``, or ``REFUSED`` again when this
        execution recorded a refusal; held by another is ``OTHER``. Otherwise a chain that
        started ``max_runs_per_chain`` runs, or that a person stopped, or a paused agent, is
        ``REFUSED`` with ``recorded=False``: the caller records it with :meth:`refuse` (after a
        full chain's notice), so no retry or redelivery can ever run the wake. The holder and the
        chain's state come from the cancellation reasons (``ReturnValuesOnConditionCheckFailure:
        ALL_OLD``), no second read. ``agent_item``: ``(table, key)`` of the agent's item, checked
        in the same transaction not to be paused and paused ``pauses`` times, as the run's read
        found it (a pause answered before this claim refuses it, whatever that read found; the
        run's stop guard rests on that count: :func:`stop_guard`). Raises TransientError on throttling or a
        conflicting transaction (a hot chain counter), ClientError otherwise."""
        chain = run.wake.chain_id
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.claim_table,
                    "Item": self._claim_item(run, execution_start),
                    "ConditionExpression": "attribute_not_exists(agent_id)",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {
                "Put": {
                    "TableName": self.table,
                    "Item": self._run_item(run),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Update": {
                    "TableName": self.table,
                    "Key": chain_key(run.room_id, chain),
                    "UpdateExpression": "ADD runs :one SET room_id = :room, chain_id = :chain",
                    "ConditionExpression": "attribute_not_exists(stopped_at) "
                    "AND (attribute_not_exists(runs) OR runs < :max)",
                    "ExpressionAttributeValues": {
                        ":one": 1,
                        ":room": run.room_id,
                        ":chain": chain,
                        ":max": max_runs_per_chain,
                    },
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        ]
        if agent_item is not None:
            items.append(pause_check(agent_item, pauses))
        refusals = transact_refusals(self.db, items)
        if refusals is None:
            return Claim(ClaimOutcome.CLAIMED)
        held, _entry, counter = refusals[:3]
        if held is not None:
            return self._held(run, execution_start, held.item)
        if agent_item is not None and refusals[3] is not None:
            return Claim(ClaimOutcome.REFUSED, "paused", recorded=False)
        if counter is not None:
            stopped = counter.item is not None and "stopped_at" in counter.item
            return Claim(ClaimOutcome.REFUSED, "chain_stopped" if stopped else "chain_full", recorded=False)
        return Claim(ClaimOutcome.OTHER)  # a ledger entry without its claim: never this execution's

    def stop_chain(self, room_id: str, chain_id: str, by: str, at: str) -> str:
        """Mark a chain stopped (``by``: who, ``at``: ISO-8601): the claim refuses its wakes from
        now on (design §12.2). Returns ``"stopped"``, ``"already"`` (stopped before: the first stop
        stands) or ``"unknown"`` (no run of this room ever claimed in that chain). Raises
        TransientError on throttling."""
        try:
            with transient_errors():
                self.db.update_item(
                    TableName=self.table,
                    Key=chain_key(room_id, chain_id),
                    UpdateExpression="SET stopped_at = :at, stopped_by = :by",
                    ConditionExpression="attribute_exists(runs) AND attribute_not_exists(stopped_at)",
                    ExpressionAttributeValues={":at": at, ":by": by},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            return "stopped"
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise
            return "already" if plain_item(exc.response.get("Item")) else "unknown"

    def refuse(
        self,
        run: RunRecord,
        execution_start: str,
        reason: str,
        *,
        message_item: tuple[str, dict[str, str]] | None = None,
    ) -> Claim:
        """Claim ``(agent_id, wake_id)`` as not started (``reason``: models.NotStartedReason),
        with no run entry and nothing counted: the wake is done for good. The same transaction
        records why (:meth:`not_started_in_room` lists it: why an agent did not wake; the
        ``live_by_room`` index holds it for the room's changes, design §9) and, with
        ``message_item`` (``(table, key)`` of the message whose wake this is), adds
        ``{"agent", "why"}`` to that message's ``not_woken``. Another holder decides as in
        :meth:`claim`. Raises TransientError on throttling or a conflicting transaction,
        ClientError otherwise."""
        w = run.wake
        record = NotStartedRecord(
            agent_id=run.agent_id,
            company=run.company,
            room_id=run.room_id,
            wake_id=run.wake_id,
            chain_id=run.chain_id,
            reason=reason,
            at=run.started_at,
            by_kind=w.by_kind,
            by_company=w.by_company,
            cause_kind=w.cause_kind,
            cause_id=w.cause_id,
        )
        refusals = transact_refusals(
            self.db,
            [
                {
                    "Put": {
                        "TableName": self.claim_table,
                        "Item": {**self._claim_item(run, execution_start), "not_started": reason},
                        "ConditionExpression": "attribute_not_exists(agent_id)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": {
                            **keys.not_started_key(run.agent_id, run.wake_id),
                            "gsi1pk": keys.not_started_by_room_pk(run.room_id),
                            "gsi1sk": by_company_sk(run.company, run.started_at, run.wake_id),
                            **keys.live_refusal_attrs(run.room_id, run.started_at, run.agent_id, run.wake_id),
                            **record.model_dump(mode="json", exclude_none=True),
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
            + ([_not_woken_update(message_item, run.agent_id, reason)] if message_item else []),
        )
        if refusals is None:
            return Claim(ClaimOutcome.REFUSED, reason)
        held = refusals[0]
        if held is None and message_item is not None and refusals[-1] is not None:
            # the message is gone (never so for a wake's cause): the refusal stands without it
            return self.refuse(run, execution_start, reason)
        return self._held(run, execution_start, held.item if held is not None else None)

    def busy_agents(self, room_id: str) -> list[str]:
        """The agents of ``room_id`` with a run in flight (no final status), in id order: one
        bounded Query of the ``live_by_room`` index's run range (design §9; eventually
        consistent: a run claimed a moment ago may be missing, one just ended still listed).
        Raises TransientError on throttling."""
        with transient_errors():
            page = self.db.query(
                TableName=self.table,
                IndexName=LIVE_BY_ROOM,
                KeyConditionExpression="live_room = :r AND begins_with(live_sk, :run)",
                ExpressionAttributeValues={":r": room_id, ":run": keys.LIVE_RUN_PREFIX},
                Limit=LIVE_READ_LIMIT,
            )
        return sorted({str(i["agent_id"]) for i in page.get("Items", []) if i.get("sk") == "RUN"})

    def live_since(self, room_id: str, after: str) -> tuple[list[tuple[str, LiveRefusal]], list[str], bool]:
        """What the room's changes poll reads of ``live_by_room`` (design §9): one bounded Query
        of ``live_sk > after`` (an index sort key or an ISO-8601 time). Returns ``(refusals,
        busy, more)``: the wakes refused since ``after``, oldest first, each with its position;
        the agents with a run in flight (in id order); ``more``: the range held more than one
        read (the busy list may then be short: the next call, from the last position, reads on).
        Raises TransientError on throttling."""
        with transient_errors():
            page = self.db.query(
                TableName=self.table,
                IndexName=LIVE_BY_ROOM,
                KeyConditionExpression="live_room = :r AND live_sk > :after",
                ExpressionAttributeValues={":r": room_id, ":after": after},
                Limit=LIVE_READ_LIMIT,
            )
        refusals: list[tuple[str, LiveRefusal]] = []
        busy: set[str] = set()
        for item in page.get("Items", []):
            plain = _plain(item)
            if plain.get("sk") == "RUN":
                busy.add(str(plain["agent_id"]))
            elif plain.get("sk") == "NOT_STARTED":
                refusal = LiveRefusal(*(str(plain.get(f, "")) for f in LiveRefusal._fields))
                refusals.append((str(plain["live_sk"]), refusal))
        return refusals, sorted(busy), "LastEvaluatedKey" in page

    def not_started_in_room(
        self, room_id: str, company: str | None = None, limit: int | None = None
    ) -> list[NotStartedRecord]:
        """The wakes of ``room_id`` the claim refused (GSI ``runs_by_room``, partition
        ``NOT_STARTED#{room}``): of ``company``'s agents, newest first, at most ``limit``, reading
        only that company's records (design §14); ``company=None``: every company's, oldest first
        (the operator's view, tests). Raises TransientError on throttling."""
        items = self._by_room(keys.not_started_by_room_pk(room_id), company, limit)
        out = [NotStartedRecord.model_validate(_plain(i)) for i in items]
        return out if company is not None else sorted(out, key=lambda n: (n.at, n.wake_id))

    def _held(self, run: RunRecord, execution_start: str, holder: dict[str, Any] | None) -> Claim:
        """The outcome for a claim item that exists (``holder``: as the failed condition returned
        it: ``ALL_OLD`` returns the item whose ``attribute_not_exists`` failed, so it is never
        missing; were it, the claim is not taken for this execution's)."""
        ours = (
            holder is not None
            and holder.get("execution_arn") == run.execution_arn
            and holder.get("execution_start") == execution_start
        )
        if not ours or holder is None:
            return Claim(ClaimOutcome.OTHER)
        if holder.get("not_started"):
            return Claim(ClaimOutcome.REFUSED, str(holder["not_started"]))
        return Claim(ClaimOutcome.OWN)

    @staticmethod
    def _claim_item(run: RunRecord, execution_start: str) -> dict[str, Any]:
        return {
            "agent_id": run.agent_id,
            "wake_id": run.wake_id,
            "run_id": run.run_id,
            "execution_arn": run.execution_arn,
            "execution_start": execution_start,
            "claimed_at": run.started_at,
        }

    def get_claim(self, agent_id: str, wake_id: str) -> dict[str, Any] | None:
        with transient_errors():
            resp = self.db.get_item(
                TableName=self.claim_table, Key={"agent_id": agent_id, "wake_id": wake_id}, ConsistentRead=True
            )
        return resp.get("Item")

    # ------------------------------------------------------------------ run entry
    def _run_item(self, run: RunRecord) -> dict[str, Any]:
        return _dec(
            {
                **keys.run_key(run.run_id),
                "gsi1pk": keys.runs_by_room_pk(run.room_id),
                "gsi1sk": by_company_sk(run.company, run.started_at, run.run_id),
                # run_changes (design §14): moved by every update of the entry (_update_spec)
                "chg_pk": keys.changes_pk(run.room_id, "runs", run.company),
                "chg_sk": keys.change_sk(run.updated_at or run.started_at, run.run_id),
                **run.model_dump(mode="json", exclude_none=True),
                **(
                    {}
                    if run.status in FINAL_STATUSES
                    else {
                        "active_agent": run.agent_id,
                        "active_chain": f"{run.room_id}#{run.chain_id}",
                        **keys.live_run_attrs(run.room_id, run.started_at, run.run_id),
                    }
                ),
            }
        )

    def get_run(self, run_id: str) -> RunRecord | None:
        with transient_errors():
            item = self.db.get_item(TableName=self.table, Key=keys.run_key(run_id), ConsistentRead=True).get("Item")
        return RunRecord.model_validate(_plain(item)) if item else None

    def _update_spec(
        self, run_id: str, fields: dict[str, Any], only_if_not_final: bool, remove: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        # every change of a run entry moves its key on run_changes (the room's changes, design §14)
        fields = {**fields, "chg_sk": keys.change_sk(now_iso(), run_id)}
        names = {f"#f{i}": k for i, k in enumerate(fields)}
        values = {f":v{i}": _dec(v) for i, v in enumerate(fields.values())}
        expr = "SET " + ", ".join(f"#f{i} = :v{i}" for i in range(len(fields)))
        if remove:
            names.update({f"#r{i}": k for i, k in enumerate(remove)})
            expr += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(remove)))
        cond = "attribute_exists(pk)"
        if only_if_not_final:
            names["#st"] = "status"
            for i, status in enumerate(_FINAL):
                values[f":final{i}"] = status
            cond += " AND NOT #st IN (" + ", ".join(f":final{i}" for i in range(len(_FINAL))) + ")"
        return {
            "TableName": self.table,
            "Key": keys.run_key(run_id),
            "UpdateExpression": expr,
            "ConditionExpression": cond,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def start_turn(self, run_id: str, company: str, room_id: str, started_at: str, waited_s: float) -> bool:
        """A run's turn begins after its wait (design §12.3): ``started_at`` (and the runs-by-room
        sort key) becomes ``started_at``, ``waited_s`` the wait, ``waiting_since`` goes; once
        (``False``: it began before, nothing written)."""
        return update_if(
            self.db,
            TableName=self.table,
            Key=keys.run_key(run_id),
            UpdateExpression="SET started_at = :at, updated_at = :at, waited_s = :w, gsi1sk = :sk REMOVE waiting_since",
            ConditionExpression="attribute_exists(waiting_since)",
            ExpressionAttributeValues={
                ":at": started_at,
                ":w": _dec(round(waited_s, 3)),
                ":sk": by_company_sk(company, started_at, run_id),
            },
        )

    def update_run(self, run_id: str, fields: dict[str, Any], *, only_if_not_final: bool = True) -> bool:
        """Set fields on a run entry. With ``only_if_not_final`` (the default) nothing changes
        once the run has a final status; returns ``False`` then. A final ``status`` among the
        fields also takes the run out of the active-runs indexes."""
        remove = _ACTIVE_KEYS if fields.get("status") in FINAL_STATUSES else ()
        return update_if(self.db, **self._update_spec(run_id, fields, only_if_not_final, remove))

    @staticmethod
    def _final_fields(
        status: str,
        error_class: str | None,
        error_message: str | None,
        not_done: list[str] | None,
        reply_message_id: str | None,
        cost: dict[str, Any] | None,
        context: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        spans = phase_spans.so_far()  # before ended_at: the last span ends by the run's end
        fields: dict[str, Any] = {"status": status, "ended_at": now_iso(), "updated_at": now_iso()}
        if context:
            fields["context"] = context  # how the prompt was fitted (design §2.2): written once, here
        if reply_message_id:
            fields["reply_message_id"] = reply_message_id
        if cost:
            fields["cost"] = cost  # the run's cost line (design §10): written once, here
        if spans:
            fields["spans"] = spans  # its phases' spans (design §2.8), the writing phase's ending now
        if error_class:
            fields["error_class"] = error_class
        if error_message:
            fields["error_message"] = error_message[:2000]
        if not_done:
            fields["not_done"] = not_done
        return fields

    def finish_run(
        self,
        run_id: str,
        status: str,
        *,
        error_class: str | None = None,
        error_message: str | None = None,
        not_done: list[str] | None = None,
        reply_message_id: str | None = None,
        cost: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
    ) -> bool:
        """Give the run its final status, once: a final status is never overwritten. The reply's
        id (when it was posted) and how its prompt was fitted are recorded in this same write."""
        return self.update_run(
            run_id, self._final_fields(status, error_class, error_message, not_done, reply_message_id, cost, context)
        )

    def finish_run_item(
        self,
        run_id: str,
        status: str,
        *,
        reply_message_id: str | None = None,
        cost: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The final write of :meth:`finish_run` as a ``TransactWriteItems`` entry, to land in one
        transaction with the write it completes (a run's reply: design §2.5, §2.8). Its condition
        fails when the run has a final status already."""
        return {
            "Update": self._update_spec(
                run_id,
                self._final_fields(status, None, None, None, reply_message_id, cost, context),
                True,
                _ACTIVE_KEYS,
            )
        }

    def active_runs(self, *, agent_id: str | None = None, room_id: str = "", chain_id: str = "") -> list[ActiveRun]:
        """The runs without a final status of ``agent_id``, or else of the chain ``chain_id`` of
        ``room_id``, oldest first (the sparse active-runs GSIs, design §12.2). GSI reads are
        eventually consistent: a run claimed a moment ago may be missing, or one just ended
        still listed; its stop guard covers both. Raises TransientError on throttling."""
        index, attr, value = (
            (ACTIVE_BY_AGENT, "active_agent", agent_id)
            if agent_id is not None
            else (ACTIVE_BY_CHAIN, "active_chain", f"{room_id}#{chain_id}")
        )
        with transient_errors():
            items = list(
                paginate_query(
                    self.db.query,
                    TableName=self.table,
                    IndexName=index,
                    KeyConditionExpression="#k = :v",
                    ExpressionAttributeNames={"#k": attr},
                    ExpressionAttributeValues={":v": value},
                )
            )
        runs = [ActiveRun(**{f: str(i.get(f, "")) for f in ACTIVE_RUN_FIELDS}) for i in items if i.get("sk") == "RUN"]
        return [r for r in runs if r.status not in FINAL_STATUSES]

    def runs_in_room(
        self, room_id: str, company: str | None = None, limit: int | None = None, since: str | None = None
    ) -> list[RunRecord]:
        """The runs of ``room_id`` (GSI ``runs_by_room``, eventually consistent: a run claimed a
        moment ago may be missing, design §14). With ``company``: its agents' runs, newest first,
        at most ``limit`` (``None``: all), started at or after ``since`` (ISO-8601 UTC, as
        :func:`quayutec.models.iso` writes it), reading only that company's items, so a page
        fills exactly whatever the other companies ran. ``company=None``: every company's runs,
        oldest first (the operator's view: the scenario player, the chaos lab, tests). Raises
        TransientError on throttling."""
        items = self._by_room(keys.runs_by_room_pk(room_id), company, limit, since)
        runs = [RunRecord.model_validate(_plain(i)) for i in items]
        return runs if company is not None else sorted(runs, key=lambda r: (r.started_at, r.run_id))

    def runs_page(self, room_id: str, company: str, limit: int, cursor: str | None = None) -> Page:
        """One page of ``company``'s runs in ``room_id`` and of its wakes the claim refused, each
        newest first, at most ``limit`` of each, from ``cursor`` on (a cursor of this listing,
        room and company: InvalidInput otherwise). Each part is one bounded query of the
        company's key range on ``runs_by_room`` (design §14): the reads of a page do not grow
        with the room's history. Parts ``runs`` (:class:`RunRecord`) and ``not_started``
        (:class:`NotStartedRecord`). Raises TransientError on throttling."""
        specs = {
            "runs": KeySpec(
                {"gsi1pk": keys.runs_by_room_pk(room_id), "sk": "RUN"}, {"gsi1sk": f"{company}#", "pk": "RUN#"}
            ),
            "not_started": KeySpec(
                {"gsi1pk": keys.not_started_by_room_pk(room_id), "sk": "NOT_STARTED"},
                {"gsi1sk": f"{company}#", "pk": "WAKE#"},
            ),
        }
        at = decode_cursor(cursor, f"runs:{room_id}", specs)

        def part(pk: str, start: Any) -> Rows[dict[str, Any]]:
            query = {
                "TableName": self.table,
                "IndexName": "runs_by_room",
                "KeyConditionExpression": "gsi1pk = :pk AND gsi1sk BETWEEN :lo AND :hi",
                # "$" follows "#": the range is exactly the sort keys that begin with "{company}#"
                "ExpressionAttributeValues": {":pk": pk, ":lo": f"{company}#", ":hi": f"{company}$"},
                "ScanIndexForward": False,
            }
            return query_rows(self.db, query, limit, start, RUNS_BY_ROOM_KEY)

        runs = part(keys.runs_by_room_pk(room_id), at["runs"])
        refused = part(keys.not_started_by_room_pk(room_id), at["not_started"])
        return Page(
            f"runs:{room_id}",
            {
                "runs": runs.map(lambda i: RunRecord.model_validate(_plain(i))),
                "not_started": refused.map(lambda i: NotStartedRecord.model_validate(_plain(i))),
            },
        )

    def _by_room(
        self, pk: str, company: str | None, limit: int | None = None, since: str | None = None
    ) -> list[dict[str, Any]]:
        """Items of ``runs_by_room`` partition ``pk``: all of them (``company=None``), or
        ``company``'s key range (``{company}#…``: company ids hold no ``#``), newest first, up to
        ``limit``, from ``since`` on (``started_at`` is :func:`~quayutec.models.iso` text: fixed
        width, so it sorts as the time). Each page asks for what is still missing, so
        nothing past ``limit`` is read; a page DynamoDB cut short (1 MB) is read on."""
        kwargs: dict[str, Any] = {"TableName": self.table, "IndexName": "runs_by_room"}
        if company is None:
            kwargs["KeyConditionExpression"] = "gsi1pk = :pk"
            kwargs["ExpressionAttributeValues"] = {":pk": pk}
        else:
            low = f"{company}#{since or ''}"
            kwargs["KeyConditionExpression"] = "gsi1pk = :pk AND gsi1sk BETWEEN :lo AND :hi"
            # "$" follows "#": the range is exactly the sort keys that begin with "{company}#"
            kwargs["ExpressionAttributeValues"] = {":pk": pk, ":lo": low, ":hi": f"{company}$"}
            kwargs["ScanIndexForward"] = False
        items: list[dict[str, Any]] = []
        with transient_errors():
            while limit is None or len(items) < limit:
                if limit is not None:
                    kwargs["Limit"] = limit - len(items)
                page = self.db.query(**kwargs)
                items += page.get("Items", [])
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return items

    # ------------------------------------------------------------------ model requests
    def model_requests(self, run_id: str) -> list[ModelRequestRecord]:
        """The recorded model requests of a run (at most a handful: bounded)."""
        with transient_errors():
            items = self.db.query(
                TableName=self.table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                ExpressionAttributeValues={":pk": keys.run_pk(run_id), ":p": keys.REQUEST_PREFIX},
                ConsistentRead=True,
                Limit=20,
            ).get("Items", [])
        return sorted((ModelRequestRecord.model_validate(_plain(i)) for i in items), key=lambda r: r.n)

    def record_request(
        self,
        run_id: str,
        req: ModelRequestRecord,
        guard: Guard | None = None,
        spend: list[SpendCount] | None = None,
    ) -> bool:
        """Record request ``req.n`` before it is sent, with its reserve counted in its company's
        ``spend`` counters in the same transaction (design §12.4); ``False`` if that number exists
        already (nothing counted: the request item's own condition decides first). ``guard``:
        the run's stop guard (:func:`stop_guard`): a stopped run sends no request (raises
        RunStopped). Raises BudgetRefused when a budget's condition failed (nothing recorded),
        TransientError on throttling or a conflicting transaction (a busy counter)."""
        if not spend:
            return put_guarded(self.db, self.table, _request_item(run_id, req), guard)
        guard = guard or []
        put = {
            "Put": {
                "TableName": self.table,
                "Item": _request_item(run_id, req),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        refusals = transact_refusals(self.db, [put, *guard, *(c.entry(self.table) for c in spend)])
        if refusals is None:
            return True
        if refusals[0] is not None:
            return False
        if any(r is not None for r in refusals[1 : 1 + len(guard)]):
            raise RunStopped("the run's agent was paused or taken out of the room, or its chain stopped: no request")
        failed = refusals[1 + len(guard) :]
        raise BudgetRefused({c.period: (r.item or {}) for c, r in zip(spend, failed, strict=True) if r is not None})

    def spend_reads(
        self, company: str, periods: list[str], budget_item: tuple[str, dict[str, str]]
    ) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
        """``company``'s budget item (``budget_item``: its table and key; ``None`` when it set
        none) and its spend counter items of ``periods`` (plain values, by period; a period
        with no request yet is missing): one consistent BatchGetItem across both tables (design
        §12.4). Raises TransientError on throttling or keys left unprocessed."""
        table, key = budget_item
        request = {
            self.table: {"Keys": [spend_key(company, p) for p in periods], "ConsistentRead": True},
            table: {"Keys": [key], "ConsistentRead": True},
        }
        with transient_errors():
            resp = self.db.batch_get_item(RequestItems=request)
        if resp.get("UnprocessedKeys"):
            raise TransientError("spend counters not read (unprocessed keys): retry later")
        found = resp.get("Responses", {})
        budget = next(iter(found.get(table, [])), None)
        counters = {str(i["sk"]): _plain(i) for i in found.get(self.table, [])}
        return (_plain(budget) if budget else None), counters

    def finish_request(
        self,
        run_id: str,
        req: ModelRequestRecord,
        reply_json: str | None = None,
        reply_at: str | None = None,
        settle: list[SpendCount] | None = None,
    ) -> None:
        """Store the outcome of a recorded request (overwrites the pending record), with the reply
        it brought (``reply_json``: its JSON text, at most :data:`MAX_INLINE_REPLY_BYTES` UTF-8
        bytes), or where that reply is stored (``reply_at``), in the same write. ``settle``: the
        request's settlement in its company's spend counters (design §12.4), in one transaction
        with the outcome, which lands only while the request is not settled (a retried outcome
        settles nothing again). Raises ValueError for a reply text too large for an item,
        TransientError on throttling or a conflicting transaction."""
        item = _request_item(run_id, req.model_copy(update={"settled": True}) if settle else req)
        if reply_json is not None:
            if len(reply_json.encode()) > MAX_INLINE_REPLY_BYTES:
                raise ValueError(f"a reply of {len(reply_json.encode())} bytes does not fit a ledger item")
            item["reply"] = reply_json
        if reply_at is not None:
            item["reply_at"] = reply_at
        if not settle:
            with transient_errors():
                self.db.put_item(TableName=self.table, Item=item)
            return
        put = {
            "Put": {
                "TableName": self.table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(settled) OR settled = :no",
                "ExpressionAttributeValues": {":no": False},
            }
        }
        # settled already: an earlier attempt wrote this outcome and its settlement, once
        transact_refusals(self.db, [put, *(c.entry(self.table) for c in settle)])

    def request_reply(self, run_id: str, n: int) -> dict[str, Any] | str | None:
        """The reply stored with request ``n``: a dict, or the ``reply_at`` place it was stored
        instead (``"run-data"``), or ``None`` (no such request, or it brought no reply)."""
        with transient_errors():
            item = self.db.get_item(TableName=self.table, Key=keys.request_key(run_id, n), ConsistentRead=True).get(
                "Item"
            )
        if not item or item.get("outcome") != "ok":
            return None
        if isinstance(item.get("reply"), str):
            return json.loads(item["reply"])
        return str(item["reply_at"]) if item.get("reply_at") else None

    # ------------------------------------------------------------------ actions
    def actions(self, run_id: str) -> list[ActionRecord]:
        with transient_errors():
            items = self.db.query(
                TableName=self.table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
                ExpressionAttributeValues={":pk": keys.run_pk(run_id), ":p": keys.ACTION_PREFIX},
                ConsistentRead=True,
            ).get("Items", [])
        return sorted((ActionRecord.model_validate(_plain(i)) for i in items), key=lambda a: a.index)

    def record_action(self, run_id: str, action: ActionRecord) -> bool:
        """Record a decided action once; ``False`` if it was recorded before (the stored one stands)."""
        return put_new(
            self.db,
            self.table,
            _dec(
                {
                    **keys.action_key(run_id, action.index),
                    **action.model_dump(mode="json", exclude_none=True),
                }
            ),
        )

    def set_action_outcome(
        self, run_id: str, index: int, outcome: str, note: str = "", approval: str | None = None
    ) -> None:
        """Set an action's outcome (and the approval answer of a held one)."""
        values = {":o": outcome, ":n": note}
        expr = "SET outcome = :o, outcome_note = :n"
        if approval:
            values[":a"] = approval
            expr += ", approval = :a"
        with transient_errors():
            self.db.update_item(
                TableName=self.table,
                Key=keys.action_key(run_id, index),
                UpdateExpression=expr,
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=values,
            )

    # ------------------------------------------------------------------ wake deliveries
    def count_repeat_delivery(self, agent_id: str, wake_id: str, outcome: str) -> int:
        """Count one repeated delivery of a wake and how it ended (``started``: SQS redelivered a
        message whose first delivery did not finish; ``already_exists``: Step Functions refused
        it). Returns the number of repeats so far."""
        with transient_errors():
            resp = self.db.update_item(
                TableName=self.table,
                Key=keys.delivery_key(agent_id, wake_id),
                UpdateExpression="ADD repeats :one, #o :one SET last_at = :now",
                ExpressionAttributeNames={"#o": outcome},
                ExpressionAttributeValues={":one": 1, ":now": now_iso()},
                ReturnValues="ALL_NEW",
            )
        return int(resp["Attributes"]["repeats"])

    def deliveries(self, agent_id: str, wake_id: str) -> dict[str, Any]:
        """The repeats counted for a wake: ``{"repeats": n, "started": n, "already_exists": n,
        "last_at"}`` (``{}`` when it was delivered once)."""
        with transient_errors():
            item = self.db.get_item(
                TableName=self.table, Key=keys.delivery_key(agent_id, wake_id), ConsistentRead=True
            ).get("Item")
        return _plain(item or {})
