"""Timings of the share ``simple`` and streams ``sticky`` assignor ports and the KIP-1101 metadata hash.

Run: ``.venv/bin/python bench/assignors_streams.py``. For the largest golden cases it prints the Python time
of one ``assign`` call (median of a few runs) next to Kafka's: its own assignor timed in the same run on the same
input (``bench/kafka_assign.py``: the oracle over Kafka's jars from ``make kafka``, the fastest of
``KAFKA_REPEAT`` calls' wall time), or, without Kafka's jars, the golden files' ``java_nanos`` (one timed call in
a warm JVM when the golden data was made, a rough reference); the output and the recorded ``kafka_reference``
say which. Then synthetic larger groups and hashing throughput.
"""

from __future__ import annotations

import json
import random
import statistics
import string
import sys
import time
from pathlib import Path

from offsets_audit.assignors import metadata_hash, simple, streams_sticky

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from golden_files import GOLDEN, open_golden  # noqa: E402  (tests/golden/, vendored)


#: Kafka's calls per case in the same-run reference (the first ones warm its JIT; the fastest is kept)
KAFKA_REPEAT = 10


def _kafka_nanos(assignor: str, cases: list[dict]) -> tuple[dict[str, float], str]:
    """case id -> Kafka's wall nanoseconds for one ``assign`` call, and where the figures come from: timed now
    through the oracle where Kafka's jars are available, else the golden files' ``java_nanos``."""
    import kafka_assign

    why_not = kafka_assign.available()
    if why_not is None:
        measured = kafka_assign.times(((c["case_id"], assignor, c["input"]) for c in cases), KAFKA_REPEAT)
        return ({case_id: wall * 1e9 for case_id, (wall, _) in measured.items()},
                f"same run: the oracle's assign() on each case, fastest of {KAFKA_REPEAT}")
    print(f"  ({why_not}: Kafka's figures are the golden files' java_nanos)")
    return {c["case_id"]: c["java_nanos"] for c in cases}, "stored: the golden files' java_nanos"


def _timed_by_kafka(cases: list[dict], kafka: dict[str, float]) -> list[dict]:
    """The cases Kafka's assignor answered (a golden case where it throws has no time on either side)."""
    return [c for c in cases if c["case_id"] in kafka]


def _median_seconds(fn, repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _cases(name: str) -> list[dict]:
    with open_golden(GOLDEN / "assignors" / f"{name}.jsonl") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _report(title: str, rows: list[tuple[str, str, float, float]]) -> dict:
    """Print the largest cases' times beside Kafka's; return them (ms) by case id."""
    print(f"\n{title}")
    print(f"  {'case':<34} {'size':<28} {'python ms':>10} {'java ms':>9} {'ratio':>7}")
    for case_id, size, seconds, java_nanos in rows:
        java_ms = java_nanos / 1e6
        ratio = seconds * 1e3 / java_ms if java_ms else float("nan")
        print(f"  {case_id:<34} {size:<28} {seconds * 1e3:>10.3f} {java_ms:>9.3f} {ratio:>7.1f}")
    return {case_id: {"ms": round(seconds * 1e3, 4), "kafka_ms": round(java_nanos / 1e6, 4)}
            for case_id, _, seconds, java_nanos in rows}


def bench_simple(top: int = 5) -> dict:
    kafka, reference = _kafka_nanos("simple", _cases("simple"))
    cases = _timed_by_kafka(_cases("simple"), kafka)
    sized = sorted(cases, key=lambda c: len(c["input"]["members"]) * sum(t["partitions"] for t in c["input"]["topics"]),
                   reverse=True)[:top]
    rows = []
    for case in sized:
        inp = case["input"]
        size = f"{len(inp['members'])} members, {sum(t['partitions'] for t in inp['topics'])} partitions"
        rows.append((case["case_id"], size, _median_seconds(lambda: simple.assign(inp)), kafka[case["case_id"]]))
    largest = _report("share SimpleAssignor, largest golden cases", rows)
    total_python = sum(_median_seconds(lambda c=c: simple.assign(c["input"]), 1) for c in cases)
    total_java = sum(kafka.values()) / 1e9
    print(f"  all {len(cases)} cases: python {total_python * 1e3:.1f} ms, java {total_java * 1e3:.1f} ms")
    return {"largest": largest, "cases": len(cases), "all_cases_ms": round(total_python * 1e3, 2),
            "kafka_all_cases_ms": round(total_java * 1e3, 2), "kafka_reference": reference}


def bench_streams_sticky(top: int = 5) -> dict:
    kafka, reference = _kafka_nanos("streams_sticky", _cases("streams_sticky"))
    cases = _timed_by_kafka(_cases("streams_sticky"), kafka)

    def tasks(inp):
        return sum(s["max_num_input_partitions"] for s in inp["subtopologies"])

    sized = sorted(cases, key=lambda c: len(c["input"]["members"]) * tasks(c["input"]), reverse=True)[:top]
    rows = []
    for case in sized:
        inp = case["input"]
        size = f"{len(inp['members'])} members, {tasks(inp)} tasks, sb={inp['configs']['num_standby_replicas']}"
        rows.append((case["case_id"], size, _median_seconds(lambda: streams_sticky.assign(inp)),
                     kafka[case["case_id"]]))
    largest = _report("streams StickyTaskAssignor, largest golden cases", rows)
    total_python = sum(_median_seconds(lambda c=c: streams_sticky.assign(c["input"]), 1) for c in cases)
    total_java = sum(kafka.values()) / 1e9
    print(f"  all {len(cases)} cases: python {total_python * 1e3:.1f} ms, java {total_java * 1e3:.1f} ms")
    return {"largest": largest, "cases": len(cases), "all_cases_ms": round(total_python * 1e3, 2),
            "kafka_all_cases_ms": round(total_java * 1e3, 2), "kafka_reference": reference}


def _uuid(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits + "-_") for _ in range(21)) + "A"


