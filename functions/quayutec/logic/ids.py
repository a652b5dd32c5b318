"""Deterministic ids (SPEC §2.1): every write a run makes is keyed from the run, so a retried
step writes nothing twice; execution names are derived from ``(agent_id, wake_id)``."""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def execution_name(agent_id: str, wake_id: str) -> str:
    """The Step Functions execution name (= run id) for a wake: a readable prefix plus a hash,
    at most 80 characters of ``[A-Za-z0-9-_]`` (StartExecution API reference, ``name``)."""
    digest = hashlib.sha256(f"{agent_id}\x00{wake_id}".encode()).hexdigest()[:32]
    prefix = _UNSAFE.sub("-", agent_id)[:40]
    return f"{prefix}-{digest}"


def reply_message_id(run_id: str) -> str:
    return f"reply-{run_id}"


def action_write_id(run_id: str, index: int, what: str) -> str:
    """The id of the item written for declared action ``index`` (``mem``, ``task``, ``tev``)."""
    return f"{what}-{run_id}-{index:03d}"


def notice_id(run_id: str, step: str, agent_id: str) -> str:
    return f"notice-{run_id}-{step}-{_UNSAFE.sub('-', agent_id)}"


def run_wake_id(run_id: str, step: str, agent_id: str) -> str:
    """Wake ids of a run's writes derive from (run, step, agent) (SPEC §3)."""
    return f"run:{run_id}:{step}:{agent_id}"


def message_wake_id(message_id: str) -> str:
    return f"msg:{message_id}"


def task_event_wake_id(event_id: str) -> str:
    return f"tev:{event_id}"
