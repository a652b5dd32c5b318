"""Issue 10 finding 11: a canonical DynamoDB Streams batch (tests/events) through the deployed
wake relay handler. Only the record of the room table's own stream becomes a wake; the record
of another table (same shape, same INSERT, a wake in its image) is skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quayutec import resources as R

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

EVENTS = Path(__file__).resolve().parents[1] / "events"


def test_the_wake_relay_reads_only_the_room_tables_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    from quaylocal.dev import _Context
    from quaylocal.stack import local_environment
    from quayutec import settings
    from quayutec.handlers import wake_relay

    env = {
        **local_environment(),
        R.WAKE_QUEUE.env_var: "https://sqs.us-east-1.amazonaws.com/123456789012/wakes",
        "_HANDLER": "quayutec.handlers.wake_relay.handler",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for cached in (getattr(settings, "get_settings", None), getattr(settings, "_validated", None)):
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()
    sent: list = []
    monkeypatch.setattr(wake_relay, "send_wakes", lambda url, wakes: sent.extend(wakes))
    text = (EVENTS / "dynamodb-stream-insert.json").read_text()
    event = json.loads(text.replace("table/ROOM_TABLE/", f"table/{env[R.ROOM_TABLE.env_var]}/"))
    try:
        result = wake_relay.handler(event, _Context("WakeRelayFunction"))
    finally:
        for cached in (getattr(settings, "get_settings", None), getattr(settings, "_validated", None)):
            if hasattr(cached, "cache_clear"):
                cached.cache_clear()
    assert result == {"batchItemFailures": []}
    assert [w.wake_id for w in sent] == ["wake-room-table"]
