"""Benchmark of the local run path: prints figures, asserts nothing (these machines are shared
and noisy; targets are read by people, not by the test suite).

    .venv/bin/python scripts/bench.py [--runs N]

Figures: local stack start-up, wake-to-reply latency per run (post → reply in the room), time per
phase from the execution history, the largest Step Functions payload, and peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "run"))

from runhelpers import make_room  # noqa: E402

from quayutec import deps as quay_deps  # noqa: E402
from quayutec.logic.room_service import RoomService  # noqa: E402
from quayutec.models import Author  # noqa: E402
from quaylocal.provider_server import ProviderServer  # noqa: E402
from quaylocal.stack import LocalStack  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    server = ProviderServer()
    server.start()
    t0 = time.perf_counter()
    stack = LocalStack(settings={"ANTHROPIC_BASE_URL": server.base_url("anthropic"),
                                 "OPENAI_BASE_URL": server.base_url("openai")})
    stack.start()
    startup = time.perf_counter() - t0
    try:
        make_room(stack, server)
        stack.wait_quiet()
        rooms = RoomService(quay_deps.default_deps().room)
        ann = Author(kind="person", id="ann", company="acme")
        latencies = []
        for i in range(args.runs):
            server.set_script("a1", [{"reply": {"text": f"ok {i}", "actions": [
                {"kind": "remember", "text": f"line {i}", "visibility": "room"}]}}])
            start = time.perf_counter()
            msg = rooms.post_message("r1", ann, f"@a1 step {i}", [])
            while not any(m.kind == "reply" and m.created_at > msg.created_at
                          for m in quay_deps.default_deps().room.recent_messages("r1", 3)):
                time.sleep(0.005)
            latencies.append(time.perf_counter() - start)
            stack.wait_quiet()
        phases: dict[str, list[float]] = defaultdict(list)
        biggest = 0
        sfn = stack.client("stepfunctions")
        for ex in sfn.list_executions(stateMachineArn=stack.state_machine_arn)["executions"]:
            events = sfn.get_execution_history(executionArn=ex["executionArn"], maxResults=1000)["events"]
            entered: dict[str, float] = {}
            for e in events:
                for key, value in e.items():
                    if key.endswith("EventDetails") and isinstance(value, dict):
                        for field in ("input", "output"):
                            biggest = max(biggest, len(value.get(field, "") or ""))
                if e["type"] == "TaskStateEntered":
                    entered[e["stateEnteredEventDetails"]["name"]] = e["timestamp"].timestamp()
                if e["type"] == "TaskStateExited":
                    name = e["stateExitedEventDetails"]["name"]
                    phases[name].append(e["timestamp"].timestamp() - entered.get(name, e["timestamp"].timestamp()))
    finally:
        stack.stop()
        server.stop()
    print(f"local stack start-up        {startup:8.2f} s")
    print(f"wake → reply, {len(latencies)} runs       median {statistics.median(latencies):.3f} s, "
          f"max {max(latencies):.3f} s")
    for name, values in phases.items():
        print(f"  phase {name:<20} median {statistics.median(values) * 1000:7.1f} ms")
    print(f"largest state payload       {biggest:8d} bytes (budget 32768)")
    print(f"peak RSS                    {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:8.1f} MiB")


if __name__ == "__main__":
    main()
