"""The outbox relay's logic (docs/design.md §3): a room item inserted with wakes is the outbox;
its stream record is read here and its wakes sent to the SQS wake queue, where the wake consumer
(:mod:`quayutec.logic.wake_consumer`) starts one execution per wake.
"""

from __future__ import annotations

from typing import Any

from quayutec.dal.aws import sqs, transient_errors
from quayutec.models import Wake


def wakes_of_stream_image(new_image: dict[str, Any] | None) -> list[Wake]:
    """The wakes an inserted room-table item carries (deserialized ``NewImage``)."""
    if not new_image or not new_image.get("wakes"):
        return []
    return [Wake.model_validate(w) for w in new_image["wakes"]]


def send_wakes(queue_url: str, wakes: list[Wake], client: Any | None = None) -> None:
    """Send wakes to the SQS wake queue (10 per batch call). Raises on any failed entry, so the
    stream record is retried (a repeat is harmless: the execution name dedups)."""
    q = client or sqs()
    for start in range(0, len(wakes), 10):
        batch = wakes[start : start + 10]
        with transient_errors():
            resp = q.send_message_batch(
                QueueUrl=queue_url,
                Entries=[{"Id": str(i), "MessageBody": w.model_dump_json()} for i, w in enumerate(batch)],
            )
        if resp.get("Failed"):
            raise RuntimeError(
                f"{len(resp['Failed'])} wake(s) not accepted by SQS: " + ", ".join(f["Code"] for f in resp["Failed"])
            )
