"""Issue 10 finding 11: a canonical DynamoDB Streams batch (tests/events) through the deployed
stream dispatch handler. Only the record of the room table's own stream becomes a wake; the record
of another table (same shape, same INSERT, a wake in its image) is skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quayutec import resources as R

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

EVENTS = Path(__file__).resolve().parents[1] / "events"


def test_stream_dispatch_reads_only_the_room_tables_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    from quaylocal.dev import _Context
    from quaylocal.stack import local_environment
    from quayutec import settings
    from quayutec.handlers import stream_dispatch

    env = {
        **local_environment(),
        R.WAKE_QUEUE.env_var: "https://sqs.us-east-1.amazonaws.com/123456789012/wakes",
        "_HANDLER": "quayutec.handlers.stream_dispatch.handler",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for cached in (getattr(settings, "get_settings", None), getattr(settings, "_validated", None)):
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()
    sent: list = []
    monkeypatch.setattr(stream_dispatch, "send_wakes", lambda url, wakes: sent.extend(wakes))
    text = (EVENTS / "dynamodb-stream-insert.json").read_text()
    event = json.loads(text.replace("table/ROOM_TABLE/", f"table/{env[R.ROOM_TABLE.env_var]}/"))
    try:
        result = stream_dispatch.handler(event, _Context("StreamDispatchFunction"))
    finally:
        for cached in (getattr(settings, "get_settings", None), getattr(settings, "_validated", None)):
            if hasattr(cached, "cache_clear"):
                cached.cache_clear()
    assert result == {"batchItemFailures": []}
    assert [w.wake_id for w in sent] == ["wake-room-table"]
