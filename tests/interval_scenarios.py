"""One churning consumer group played through Kafka's coordinator at two assignment intervals, for the what-if.

``churn_scenario(name, interval_ms, seed)`` is an oracle scenario (tests/oracle.py, docs/oracle.md): a KIP-848
consumer group whose members join in a burst, then join, leave and crash every few seconds for some minutes,
with the group config ``consumer.assignment.interval.ms`` set to ``interval_ms``. The clients are Kafka-like (they
heartbeat at the interval the coordinator gives, 5 s by default) and the same seed gives the same steps at every
interval, so two histories differ only by what the interval changes.

``interval_histories(out, seed, intervals)`` writes one history per interval through the oracle and returns each
group's ``interval_whatif.GroupHistory`` read back from its real log segment.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Sequence

import oracle
import oracle_scenarios
from offsets_audit.audit import interval_whatif
from offsets_audit.audit.model import Event
from offsets_audit.replay import replay_records
from offsets_audit.sources.segments import read_segment

GROUP = "app"
BROKER_HEARTBEAT_MS = 5000


def churn_scenario(name: str, interval_ms: int, seed: int, *, members: int = 12,
                   duration_ms: int = 360_000, mean_gap_ms: int = 4000) -> dict[str, Any]:
    rng = random.Random(seed)
    topics = [{"name": f"{name}.t{i}", "id": oracle_scenarios._uuid(rng), "partitions": 24} for i in range(2)]
    names = [t["name"] for t in topics]
    group = f"{name}.{GROUP}"
    steps: list[dict[str, Any]] = []
    live: list[str] = []
    count = 0
    t = 0

    def join() -> None:
        nonlocal count
        steps.append({"at": t, "op": "consumer.join", "group": group, "member": f"m{count}",
                      "client_id": f"client-{count}", "topics": names})
        live.append(f"m{count}")
        count += 1

    for _ in range(members):
        t += rng.randint(50, 400)
        join()
    while t < duration_ms - 30_000:
        t += int(rng.expovariate(1 / mean_gap_ms)) + 200
        roll = rng.random()
        if roll < 0.5 or len(live) < 4:
            join()
        else:
            member = live.pop(rng.randrange(len(live)))
            steps.append({"at": t, "op": "consumer.leave" if roll < 0.85 else "consumer.stop", "group": group,
                          "member": member})
    return {"name": name, "partition": 0, "seed": seed, "start_ms": oracle_scenarios.START_MS,
            "end": duration_ms + 60_000, "broker": {}, "brokers": [{"id": 0, "rack": None}], "topics": topics,
            "group_configs": {group: {"consumer.assignment.interval.ms": str(interval_ms)}}, "steps": steps,
            "kafka_version": "4.4.0"}


def interval_histories(out: str | Path, seed: int, intervals: Sequence[int] = (0, 5000),
                       **scenario: Any) -> dict[int, interval_whatif.GroupHistory]:
    """The group's history at each interval, as the what-if reads it from the segment Kafka's coordinator wrote."""
    histories = {}
    for interval in intervals:
        folder = Path(out) / f"interval-{interval}"
        name = f"i{interval}"
        summaries = oracle.write_histories([churn_scenario(name, interval, seed, **scenario)], folder)
        if summaries[0].get("errors"):
            raise AssertionError(f"the oracle's clients failed: {summaries[0]}")
        records = list(read_segment(folder / "__consumer_offsets-0" / "00000000000000000000.log", 0))
        events = [e if isinstance(e, Event) else Event.from_dict(e) for e in replay_records(records).events]
        events = [e for e in events if e.group_id == f"{name}.{GROUP}"]
        histories[interval] = interval_whatif.group_history(
            events, end_time_ms=max(e.timestamp for e in events if e.timestamp is not None))
    return histories
