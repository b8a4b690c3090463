"""Assignor timings: Python per golden case vs Kafka's own ``java_nanos``, and large synthetic groups.

Run: ``.venv/bin/python bench/assignors.py`` (every ``bench_*`` function here runs in turn).
Kafka's reference for a 1,000-member / 1,000-topic / 50,000-partition heterogeneous uniform assignment is
15-20 ms (its JMH benchmark); ``java_nanos`` in the golden files is a single timed call in a warm JVM.

Recorded uniform figures (2 shared cores, load average ~10, best of 7; same process, before = the builders as of
commit 06023ac, after = the vectorised ``uniform.run``; results identical):

=====================================  ===========  ==========  ===================================
synthetic 1000 x 1000 x 50000          before       after       after, excluding parse_group_spec
=====================================  ===========  ==========  ===================================
heterogeneous, from empty              250-450 ms   52-56 ms    ~40-50 ms
heterogeneous, steady state            370-650 ms   62-100 ms   ~45 ms
homogeneous, from empty                55-85 ms     30-42 ms    ~5 ms
homogeneous, steady state              50-75 ms     31-33 ms    ~10 ms
=====================================  ===========  ==========  ===================================

``parse_group_spec`` (copying 0.5-1 million subscribed topic names and ids) is now most of a homogeneous run.
Golden cases (at most 16 members / 150 partitions) stay on the reference builders: median 0.1 ms.
"""

from __future__ import annotations

import base64
import json
import random
import statistics
import sys
import time
from pathlib import Path

from offsets_audit.assignors import run
from offsets_audit.assignors.common import parse_group_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from golden_files import GOLDEN, open_golden  # noqa: E402  (tests/golden/, vendored)


def _samples(fn, repeat: int) -> list:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def _time(fn, repeat: int) -> float:
    """Median wall time of ``fn()`` in seconds."""
    return statistics.median(_samples(fn, repeat))


def _golden(assignor: str, largest: int = 5) -> None:
    path = GOLDEN / "assignors" / f"{assignor}.jsonl"
    with open_golden(path) as handle:
        cases = [json.loads(line) for line in handle]
    total_python = 0.0
    rows = []
    for case in cases:
        seconds = _time(lambda: run(assignor, case["input"]), 5)
        total_python += seconds
        partitions = sum(t["partitions"] for t in case["input"]["topics"])
        rows.append((partitions * max(len(case["input"]["members"]), 1), case, seconds))
    java_median = statistics.median(c["java_nanos"] for c in cases) / 1e6
    python_median = statistics.median(r[2] for r in rows) * 1e3
    print(f"{assignor}: {len(cases)} golden cases, median python {python_median:.3f} ms vs java {java_median:.3f} ms")
    for _, case, seconds in sorted(rows, key=lambda r: r[0], reverse=True)[:largest]:
        inp = case["input"]
        print(f"  {case['case_id']:<34} {inp['subscription_type']:<13} members={len(inp['members']):<3} "
              f"partitions={sum(t['partitions'] for t in inp['topics']):<4} python {seconds * 1e3:7.3f} ms  "
              f"java {case['java_nanos'] / 1e6:7.3f} ms")


def _topic_id(rng: random.Random) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=")


def synthetic_case(members: int = 1000, topics: int = 1000, partitions: int = 50_000,
                   heterogeneous: bool = True, seed: int = 7) -> dict:
    """A large group: topics of equal size; heterogeneous members subscribe to half the topics each.

    Member ``i`` subscribes to the topics whose index modulo 4 is ``i % 4`` or ``(i + 1) % 4``, so every topic
    has 500 subscribers and no two neighbouring member classes share all topics.
    """
    rng = random.Random(seed)
    per_topic = partitions // topics
    topic_list = [{"id": _topic_id(rng), "name": f"topic-{t}", "partitions": per_topic, "partition_racks": None}
                  for t in range(topics)]
    member_list = []
    for m in range(members):
        if heterogeneous:
            chosen = [t for t in topic_list if int(t["name"][6:]) % 4 in (m % 4, (m + 1) % 4)]
        else:
            chosen = topic_list
        member_list.append({"member_id": base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("="),
                            "instance_id": None, "rack_id": None,
                            "subscribed_topic_names": [t["name"] for t in chosen],
                            "subscribed_topic_ids": [t["id"] for t in chosen],
                            "current_assignment": {}})
    return {"subscription_type": "HETEROGENEOUS" if heterogeneous else "HOMOGENEOUS",
            "topics": topic_list, "members": member_list, "assignable_partitions": None}


def _with_current(case: dict, result: dict) -> dict:
    """The next rebalance: the previous result becomes the current assignment (steady state)."""
    members = [dict(m, current_assignment=result["members"].get(m["member_id"], {})) for m in case["members"]]
    return dict(case, members=members)


def _synthetic(assignor: str, heterogeneous: bool, repeat: int = 7) -> None:
    """Best and median of ``repeat`` runs (the machine is shared, so the best is the steadier figure), and how
    much of it is parsing the input into a ``GroupSpec`` (Kafka's JMH figure excludes building its spec)."""
    case = synthetic_case(heterogeneous=heterogeneous)
    kind = "heterogeneous" if heterogeneous else "homogeneous"
    steady = _with_current(case, run(assignor, case))
    print(f"  synthetic {kind} 1000 members / 1000 topics / 50000 partitions:")
    for label, group_input in (("from empty", case), ("steady state", steady)):
        runs = _samples(lambda: run(assignor, group_input), repeat)
        parses = _samples(lambda: parse_group_spec(group_input), repeat)
        print(f"    {label:<12} run best {min(runs) * 1e3:7.1f} ms  median {statistics.median(runs) * 1e3:7.1f} ms"
              f"  (parse_group_spec best {min(parses) * 1e3:6.1f} ms)")


def bench_uniform() -> None:
    _golden("uniform")
    _synthetic("uniform", heterogeneous=True)
    _synthetic("uniform", heterogeneous=False)


def bench_range() -> None:
    _golden("range")
    _synthetic("range", heterogeneous=True)
    _synthetic("range", heterogeneous=False)


def main() -> None:
    for name, fn in list(globals().items()):
        if name.startswith("bench_") and callable(fn):
            fn()


if __name__ == "__main__":
    main()
