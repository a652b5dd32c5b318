"""The room stream's event filter, applied by the local pump as Lambda's event source mapping
applies it on AWS (docs/design.md §3): a record no pattern matches never reaches WakeRelay.

The patterns are the template's (``FilterCriteria`` of the stream's event source mapping, when the
local stack was deployed from ``cdk.out``) or :data:`quayutec.resources.ROOM_STREAM_FILTER` (the
same source the CDK app synthesizes them from; ``tests/infra`` checks they agree). Matching uses
moto's event-pattern matcher (the one its EventBridge runs), not one of our own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from moto.events.models import EventPattern, EventPatternParser

from quayutec import resources as r


class StreamFilter:
    """Lambda event filtering's rule: a record passes when any pattern matches it (no pattern:
    every record passes). ``patterns``: the ``FilterCriteria`` ``Pattern`` texts (JSON)."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = tuple(patterns)
        self._compiled = [EventPattern(p, EventPatternParser(p).parse()) for p in self.patterns]

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether ``record`` (a DynamoDB Streams record as GetRecords returns it) passes."""
        if not self._compiled:
            return True
        event = json.loads(json.dumps(record, default=str))
        return any(p.matches_event(event) for p in self._compiled)

    @classmethod
    def of_resources(cls) -> StreamFilter:
        return cls((json.dumps(r.ROOM_STREAM_FILTER),))

    @classmethod
    def of_template(cls, template: Mapping[str, Any], function_logical_id: str) -> StreamFilter:
        """The ``FilterCriteria`` patterns of the template's DynamoDB event source mapping for
        ``function_logical_id`` (the mapping's ``FunctionName`` refers to it)."""
        for res in template.get("Resources", {}).values():
            if res.get("Type") != "AWS::Lambda::EventSourceMapping":
                continue
            props = res.get("Properties", {})
            if _refers_to(props.get("FunctionName"), function_logical_id) and "StartingPosition" in props:
                filters: Sequence[Mapping[str, str]] = (props.get("FilterCriteria") or {}).get("Filters", [])
                return cls(tuple(f["Pattern"] for f in filters))
        raise ValueError(f"the template has no stream event source mapping for {function_logical_id}")


def _refers_to(value: Any, logical_id: str) -> bool:
    return isinstance(value, Mapping) and (
        value.get("Ref") == logical_id or value.get("Fn::GetAtt", [None])[0] == logical_id
    )
