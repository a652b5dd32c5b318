"""Fair turns in the ledger table (design §12.3): each company's counter, its turns held and its
line of runs waiting, in one partition ``TURNS#{company}``:

* ``TURNS`` — ``active`` (turns held), ``waiting`` (runs in line), ``cap`` (the company's
  ``max_concurrent_runs``, mirrored from its record; absent: the default);
* ``HOLD#{run}`` — a run's turn: ``expires`` (epoch seconds: a lease; an expired one may be
  taken over), ``handed`` (given to it from the line) and ``confirmed`` (the run started on it);
* ``WAIT#{arrival}#{run}`` — a run waiting, oldest first: its task token and execution.

Every change of ``active`` or ``waiting`` lands in one transaction with the item it counts, so
``active`` is the number of ``HOLD`` items and ``waiting`` that of ``WAIT`` items, whatever
crashes (the chaos lab checks it). Each method is one conditional write or one read; the rules
(when to wait, whom to hand a turn, what a dead token means) are :mod:`quayutec.logic.turns`'.
"""

from __future__ import annotations

from typing import Any, Literal

from botocore.exceptions import ClientError

from quayutec.dal import keys
from quayutec.dal.aws import (
    dynamodb,
    is_condition_failure,
    paginate_query,
    transact_refusals,
    transient_errors,
    update_if,
)
from quayutec.dal.ledger import _plain
from quayutec.models import DEFAULT_MAX_CONCURRENT_RUNS

_NAMES = {"#a": "active", "#w": "waiting", "#c": "cap"}
#: A turn is free: fewer held than the company's cap (its mirrored ``cap``, else the default).
_ROOM = "(attribute_not_exists(#a) OR #a < #c OR (attribute_not_exists(#c) AND #a < :dflt))"
_NO_LINE = "(attribute_not_exists(#w) OR #w <= :zero)"

Acquired = Literal["taken", "own", "full"]
Freed = Literal["freed", "waiters", "none"]
Passed = Literal["passed", "no_hold", "no_wait"]


