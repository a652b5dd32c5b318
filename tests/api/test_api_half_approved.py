"""Issue 10, finding 8: no half-approved actions. A decision takes effect only once Step Functions
accepted it (design §2.6): the approval row goes ``deciding`` first; a transient failure of
``SendTaskSuccess`` puts it back to ``pending`` and the API answers 503 with ``Retry-After`` (the
person's retry works); an answer that landed while its response was lost leaves the row
``deciding``, and the retry (which finds the token used) never marks the approved action
``expired``: the run's own outcome settles the row. The failing Step Functions client is injected
through the Deps seam (``Deps.sfn``)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from apihelpers import HELD_MEMORY, World
from botocore.exceptions import ClientError, ReadTimeoutError

from quayutec.deps import default_deps

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

HELD_REPLY = {
    "reply": {"text": "Held again.", "actions": [{"kind": "remember", "text": HELD_MEMORY, "visibility": "company"}]}
}


class FlakySfn:
    """Step Functions whose next ``fail`` answers go wrong in the given way, then the real one."""

    def __init__(self, real: Any, mode: str, fail: int = 1) -> None:
        self.real, self.mode, self.fail, self.calls = real, mode, fail, []

    def _maybe_fail(self, op: str, **kw: Any) -> Any:
        self.calls.append(op)
        if self.fail <= 0:
            return getattr(self.real, op)(**kw)
        self.fail -= 1
        if self.mode == "throttled":  # refused: nothing was accepted
            raise ClientError(
                {
                    "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                op,
            )
        if self.mode == "unavailable":
            raise ClientError(
                {
                    "Error": {"Code": "ServiceUnavailable", "Message": "try later"},
                    "ResponseMetadata": {"HTTPStatusCode": 503},
                },
                op,
            )
        if self.mode == "landed_then_lost":  # accepted, but the response never came back
            getattr(self.real, op)(**kw)
            raise ReadTimeoutError(endpoint_url="https://states.local")
        raise AssertionError(self.mode)

    def send_task_success(self, **kw: Any) -> Any:
        return self._maybe_fail("send_task_success", **kw)

    def send_task_failure(self, **kw: Any) -> Any:
        return self._maybe_fail("send_task_failure", **kw)


@pytest.fixture
def flaky(stack_env):
    deps = default_deps()
    before = deps.sfn
    real = deps.stepfunctions()
    holder: dict[str, FlakySfn] = {}

    def install(mode: str, fail: int = 1) -> FlakySfn:
        holder["sfn"] = deps.sfn = FlakySfn(real, mode, fail)
        return holder["sfn"]

    yield install
    deps.sfn = before


def _room(world: World) -> str:
    return world.ids.get("room", "r1")


def _parked_approval(world: World, stack_env) -> str:
    """A fresh run of a1 parked on its held `remember`; returns the approval id."""
    stack, server = stack_env
    ann, room = world.tokens["ann"], _room(world)
    stack.wait_quiet(60)
    known = {a["id"] for a in world.api.ok("GET", f"/rooms/{room}/approvals?status=all", ann)["approvals"]}
    server.set_script("a1", [HELD_REPLY])
    world.api.ok("POST", f"/rooms/{room}/messages", ann, {"text": "@a1 remember the plan again"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = [a for a in world.api.ok("GET", f"/rooms/{room}/approvals", ann)["approvals"] if a["id"] not in known]
        if new and stack.is_parked(new[0]["run_id"]):
            stack.wait_quiet(60)
            return new[0]["id"]
        time.sleep(0.05)
    raise AssertionError("a1's held action never reached an approval request")


def _row(world: World, approval_id: str) -> dict:
    rows = world.api.ok("GET", f"/rooms/{_room(world)}/approvals?status=all", world.tokens["ann"])["approvals"]
    return next(a for a in rows if a["id"] == approval_id)


def _settled(world: World, stack_env, approval_id: str) -> dict:
    _stack, _ = stack_env
    run_id = approval_id.rpartition(":")[0]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = world.api.ok("GET", f"/runs/{run_id}", world.tokens["ann"])
        if run["run"]["status"] == "completed":
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not complete: {run['run']['status']}")


@pytest.mark.parametrize("mode", ["throttled", "unavailable"])
def test_transient_send_failure_leaves_it_pending_and_the_retry_works(world: World, stack_env, flaky, mode) -> None:
    approval = _parked_approval(world, stack_env)
    path = f"/rooms/{_room(world)}/approvals/{approval}/approve"
    sfn = flaky(mode)
    first = world.api.call("POST", path, world.tokens["ann"])
    assert first.status == 503, (first.status, first.body)
    assert first.header("Retry-After"), first.headers
    assert first.body["error"] == "unavailable"
    assert _row(world, approval)["status"] == "pending", "a decision Step Functions refused is not a decision"
    second = world.api.call("POST", path, world.tokens["ann"])
    assert second.status == 200 and second.body["status"] == "approved", (second.status, second.body)
    assert sfn.calls == ["send_task_success", "send_task_success"]
    detail = _settled(world, stack_env, approval)
    action = next(a for a in detail["actions"] if f"{detail['run']['run_id']}:{a['index']}" == approval)
    assert action["approval"] == "approved" and action["outcome"] == "written", action
    assert _row(world, approval)["status"] == "approved"


def test_answer_landed_but_lost_is_never_marked_expired(world: World, stack_env, flaky) -> None:
    approval = _parked_approval(world, stack_env)
    path = f"/rooms/{_room(world)}/approvals/{approval}/approve"
    flaky("landed_then_lost")
    first = world.api.call("POST", path, world.tokens["ann"])
    assert first.status == 503 and first.header("Retry-After"), (first.status, first.body)
    assert _row(world, approval)["status"] in ("deciding", "approved"), "the answer may have landed"
    retry = world.api.call("POST", path, world.tokens["ann"])  # the token is used now: InvalidToken
    assert "expired" not in retry.text, (retry.status, retry.body)
    assert retry.status in (200, 409), (retry.status, retry.body)
    detail = _settled(world, stack_env, approval)
    action = next(a for a in detail["actions"] if f"{detail['run']['run_id']}:{a['index']}" == approval)
    assert action["approval"] == "approved" and action["outcome"] == "written", action
    assert _row(world, approval)["status"] == "approved", "the run's outcome settles the row"
    again = world.api.call("POST", path, world.tokens["ann"])
    assert again.status == 409 and "approved" in again.body["message"], (again.status, again.body)


def test_stuck_deciding_row_is_recovered_by_the_retry(world: World, stack_env, flaky) -> None:
    """The API died after moving the row to deciding and before sending: the person's retry
    sends the answer and it takes effect."""
    approval = _parked_approval(world, stack_env)
    run_id, _, index = approval.rpartition(":")
    deps = default_deps()
    assert deps.room.set_approval_status(_room(world), run_id, int(index), "deciding", "ann")
    retry = world.api.call("POST", f"/rooms/{_room(world)}/approvals/{approval}/deny", world.tokens["ann"])
    assert retry.status == 200 and retry.body["status"] == "rejected", (retry.status, retry.body)
    detail = _settled(world, stack_env, approval)
    action = next(a for a in detail["actions"] if f"{detail['run']['run_id']}:{a['index']}" == approval)
    assert action["approval"] == "rejected", action
    assert _row(world, approval)["status"] == "rejected"
