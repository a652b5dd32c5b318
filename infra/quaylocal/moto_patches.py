"""Patches of moto (5.2.5, pinned) that keep a long-lived local stack small and fast, without
changing what any AWS call answers: applied once by :func:`install` (from
:func:`quaylocal.stack.install_seams`), alongside the seams that connect moto to the stack.

* TransactWriteItems copies only the items a transaction may write, not whole tables, and
  keeps the table's one stream shard on cancellation (:func:`_transact_keeping_streams`);
* moto's per-class ``instances_tracked`` lists hold their instances weakly
  (:func:`_new_weakly_tracked`), and finished interpreter threads are dropped
  (:func:`forget_finished_threads`);
* DynamoDB item results skip moto's shape-walking serializer (:func:`_serialize_dynamodb_result`);
* the ASL interpreter reuses one boto3 client per region and service and one parse tree per
  definition (:func:`_cached_asl_client`, :func:`_parse_asl_once`).

One patch makes moto answer as AWS does where it does not: ``States.ALL`` in a Retry or Catch
does not match ``States.DataLimitExceeded`` nor ``States.Runtime``, which AWS documents as
terminal errors no ``States.ALL`` takes (Step Functions developer guide, "Handling errors":
:func:`_errors_equal_as_aws`); moto's interpreter caught them. So a state past the 256 KiB
payload quota fails its execution locally too, as on AWS.

Each names moto internals: tests/run/test_local_engine*.py guard them.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import weakref
from collections.abc import Iterator
from typing import Any

# isort: split
# Before moto's modules: moto_imports defers what they need not import (ruff keeps this order).
from quaylocal import moto_imports  # noqa: F401

# isort: split
from moto.core.common_models import BaseModel
from moto.core.serialize import JSONSerializer
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import StreamShard, Table
from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

_threads_lock = threading.Lock()


def forget_finished_threads() -> None:
    """moto's ASL interpreter (5.2.5, ported from LocalStack) appends every thread it starts
    (about five per execution: the execution's, its program's, one per Task state) to the
    module list ``TMP_THREADS`` and never removes one; nothing in moto reads it. Drop the
    finished ones, each with its locks, events and name (moto internals, pinned version)."""
    from moto.stepfunctions.parser.utils import TMP_THREADS

    with _threads_lock:
        for thread in [t for t in TMP_THREADS if t.ident is not None and not t.is_alive()]:
            TMP_THREADS.remove(thread)


_original_transact_write_items = DynamoDBBackend.transact_write_items


class _TransactionTables(threading.local):
    """The tables the current thread's TransactWriteItems needs no whole copy of
    (:func:`_backup_items`)."""

    names: frozenset[str] = frozenset()


_UNCOPIED = _TransactionTables()


class _CopyKeepingBackedUpTables:
    """Stands in for the ``copy`` module in ``moto.dynamodb.models``, whose
    ``transact_write_items`` takes a deep copy of every table a transaction touches (all its
    items and stream records, for each transaction) to swap it back in on cancellation. A table
    the transaction only checks, or whose written items :func:`_transact_keeping_streams`
    backed up itself, is "copied" as the table itself, so moto's swap puts back the same table;
    every other copy is ``copy``'s."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        if isinstance(value, Table) and value.name in _UNCOPIED.names:
            return value
        return copy.deepcopy(value, memo)


#: (table name, hash key, range key or None) -> a copy of the item stored there before the
#: transaction, or None where there was none.
_ItemBackup = dict[tuple[str, DynamoType, DynamoType | None], Item | None]


