"""The local engine's own mechanics (``quay dev``'s stack, issue 13 item 4): moto's DynamoDB
results passed through as the same body moto's serializer makes, the moto lock serving a
request's calls before background ones, the background invocation gate. Counts and orders only,
no timings."""

from __future__ import annotations

import json
import threading
import time

import pytest
from moto.core.serialize import JSONSerializer, XFormedAttributePicker
from moto.core.utils import get_service_model
from runhelpers import Env

from quaylocal import calls as C
from quaylocal import moto_patches
from quaylocal import stack as st
from quayutec.logic.room_service import RoomService
from quayutec.models import Author

ITEM = {
    "pk": {"S": "room#r1"},
    "sk": {"S": "msg#0001"},
    "n": {"N": "12.5"},
    "ok": {"BOOL": True},
    "none": {"NULL": True},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2"]},
    "m": {"M": {"inner": {"L": [{"S": "x"}, {"N": "3"}, {"M": {}}]}}},
    "text": {"S": 'é " \\ \n'},
}


def _bodies(operation: str, result: dict) -> tuple[object, object]:
    model = get_service_model("dynamodb").operation_model(operation)
    serializer = JSONSerializer(operation_model=model, pretty_print=False, value_picker=XFormedAttributePicker())
    fast = moto_patches._serialize_dynamodb_result(serializer, serializer._create_default_response(), result)
    moto = moto_patches._original_serialize_result(serializer, serializer._create_default_response(), result)
    assert fast["headers"] == moto["headers"] and fast["status_code"] == moto["status_code"]
    return json.loads(fast["body"]), json.loads(moto["body"])


@pytest.mark.unit
def test_dynamodb_results_pass_through_as_moto_serializes_them() -> None:
    results = {
        "GetItem": {"Item": ITEM, "ConsumedCapacity": {"TableName": "t", "CapacityUnits": 0.5}},
        "Query": {
            "Items": [ITEM, {**ITEM, "sk": {"S": "msg#0002"}}],
            "Count": 2,
            "ScannedCount": 2,
            "LastEvaluatedKey": {"pk": ITEM["pk"], "sk": ITEM["sk"]},
        },
        "BatchGetItem": {"Responses": {"t": [ITEM]}, "UnprocessedKeys": {}},
        "UpdateItem": {"Attributes": ITEM},
        "PutItem": {},
        "TransactWriteItems": {},
    }
    for operation, result in results.items():
        fast, moto = _bodies(operation, result)
        assert fast == moto, operation
    assert moto_patches._json_native({"Items": [ITEM]})
    assert not moto_patches._json_native({"Item": {**ITEM, "b": {"B": "aGVsbG8="}}})  # a blob: moto's way


@pytest.mark.unit
def test_the_moto_lock_serves_a_waiting_request_before_waiting_background_calls() -> None:
    lock = st._ForegroundFirstLock()
    order: list[str] = []
    lock.acquire()  # a background call in progress

    def call(name: str, fg: bool) -> None:
        with st.foreground() if fg else _nothing(), lock:
            order.append(name)

    bg = threading.Thread(target=call, args=("background", False))
    bg.start()
    _until(lambda: _waiters(lock._bg) == 1)
    fg = threading.Thread(target=call, args=("request", True))
    fg.start()
    _until(lambda: lock._fg_waiting == 1)
    lock.release()
    bg.join(5)
    fg.join(5)
    assert order == ["request", "background"]
    with lock, lock:  # reentrant, as the RLock it replaces
        pass
    assert lock._owner is None


@pytest.mark.unit
def test_the_gate_admits_background_invocations_in_order_and_lets_requests_pass() -> None:
    gate = st._InvocationGate(1)  # one at a time: the order appended is the order admitted
    running, most, order = 0, 0, []
    guard = threading.Lock()
    release = threading.Event()

    def work(i: int) -> None:
        nonlocal running, most
        with gate.slot():
            with guard:
                running += 1
                most = max(most, running)
                order.append(i)
            with gate.slot():  # nested: passes
                pass
            release.wait(5)
            with guard:
                running -= 1

    threads = []
    for i in range(6):
        threads.append(threading.Thread(target=work, args=(i,)))
        threads[-1].start()
        _until(lambda n=i + 1: len(order) + len(gate._queue) == n)
    with st.foreground(), gate.slot():  # a request's invocation does not wait for the busy slots
        passed = True
    release.set()
    for t in threads:
        t.join(5)
    assert passed and most == 1 and order == list(range(6))
    assert gate._busy == 0 and not gate._queue


def _waiters(cond: threading.Condition) -> int:
    return len(cond._waiters)  # type: ignore[attr-defined]


def _until(check, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.005)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_execution_scans_list_no_succeeded_execution(env: Env) -> None:
    """quay dev's backstop scan (every FULL_SCAN_S) and the quiet check list executions by the
    statuses they act on: a succeeded execution needs nothing, and listing those grew with the
    history (3,000 runs: ~0.4 s a scan) into the idle CPU of a long-lived `quay dev`."""
    env.server.set_script("a1", [{"reply": {"text": "Done.", "actions": []}}])
    with C.owner(C.SETUP):
        RoomService(env.deps.room).post_message("r1", Author(kind="person", id="ann", company="acme"), "@a1 hello", [])
    env.stack.wait_quiet()
    sfn = env.stack.client("stepfunctions")
    assert [e["status"] for e in env.stack._executions("SUCCEEDED")] == ["SUCCEEDED"]
    asked: list[str | None] = []

    def record(params: dict, **_: object) -> None:
        asked.append(params.get("statusFilter"))

    sfn.meta.events.register("provide-client-params.sfn.ListExecutions", record)
    try:
        env.stack._last_full_scan = 0.0  # the backstop scan is due
        env.stack.pump_once()
        assert env.stack.quiet()
    finally:
        sfn.meta.events.unregister("provide-client-params.sfn.ListExecutions", record)
    assert asked and "SUCCEEDED" not in asked and None not in asked, asked
    assert set(asked) == {"RUNNING", "FAILED", "TIMED_OUT", "ABORTED"}