class TurnStore:
    """``table``: the ledger table."""

    def __init__(self, table: str, client: Any | None = None) -> None:
        self.table = table
        self._client = client

    @property
    def db(self) -> Any:
        return self._client or dynamodb()

    # ------------------------------------------------------------------ entries
    def _counter(self, company: str, expr: str, cond: str | None, values: dict[str, Any]) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "TableName": self.table,
            "Key": keys.turns_key(company),
            "UpdateExpression": expr,
            "ExpressionAttributeNames": {n: v for n, v in _NAMES.items() if n in expr + (cond or "")},
            "ExpressionAttributeValues": values,
        }
        if cond:
            spec["ConditionExpression"] = cond
        return {"Update": spec}

    def _hold(self, company: str, run_id: str, execution_arn: str, expires: int, *, handed: bool) -> dict[str, Any]:
        item: dict[str, Any] = {
            **keys.hold_key(company, run_id),
            "run_id": run_id,
            "execution_arn": execution_arn,
            "expires": expires,
        }
        item["handed" if handed else "confirmed"] = True
        return {
            "Put": {
                "TableName": self.table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _drop_hold(self, company: str, run_id: str, *, only_unconfirmed: bool) -> dict[str, Any]:
        cond = "attribute_exists(pk)" + (" AND attribute_not_exists(confirmed)" if only_unconfirmed else "")
        return {"Delete": {"TableName": self.table, "Key": keys.hold_key(company, run_id), "ConditionExpression": cond}}

    def _drop_wait(self, wait: dict[str, Any]) -> dict[str, Any]:
        return {
            "Delete": {
                "TableName": self.table,
                "Key": {"pk": wait["pk"], "sk": wait["sk"]},
                "ConditionExpression": "attribute_exists(pk)",
            }
        }

    # ------------------------------------------------------------------ a run's own turn
    def acquire(self, company: str, run_id: str, execution_arn: str, now: int, lease_s: int) -> Acquired:
        """Take a turn of ``company`` for ``run_id`` when one is free and no run waits in line
        (one transaction: the counter and the run's ``HOLD``). ``own``: the run holds one
        already (a retried step, or one handed to it from the line), now confirmed and its lease
        renewed. ``full``: none free, or others wait first. Raises TransientError."""
        refusals = transact_refusals(
            self.db,
            [
                self._counter(
                    company, "ADD #a :one", f"{_ROOM} AND {_NO_LINE}", {":one": 1, ":zero": 0, ":dflt": _dflt()}
                ),
                self._hold(company, run_id, execution_arn, now + lease_s, handed=False),
            ],
        )
        if refusals is None:
            return "taken"
        if refusals[1] is not None and self.confirm(company, run_id, now + lease_s):
            return "own"
        return "full"

    def confirm(self, company: str, run_id: str, expires: int) -> bool:
        """Mark the run's ``HOLD`` confirmed (it starts on it: no one takes it back) with a new
        lease, once (a retried step finds it confirmed and writes nothing); ``False`` when it
        holds none. Raises TransientError."""
        try:
            with transient_errors():
                self.db.update_item(
                    TableName=self.table,
                    Key=keys.hold_key(company, run_id),
                    UpdateExpression="SET confirmed = :t, expires = :e",
                    ConditionExpression="attribute_exists(pk) AND attribute_not_exists(confirmed)",
                    ExpressionAttributeValues={":t": True, ":e": expires},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            return True
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise
            return bool(exc.response.get("Item"))

    def enqueue(self, company: str, run_id: str, arrival: str, token: str, execution_arn: str) -> bool:
        """Put the run in ``company``'s line at ``arrival`` with its task token, counted, and mark
        its ledger entry waiting, in one transaction; a run in line already (a look again after
        its wait timed out) gets its new token. Returns ``True`` when it joined the line now.
        Raises TransientError."""
        wait = {
            **keys.wait_key(company, arrival, run_id),
            "run_id": run_id,
            "token": token,
            "execution_arn": execution_arn,
            "arrival": arrival,
        }
        refusals = transact_refusals(
            self.db,
            [
                {"Put": {"TableName": self.table, "Item": wait, "ConditionExpression": "attribute_not_exists(pk)"}},
                self._counter(company, "ADD #w :one", None, {":one": 1}),
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": keys.run_key(run_id),
                        "UpdateExpression": "SET waiting_since = if_not_exists(waiting_since, :at)",
                        "ConditionExpression": "attribute_exists(pk)",
                        "ExpressionAttributeValues": {":at": arrival},
                    }
                },
            ],
        )
        if refusals is None:
            return True
        update_if(
            self.db,
            TableName=self.table,
            Key=keys.wait_key(company, arrival, run_id),
            UpdateExpression="SET #t = :t, execution_arn = :x",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#t": "token"},
            ExpressionAttributeValues={":t": token, ":x": execution_arn},
        )
        return False

    def leave_line(self, company: str, arrival: str, run_id: str) -> bool:
        """Take the run out of the line (its execution ended while it waited); ``False`` when it
        was not in it."""
        wait = keys.wait_key(company, arrival, run_id)
        return (
            transact_refusals(
                self.db,
                [
                    self._drop_wait(wait),
                    self._counter(company, "ADD #w :minus", "attribute_exists(pk)", {":minus": -1}),
                ],
            )
            is None
        )

    def free(self, company: str, run_id: str, *, only_unconfirmed: bool = False) -> Freed:
        """Give back the run's turn when no run waits (one transaction: its ``HOLD`` and the
        counter). ``waiters``: some wait, nothing written (hand it on: :meth:`pass_on`). ``none``:
        it holds no turn (or, ``only_unconfirmed``, one it started on). Raises TransientError."""
        refusals = transact_refusals(
            self.db,
            [
                self._drop_hold(company, run_id, only_unconfirmed=only_unconfirmed),
                self._counter(
                    company, "ADD #a :minus", f"attribute_exists(pk) AND {_NO_LINE}", {":minus": -1, ":zero": 0}
                ),
            ],
        )
        if refusals is None:
            return "freed"
        return "none" if refusals[0] is not None else "waiters"

    def pass_on(
        self, company: str, run_id: str, wait: dict[str, Any], now: int, lease_s: int, *, only_unconfirmed: bool = False
    ) -> Passed:
        """Hand the run's turn to the waiting run ``wait`` (an item of :meth:`line`): its ``HOLD``
        becomes the other's, which leaves the line, in one transaction. ``no_hold``: the run holds
        none (nothing written); ``no_wait``: that run left the line meanwhile."""
        refusals = transact_refusals(
            self.db,
            [
                self._drop_hold(company, run_id, only_unconfirmed=only_unconfirmed),
                self._hold(company, wait["run_id"], wait.get("execution_arn", ""), now + lease_s, handed=True),
                self._drop_wait(wait),
                self._counter(company, "ADD #w :minus", "attribute_exists(pk)", {":minus": -1}),
            ],
        )
        if refusals is None:
            return "passed"
        return "no_hold" if refusals[0] is not None else "no_wait"

    def hand_free(self, company: str, wait: dict[str, Any], now: int, lease_s: int) -> bool:
        """Give a free turn to the waiting run ``wait``: counted, its ``HOLD``, out of the line,
        in one transaction; ``False`` when none is free or it left the line."""
        return (
            transact_refusals(
                self.db,
                [
                    self._counter(
                        company,
                        "ADD #a :one, #w :minus",
                        f"{_ROOM} AND #w > :zero",
                        {":one": 1, ":minus": -1, ":zero": 0, ":dflt": _dflt()},
                    ),
                    self._hold(company, wait["run_id"], wait.get("execution_arn", ""), now + lease_s, handed=True),
                    self._drop_wait(wait),
                ],
            )
            is None
        )

    def take_over(self, company: str, hold: dict[str, Any], wait: dict[str, Any], now: int, lease_s: int) -> bool:
        """Give the expired turn ``hold`` (an item of :meth:`expired`) to the waiting run ``wait``,
        in one transaction; ``False`` when it was renewed or given back meanwhile, or the run
        left the line."""
        return (
            transact_refusals(
                self.db,
                [
                    {
                        "Delete": {
                            "TableName": self.table,
                            "Key": {"pk": hold["pk"], "sk": hold["sk"]},
                            "ConditionExpression": "expires < :now",
                            "ExpressionAttributeValues": {":now": now},
                        }
                    },
                    self._hold(company, wait["run_id"], wait.get("execution_arn", ""), now + lease_s, handed=True),
                    self._drop_wait(wait),
                    self._counter(company, "ADD #w :minus", "attribute_exists(pk)", {":minus": -1}),
                ],
            )
            is None
        )

    # ------------------------------------------------------------------ reads
    def counter(self, company: str) -> dict[str, Any]:
        """The company's counter (consistent): ``active``, ``waiting``, ``cap`` (``{}``: none yet)."""
        with transient_errors():
            item = self.db.get_item(TableName=self.table, Key=keys.turns_key(company), ConsistentRead=True).get("Item")
        return _plain(item) if item else {}

    def line(self, company: str, limit: int) -> list[dict[str, Any]]:
        """The oldest ``limit`` runs waiting in ``company``'s line (consistent), oldest first."""
        return self._items(company, keys.WAIT_PREFIX, limit)

    def holds(self, company: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The turns of ``company`` held (consistent)."""
        return self._items(company, keys.HOLD_PREFIX, limit)

    def expired(self, company: str, now: int, limit: int) -> list[dict[str, Any]]:
        """Turns of ``company`` whose lease ended before ``now`` (at most ``limit``)."""
        return [h for h in self.holds(company) if int(h.get("expires", 0)) < now][:limit]

    def _items(self, company: str, prefix: str, limit: int | None) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
            "ExpressionAttributeValues": {":pk": keys.turns_pk(company), ":p": prefix},
            "ConsistentRead": True,
        }
        if limit is not None:
            kwargs["Limit"] = limit
            with transient_errors():
                return [_plain(i) for i in self.db.query(**kwargs).get("Items", [])]
        with transient_errors():
            return [_plain(i) for i in paginate_query(self.db.query, **kwargs)]

    # ------------------------------------------------------------------ the company's setting
    def set_cap_item(self, company: str, cap: int) -> dict[str, Any]:
        """The counter's ``cap`` as a transaction entry (the API writes it with the company's
        record: design §12.3)."""
        return {
            "Update": {
                "TableName": self.table,
                "Key": keys.turns_key(company),
                "UpdateExpression": "SET #c = :cap",
                "ExpressionAttributeNames": {"#c": "cap"},
                "ExpressionAttributeValues": {":cap": cap},
            }
        }


def _dflt() -> int:
    return DEFAULT_MAX_CONCURRENT_RUNS