def _backup_items(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> tuple[_ItemBackup, set[str]]:
    """The items ``transact_items`` may write (Put, Update, Delete), copied as they are now, and
    the names of the tables that need no whole copy: every one the transaction names (a table it
    only checks has nothing to put back) but those with a key moto will reject (moto's own
    whole-table copy then)."""
    backup: _ItemBackup = {}
    named: set[str] = set()
    whole: set[str] = set()
    for entry in transact_items:
        for op_type, op in entry.items():
            name = op.get("TableName") if isinstance(op, dict) else None
            if not isinstance(name, str):
                continue
            table = backend.tables.get(name)
            if table is None:
                continue
            named.add(name)
            if op_type not in ("Put", "Update", "Delete"):
                continue
            key = _item_key(table, op.get("Item") if op_type == "Put" else op.get("Key"))
            if key is None:
                whole.add(name)
            elif (name, *key) not in backup:
                backup[(name, *key)] = copy.deepcopy(_stored_item(table, *key))
    return backup, named - whole


def _item_key(table: Table, attrs: Any) -> tuple[DynamoType, DynamoType | None] | None:
    """The stored item's key of ``attrs`` (an AttributeValue map) in ``table``; None when not
    well-formed."""
    try:
        hash_key = DynamoType(attrs[table.hash_key_attr])
        range_key = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
        return hash_key, range_key
    except Exception:  # noqa: BLE001 - moto rejects it itself; the whole table is copied then
        return None


def _items_of(table: Table) -> dict[DynamoType, Any]:
    """``table.items``: its Item by hash key, or (a table with a range key) a dict of its Items
    by range key by hash key (moto types it as the latter only)."""
    return table.items


def _stored_item(table: Table, hash_key: DynamoType, range_key: DynamoType | None) -> Item | None:
    if range_key is None:
        return _items_of(table).get(hash_key)
    return _items_of(table).get(hash_key, {}).get(range_key)


def _restore_item(table: Table, hash_key: DynamoType, range_key: DynamoType | None, item: Item | None) -> None:
    items = _items_of(table)
    if range_key is None:
        if item is None:
            items.pop(hash_key, None)
        else:
            items[hash_key] = item
    elif item is None:
        items.get(hash_key, {}).pop(range_key, None)
    else:
        items[hash_key][range_key] = item


def _transact_keeping_streams(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """TransactWriteItems as moto (5.2.5) does it, but its rollback. moto deep-copies every
    table the transaction touches (every item and stream record: the cost and the garbage grow
    with the table, for each transaction) and, on cancellation, swaps the copies in: a copy gets
    a new stream shard, so stream readers holding an iterator see no record after it, while the
    old shard keeps the records of the rolled-back writes (wakes of a write that never
    happened). Instead, the items the transaction may write are copied before it
    (:func:`_backup_items`) and put back on cancellation, the table and its one stream shard
    stay, and the records the cancelled transaction added are dropped. A table moto still copies
    whole (a malformed key) gets the old shard back, without those records."""
    backup, uncopied = _backup_items(self, transact_items)
    names = {op.get("TableName") for item in transact_items for op in item.values() if isinstance(op, dict)}
    before: dict[str, tuple[Table, StreamShard, int]] = {}
    for n in names:
        if not isinstance(n, str):
            continue
        table = self.tables.get(n)
        if table is not None and table.stream_shard is not None:
            before[n] = (table, table.stream_shard, len(table.stream_shard.items))
    _UNCOPIED.names = frozenset(uncopied)
    try:
        _original_transact_write_items(self, transact_items)
    except Exception:
        for (name, hash_key, range_key), item in backup.items():
            if name in uncopied:
                _restore_item(self.tables[name], hash_key, range_key, item)
        for name, (table, shard, count) in before.items():  # the table's shard: moto swaps whole tables
            del shard.items[count:]
            restored = self.tables.get(name)
            if restored is not None and restored is not table:
                shard.table = restored
                restored.stream_shard = shard
        raise
    finally:
        _UNCOPIED.names = frozenset()


class _WeakInstances:
    """The part of a list moto uses of ``instances_tracked`` (``append``, iteration, ``len``),
    holding its instances weakly, by identity (moto's models compare by value and many are not
    hashable): an instance lives as long as moto's backends hold it, not until the mock stops."""

    def __init__(self, instances: Any = ()) -> None:
        self._refs: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        for instance in instances:
            self.append(instance)

    def append(self, instance: Any) -> None:
        self._refs[id(instance)] = instance  # an entry goes with its instance, before its id is reused

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._refs.values()))

    def __len__(self) -> int:
        return len(self._refs)


#: moto classes whose ``instances_tracked`` stays moto's strong list: moto's S3 ``reset`` closes
#: the buffers of every key and multipart upload made, through it, replaced ones included.
_STRONGLY_TRACKED = frozenset({("moto.s3.models", "FakeKey"), ("moto.s3.models", "FakeMultipart")})
_tracking_lock = threading.Lock()


def _new_weakly_tracked(cls: type, *args: Any, **kwargs: Any) -> Any:
    """Replacement for ``BaseModel.__new__``. moto (5.2.5) appends every model instance it ever
    makes to its class's ``instances_tracked`` list (for the moto server's dashboard, unused
    here) until the mock stops: every DynamoDB item, including the deep copies of whole tables
    TransactWriteItems makes for its rollback, every stream record, every SQS message. A
    long-lived stack (``quay dev``) then grows with every transaction and never comes back down
    (40 posts: ~9,900 dead items, 176 dead table copies). Tracked weakly instead
    (:class:`_WeakInstances`), but for :data:`_STRONGLY_TRACKED`; moto's ``reset_model_data``
    puts a fresh list back, turned weak again at the class's next instance."""
    instance = super(BaseModel, cls).__new__(cls)  # type: ignore[misc]  # as moto's own
    tracked = cls.instances_tracked  # type: ignore[attr-defined]
    if type(tracked) is list and (cls.__module__, cls.__name__) not in _STRONGLY_TRACKED:
        with _tracking_lock:
            tracked = cls.instances_tracked  # type: ignore[attr-defined]
            if type(tracked) is list:
                # A class without weak references (__slots__) keeps moto's list.
                with contextlib.suppress(TypeError):
                    tracked = cls.instances_tracked = _WeakInstances(tracked)  # type: ignore[attr-defined]
    with contextlib.suppress(TypeError):  # this instance cannot be referenced weakly
        tracked.append(instance)
    return instance