def bench_synthetic() -> dict:
    """Time synthetic larger groups (no Kafka reference); return ms by group."""
    out = {}
    rng = random.Random(7)
    print("\nsynthetic groups (python only)")
    for members, topics, partitions in ((100, 10, 50), (500, 20, 100)):
        topic_ids = [_uuid(rng) for _ in range(topics)]
        inp = {"subscription_type": "HOMOGENEOUS",
               "topics": [{"id": t, "name": f"t{i}", "partitions": partitions, "partition_racks": None}
                          for i, t in enumerate(topic_ids)],
               "members": [{"member_id": _uuid(rng), "instance_id": None, "rack_id": None,
                            "subscribed_topic_names": [f"t{i}" for i in range(topics)],
                            "subscribed_topic_ids": topic_ids, "current_assignment": {}} for _ in range(members)],
               "assignable_partitions": None}
        seconds = _median_seconds(lambda: simple.assign(inp), 3)
        print(f"  simple homogeneous  {members} members x {topics * partitions} partitions: {seconds * 1e3:.1f} ms")
        out[f"simple {members} members x {topics * partitions} partitions"] = round(seconds * 1e3, 2)
    for processes, threads, subtopologies, partitions in ((20, 4, 5, 32), (100, 4, 10, 64)):
        inp = {"configs": {"num_standby_replicas": 1, "rack_aware_assignment_tags": []},
               "subtopologies": [{"subtopology_id": str(s), "max_num_input_partitions": partitions, "stateful": s % 2 == 0}
                                 for s in range(subtopologies)],
               "members": [{"member_id": _uuid(rng), "instance_id": None, "rack_id": None, "process_id": f"p{p}",
                            "client_tags": {}, "active_tasks": {}, "standby_tasks": {}, "warmup_tasks": {},
                            "task_offsets": {}, "task_end_offsets": {}}
                           for p in range(processes) for _ in range(threads)]}
        seconds = _median_seconds(lambda: streams_sticky.assign(inp), 3)
        print(f"  streams sticky {processes}x{threads} members, {subtopologies * partitions} tasks: {seconds * 1e3:.1f} ms")
        out[f"sticky {processes}x{threads} members, {subtopologies * partitions} tasks"] = round(seconds * 1e3, 2)
    return out


def bench_metadata_hash() -> dict:
    with open_golden(GOLDEN / "metadata_hash" / "topic_hash.jsonl") as handle:
        topics = [json.loads(line) for line in handle if line.strip()]
    topics = [t for t in topics if not t.get("missing")]
    partitions = sum(t["partitions"] for t in topics)
    seconds = _median_seconds(lambda: [metadata_hash.compute_topic_hash(t["topic_id"], t["name"], t["partitions"],
                                                                        t["partition_racks"]) for t in topics])
    print(f"\nKIP-1101 topic hash: {len(topics)} topics / {partitions} partitions in {seconds * 1e3:.1f} ms "
          f"({partitions / seconds / 1e6:.2f} M partitions/s)")
    return {"topics": len(topics), "partitions": partitions, "partitions_per_s": round(partitions / seconds)}


if __name__ == "__main__":
    from results import record  # bench/ is this script's folder, first on sys.path

    record("assignors_streams", {"simple": bench_simple(), "streams_sticky": bench_streams_sticky(),
                                 "synthetic_ms": bench_synthetic(), "topic_hash": bench_metadata_hash()})
