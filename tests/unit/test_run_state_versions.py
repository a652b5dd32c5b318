"""The run state across a deploy (docs/deploy.md "Runs across a deploy"): an execution keeps the
state machine definition it started with, but each of its next tasks invokes the function's code
as deployed then. So the state one version wrote must validate in the next: a field may be
added with a default, never made required, renamed or removed while runs of the previous
version may still be in flight (parked ones up to the approval timeout).

This test pins the required fields of :class:`quayutec.models.RunState`, recursively: a new
required field (or a renamed one) fails it. Changing the pin is a decision: it means runs parked
on the deployed version fail their next phase (``RunStateInvalid``) after the deploy."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel

from quayutec.models import RunState

#: Required fields of the run state, as deployed (dotted paths from the state's top).
REQUIRED = {
    "wake.agent_id",
    "wake.wake_id",
    "wake.room_id",
    "wake.hop",
    "wake.chain_id",
    "wake.by_kind",
    "wake.cause_kind",
    "wake.cause_id",
    "run.run_id",
    "run.agent_id",
    "run.wake_id",
    "run.room_id",
    "run.hop",
    "run.chain_id",
    "facts.company",
    "facts.started_at",
    "facts.provider",
    "facts.model",
    "claim.claimed",
    "budget.remaining_s",
    "settings.approval_timeout_s",
    "model.outcome",
    "model.requests",
    "rights.actions",
    "rights.over_limit",
    "approvals.index",
    "approvals.outcome",
    "context.max_context_tokens",
    "context.budget",
    "context.prompt_tokens",
    # A span is written whole by the version that records spans; states without ``spans`` (the
    # versions before) validate, as ``spans`` itself is optional.
    "spans.phase",
    "spans.start",
    "spans.end",
}


def _models_in(annotation: object) -> list[type[BaseModel]]:
    found, todo = [], [annotation]
    while todo:
        a = todo.pop()
        if isinstance(a, type) and issubclass(a, BaseModel):
            found.append(a)
        todo.extend(typing.get_args(a))
    return found


def required_fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Dotted paths of every required field under ``model`` (a field's nested models too)."""
    out: set[str] = set()
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        if field.is_required():
            out.add(path)
        for nested in _models_in(field.annotation):
            out |= required_fields(nested, path + ".")
    return out


@pytest.mark.unit
def test_the_run_state_gains_no_required_field_between_versions() -> None:
    got = required_fields(RunState)
    new, gone = sorted(got - REQUIRED), sorted(REQUIRED - got)
    assert not new, f"new required state fields {new}: give them a default (runs in flight lack them)"
    assert not gone, f"required state fields {gone} renamed or removed: runs in flight still carry them"


@pytest.mark.unit
def test_a_state_with_fields_of_a_later_version_still_validates() -> None:
    """The previous code reads a state the next one wrote (a rollback): unknown fields are ignored."""
    state = RunState.model_validate({"claim": {"claimed": True, "a_later_field": 1}, "a_later_step": {"x": 1}})
    assert state.claim is not None and state.claim.claimed is True