#: DynamoDB operations whose moto result is already the wire shape (items as AttributeValue
#: maps): :func:`_serialize_dynamodb_result` passes it through.
_DYNAMODB_ITEM_OPERATIONS = frozenset(
    {
        "GetItem",
        "BatchGetItem",
        "Query",
        "Scan",
        "TransactGetItems",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchWriteItem",
        "TransactWriteItems",
    }
)
_JSON_SCALARS = (str, int, float, bool, type(None))


def _json_native(value: Any) -> bool:
    """Only dicts (str keys), lists and JSON scalars: what the JSON protocol sends unchanged.
    Binary attribute values (``B``, ``BS``: blobs, which the serializer encodes) are not."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v) or "B" in v or "BS" in v:
                return False
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif not isinstance(v, _JSON_SCALARS):
            return False
    return True


def _serialize_dynamodb_result(self: Any, resp: Any, result: Any) -> Any:
    """moto (5.2.5) serializes every response by walking its output shape, looking each member
    up through attribute-alias providers: for a page of items that is ~20 ms per item, far more
    than the operation (a transcript page of 80 messages: 1.9 s of 2 s). DynamoDB's item
    operations already return the wire shape as plain JSON values: send it as it is (the same
    body, tests/run/test_local_engine.py compares them); anything else, moto's way."""
    model = self.operation_model
    if (
        model.service_model.service_name == "dynamodb"
        and model.name in _DYNAMODB_ITEM_OPERATIONS
        and isinstance(result, dict)
        and _json_native(result)
    ):
        return self._serialized_result_to_response(resp, result, model.output_shape, result)
    return _original_serialize_result(self, resp, result)


_original_serialize_result = JSONSerializer._serialize_result

_asl_clients: dict[tuple[Any, ...], Any] = {}
_asl_clients_lock = threading.Lock()


def _cached_asl_client(region: str, service: str, state_credentials: Any = None) -> Any:
    """moto's ASL interpreter builds a new boto3 client for every Lambda task it runs (its
    credentials argument unused): tens of ms of CPU and a client's memory per task state. One
    client per region and service instead (boto3 clients are thread-safe)."""
    from moto.core.models import botocore_stubber
    from moto.stepfunctions.parser.asl.utils import boto_client

    key = (region, service, botocore_stubber.enabled)
    with _asl_clients_lock:
        client = _asl_clients.get(key)
        if client is None:
            client = _asl_clients[key] = boto_client.boto_client_for(region, service, state_credentials)
        return client


_asl_trees: dict[str, Any] = {}
_asl_trees_lock = threading.Lock()


def _parse_asl_once(definition: str) -> tuple[Any, Any]:
    """Replacement for ``AmazonStateLanguageParser.parse``: moto lexes and parses the
    definition with ANTLR at CreateStateMachine and again at every StartExecution (~50 ms of
    CPU each time). The parse tree of a definition is kept (it is only read afterwards) and each
    caller still gets its own evaluation components, built from it by moto's preprocessor, as
    before. A definition that does not parse raises, as before, and is not kept."""
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

    tree = _asl_trees.get(definition)
    if tree is None:
        program, tree = _original_asl_parse(definition)
        with _asl_trees_lock:
            if len(_asl_trees) >= 16:  # a few definitions live at once; forget the oldest
                del _asl_trees[next(iter(_asl_trees))]
            _asl_trees[definition] = tree
        return program, tree
    return Preprocessor().visit(tree), tree


_original_asl_parse = AmazonStateLanguageParser.parse
_original_error_equals = ErrorEqualsDecl._eval_body


def _errors_equal_as_aws(self: Any, env: Any) -> None:
    """``ErrorEqualsDecl._eval_body`` as AWS evaluates it: ``States.ALL`` matches every error but
    the terminal ones (``States.DataLimitExceeded``, ``States.Runtime``), which only a name of
    their own could match (and AWS takes none: they end the execution)."""
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )

    error_name = env.stack[-1]
    terminal = isinstance(error_name, StatesErrorName) and error_name.typ in (
        StatesErrorNameType.StatesStatesDataLimitExceeded,
        StatesErrorNameType.StatesRuntime,
    )
    if terminal:
        env.stack.pop()
        env.stack.append(False)
        return
    _original_error_equals(self, env)


_installed = False


def install() -> None:
    """Apply the patches (once per process)."""
    global _installed
    if _installed:
        return
    DynamoDBBackend.transact_write_items = _transact_keeping_streams  # type: ignore[method-assign]
    dynamodb_models.copy = _CopyKeepingBackedUpTables()  # type: ignore[assignment]  # the module's copy, replaced
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

    lambda_eval_utils.boto_client_for = _cached_asl_client
    AmazonStateLanguageParser.parse = staticmethod(_parse_asl_once)  # type: ignore[method-assign]
    ErrorEqualsDecl._eval_body = _errors_equal_as_aws  # type: ignore[method-assign]
    JSONSerializer._serialize_result = _serialize_dynamodb_result  # type: ignore[method-assign]
    BaseModel.__new__ = staticmethod(_new_weakly_tracked)  # type: ignore[method-assign]
    _installed = True
