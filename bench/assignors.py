"""Assignor re-runs at Kafka's scale: 1,000 members, 1,000 topics, 50,000 partitions, our time next to Kafka's.

Run: ``.venv/bin/python bench/assignors.py`` (all of it: large generated cases for ``uniform``, ``range`` and the
share ``simple`` assignor, then the golden cases), or ``bench/assignors.py large`` / ``golden`` for one part;
``--repeat N`` (default 3, best of N, as Kafka's hidden-case figures were taken). Streams ``sticky`` has ``bench/assignors_streams.py``.

The large cases are generated here (seeded, no data files): 1,000 members, 1,000 topics of 50 partitions,

* ``homogeneous``: everyone subscribes to every topic;
* ``heterogeneous``: member ``i`` subscribes to the topics whose index modulo 4 is ``i % 4`` or ``(i + 1) % 4``
  (500 subscribers per topic, no two neighbouring classes alike);
* ``racks``: heterogeneous, every partition on 2 of 3 racks, members spread over the racks (rack-aware uniform);

each as step 1 (empty current assignments) and step 2 (step 1's result as the current assignment, 5 % of the
members replaced by new ones, which is what a rolling restart looks like). Timed: ``offsets_audit.assignors.run``
(parsing the case and building the result dicts included, as in the Spark job), best of ``--repeat``.

Input mode (``--input``): ``job`` (default) hands ``run`` each case as the job's edge builds it. The Spark edge
(``assignors/spark.py``) passes a group's ``target_assignments`` rows to ``inputs.reconstruct_group``, which
``json.loads`` their ``members`` and ``previous_target`` columns and builds the input with
``inputs.consumer_case_input``; so here each case is written as those JSON columns (plus the topic list, as the
metadata snapshot), decoded and rebuilt by that same function before every repetition, outside the clocks (the
edge times nothing; decoding is the replay's cost, and Kafka's figure is ``assign()`` alone). In that input
member ids, subscribed names and current-assignment keys are separate ``str`` objects per member, while the
subscribed topic ids are the topic list's own objects (``consumer_case_input`` looks each name up there). The
share assignor's input keeps the case's ``assignable_partitions`` (``None``, as Kafka's reference was fed)
instead of the job's initialized-topics map. ``json`` decodes the whole case from its JSON text (every id a
separate ``str``, a harder input than the job's), ``shared`` times the generated case itself (members share
the topic list's ``str`` objects; the figures before these modes existed). Every mode's result is checked, once,
outside the clocks, to hand the same partitions to the same members in the same amounts as the generated case's
(``same_problem``: tie-breaks follow the rebuilt iteration orders).

Kafka's figures (``--kafka``) are, by default, its own assignors timed in the same run on the very cases generated
here: the oracle's ``assign`` (``bench/kafka_assign.py``: Kafka's group-coordinator jars from ``make kafka``, a JVM
started as a broker's, ``KAFKA_REPEAT`` calls per case, the fastest kept), fed the generated case itself. Without
Kafka's jars, or with ``--kafka stored``, the stored ``bench/reference/assignors_kafka.jsonl`` (the same cases,
timed once the same way) is printed instead, and where it lacks a case, ``KAFKA_HIDDEN_CASES`` (Kafka's range on
hidden Kafka-made cases of 950-1,000 members and 1,000 topics); the output and the recorded ``kafka_reference`` say
which. Per golden case, ``java_nanos`` of the golden files is one timed call in a warm JVM (rough: JIT warm-up
shows in early cases).

Ours is timed as wall and as the calling thread's CPU (``time.thread_time``, as Kafka's ``ThreadMXBean`` figure);
the medians per assignor and over all cases are printed with the load average. Figures on a shared 2-core machine
move with its load (wall most); thread CPU against thread CPU is the steadier comparison.
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

from offsets_audit.assignors import run
from offsets_audit.assignors.inputs import consumer_case_input, parse_row

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from golden_files import GOLDEN, open_golden  # noqa: E402  (tests/golden/, vendored)


def _samples(fn, repeat: int) -> list:
    return [wall for wall, _ in _wall_and_cpu(fn, repeat)]


def _wall_and_cpu(fn, repeat: int) -> list:
    """(wall seconds, calling thread's CPU seconds) per call of ``fn()``.

    Thread CPU (``time.thread_time``) is what Kafka's figures set beside it (``ThreadMXBean`` of the caller) and is
    steadier than wall time on a loaded shared machine. The result is freed after the clocks stop: Kafka's timing
    leaves its garbage to the JVM's collector threads too.
    """
    samples = []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.thread_time()
        result = fn()
        samples.append((time.perf_counter() - wall, time.thread_time() - cpu))
        del result
    return samples


def _time(fn, repeat: int) -> float:
    """Median wall time of ``fn()`` in seconds."""
    return statistics.median(_samples(fn, repeat))


def _golden(assignor: str, largest: int = 5) -> dict:
    """Time the golden cases of ``assignor``; returns the medians, ours and Kafka's (``java_nanos``)."""
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
    return {"cases": len(cases), "median_ms": round(python_median, 4), "kafka_median_ms": round(java_median, 4)}


def _uuid(rng: random.Random) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(16)).decode().rstrip("=")


RACKS = ("rack-a", "rack-b", "rack-c")


def synthetic_case(members: int = 1000, topics: int = 1000, partitions: int = 50_000,
                   heterogeneous: bool = True, racks: bool = False, seed: int = 7) -> dict:
    """Step 1 of a large group (see the module docstring): topics of equal size, empty current assignments."""
    rng = random.Random(seed)
    per_topic = partitions // topics
    topic_list = []
    for t in range(topics):
        partition_racks = None
        if racks:
            partition_racks = [sorted(rng.sample(RACKS, 2)) for _ in range(per_topic)]
        topic_list.append({"id": _uuid(rng), "name": f"topic-{t}", "partitions": per_topic,
                           "partition_racks": partition_racks})
    member_list = [_member(rng, m, topic_list, heterogeneous, racks) for m in range(members)]
    return {"subscription_type": "HETEROGENEOUS" if heterogeneous else "HOMOGENEOUS",
            "topics": topic_list, "members": member_list, "assignable_partitions": None}


def _member(rng: random.Random, m: int, topic_list: list, heterogeneous: bool, racks: bool) -> dict:
    if heterogeneous:
        chosen = [t for i, t in enumerate(topic_list) if i % 4 in (m % 4, (m + 1) % 4)]
    else:
        chosen = topic_list
    return {"member_id": _uuid(rng), "instance_id": None, "rack_id": RACKS[m % 3] if racks else None,
            "subscribed_topic_names": [t["name"] for t in chosen], "subscribed_topic_ids": [t["id"] for t in chosen],
            "current_assignment": {}}


def next_step(case: dict, result: dict, replaced: float = 0.05, seed: int = 11) -> dict:
    """Step 2: the previous result becomes the current assignment and ``replaced`` of the members are swapped for
    new ones (same subscriptions and racks, new ids, nothing assigned)."""
    rng = random.Random(seed)
    members = [dict(m, current_assignment=result["members"].get(m["member_id"], {})) for m in case["members"]]
    for index in rng.sample(range(len(members)), int(len(members) * replaced)):
        members[index] = dict(members[index], member_id=_uuid(rng), current_assignment={})
    return dict(case, members=members)


# Kafka's time on hidden Kafka-made cases of 950-1,000 members and 1,000 topics (seconds, low-high).
KAFKA_HIDDEN_CASES = {
    ("simple", "homogeneous"): (0.20, 0.27),
    ("simple", "heterogeneous"): (0.51, 0.78),
    ("range", None): (0.016, 0.125),
    ("uniform", None): (0.005, 0.380),
}

#: Kafka's calls per case in the same-run reference (the first ones warm its JIT; the fastest is kept)
KAFKA_REPEAT = 10

SHAPES = (("homogeneous", False, False), ("heterogeneous", True, False), ("racks", True, True))
ASSIGNORS = {"uniform": ("homogeneous", "heterogeneous", "racks"), "range": ("homogeneous", "heterogeneous"),
             "simple": ("homogeneous", "heterogeneous")}


def _kafka_reference() -> dict:
    """case -> (Kafka wall seconds, Kafka thread CPU seconds or None) from bench/reference/assignors_kafka.jsonl."""
    path = Path(__file__).resolve().parent / "reference" / "assignors_kafka.jsonl"
    if not path.exists():
        return {}
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return {row["case"]: (row["kafka_seconds"], row.get("kafka_thread_cpu_seconds")) for row in rows}


def _job_columns(case: dict, share: bool) -> dict:
    """The case as the JSON text the job's edge reads: a ``target_assignments`` row's ``members`` and
    ``previous_target`` columns, and the topic list standing for the metadata snapshot."""
    members = [{"member_id": m["member_id"], "instance_id": m["instance_id"], "rack_id": m["rack_id"],
                "subscribed_topic_names": m["subscribed_topic_names"]} for m in case["members"]]
    previous = {m["member_id"]: m["current_assignment"] for m in case["members"] if m["current_assignment"]}
    return {"group_type": "share" if share else "consumer", "members": json.dumps(members),
            "previous_target": json.dumps(previous), "topics": json.dumps(case["topics"])}


def job_input(columns: dict, case: dict) -> dict:
    """``run``'s input as ``inputs.reconstruct_group`` builds it from ``_job_columns`` (``parse_row`` decodes
    the JSON columns, ``consumer_case_input`` rebuilds the case)."""
    row = parse_row({"group_type": columns["group_type"], "members": columns["members"],
                     "previous_target": columns["previous_target"]})
    topics_by_name = {t["name"]: t for t in json.loads(columns["topics"])}
    built = consumer_case_input(row, topics_by_name, row["previous_target"] or {})
    if built["subscription_type"] != case["subscription_type"]:
        raise AssertionError(f"rebuilt subscription type {built['subscription_type']}, generated "
                             f"{case['subscription_type']}")
    built["assignable_partitions"] = case["assignable_partitions"]  # Kafka's reference was fed None
    return built


def _inputs(assignor: str, case: dict, input_mode: str):
    """A function making a fresh input for one repetition in ``input_mode``."""
    if input_mode == "shared":
        return lambda: case
    if input_mode == "json":
        text = json.dumps(case)
        return lambda: json.loads(text)
    columns = _job_columns(case, share=assignor == "simple")
    return lambda: job_input(columns, case)


def _shape(result: dict) -> tuple:
    members = result.get("members") or {}
    pairs = sorted((topic, p) for owned in members.values() for topic, parts in owned.items() for p in parts)
    counts = sorted(sum(len(parts) for parts in owned.values()) for owned in members.values())
    return result.get("error"), sorted(members), pairs, counts


def same_problem(ours: dict, generated: dict) -> bool:
    """Whether two results of one case, built two ways, hand the same partitions to the same members in the same
    amounts. Which member gets which partition may differ: the job's input rebuilds the coordinator's iteration
    orders (member table, subscribed topic ids), which the assignors' tie-breaks follow, while the generated case
    keeps its lists' order."""
    return _shape(ours) == _shape(generated)


def _fresh_input_samples(assignor: str, make_input, repeat: int) -> list:
    """``_wall_and_cpu`` of ``run`` on a fresh ``make_input()`` per repetition (made outside the clocks)."""
    samples = []
    for _ in range(repeat):
        samples.extend(_wall_and_cpu(functools.partial(run, assignor, make_input()), 1))
    return samples


INPUT_MODES = {
    "job": "each case rebuilt as the job's edge builds it (inputs.consumer_case_input over its decoded JSON columns)",
    "json": "each case decoded whole from its JSON text (every id a separate str)",
    "shared": "the generated case itself (str objects shared by members)",
}


def bench_large(repeat: int = 3, input_mode: str = "job", figures: dict | None = None, kafka: str = "same-run"
                ) -> None:
    """Time the large cases; fills ``figures`` with each case's times and the median ratios to Kafka's, Kafka's
    timed in the same run (``kafka="same-run"``, where its jars are available) or the stored figures."""
    figures = {} if figures is None else figures
    cases: dict = figures.setdefault("large_cases", {})
    figures["input_mode"] = input_mode
    import kafka_assign

    why_not = None if kafka == "stored" else kafka_assign.available()
    same_run = kafka == "same-run" and why_not is None
    measured = {} if same_run else _kafka_reference()
    figures["kafka_reference"] = (f"same run: the oracle's assign() on each generated case, fastest of {KAFKA_REPEAT}"
                                  if same_run else "stored: bench/reference/assignors_kafka.jsonl")
    print(f"Large generated cases: 1,000 members / 1,000 topics / 50,000 partitions; best of {repeat} "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"  input ({input_mode}): {INPUT_MODES[input_mode]}")
    if same_run:
        print(f"  Kafka: its own assignors on each generated case in this run (the oracle, fastest of {KAFKA_REPEAT}"
              " calls: wall, and the calling thread's CPU, which leaves out the JVM's GC threads)")
    else:
        print(f"  Kafka: {why_not + '; ' if why_not else ''}stored figures, bench/reference/assignors_kafka.jsonl, or"
              " else Kafka's range for its hidden cases")
    print(f"  {'case':<32} {'ours wall':>10} {'ours CPU':>10} {'Kafka wall':>11} {'Kafka CPU':>10}"
          f"  {'wall/wall':>9} {'CPU/CPU':>8}")
    wall_ratios: dict = {}
    cpu_ratios: dict = {}
    for name, assignor, case in large_cases():
        make_input = _inputs(assignor, case, input_mode)
        if input_mode != "shared" and not same_problem(run(assignor, make_input()), run(assignor, case)):
            raise AssertionError(f"{name}: the {input_mode} input gives another result than the generated case")
        samples = _fresh_input_samples(assignor, make_input, repeat)
        wall, cpu = min(w for w, _ in samples), min(c for _, c in samples)
        if same_run:
            measured.update(kafka_assign.times([(name, assignor, case)], KAFKA_REPEAT))
        kafka_wall, kafka_cpu = measured.get(name, (None, None))
        cases[name] = {"wall_ms": round(wall * 1e3, 2), "cpu_ms": round(cpu * 1e3, 2),
                       "kafka_wall_ms": None if kafka_wall is None else round(kafka_wall * 1e3, 2),
                       "kafka_cpu_ms": None if not kafka_cpu else round(kafka_cpu * 1e3, 2)}
        if kafka_wall is None:
            shape = name.split()[1]
            low, high = KAFKA_HIDDEN_CASES.get((assignor, shape), KAFKA_HIDDEN_CASES.get((assignor, None)))
            print(f"  {name:<32} {wall * 1e3:7.1f} ms {cpu * 1e3:7.1f} ms  Kafka (hidden cases): "
                  f"{low * 1e3:.0f}-{high * 1e3:.0f} ms")
            continue
        wall_ratios.setdefault(assignor, []).append(wall / kafka_wall)
        cpu_text, cpu_ratio = "", ""
        if kafka_cpu:
            cpu_ratios.setdefault(assignor, []).append(cpu / kafka_cpu)
            cpu_text, cpu_ratio = f"{kafka_cpu * 1e3:7.1f} ms", f"{cpu / kafka_cpu:7.2f}x"
        print(f"  {name:<32} {wall * 1e3:7.1f} ms {cpu * 1e3:7.1f} ms {kafka_wall * 1e3:8.1f} ms {cpu_text:>10}"
              f"  {wall / kafka_wall:8.2f}x {cpu_ratio:>8}")
    for assignor, ratios in wall_ratios.items():
        cpu_part = f", CPU/CPU {statistics.median(cpu_ratios[assignor]):.2f}x" if assignor in cpu_ratios else ""
        figures[f"{assignor}_median_wall_vs_kafka"] = round(statistics.median(ratios), 3)
        if assignor in cpu_ratios:
            figures[f"{assignor}_median_cpu_vs_kafka"] = round(statistics.median(cpu_ratios[assignor]), 3)
        print(f"  {assignor} median ratio: wall/wall {statistics.median(ratios):.2f}x{cpu_part}")
    if wall_ratios:
        every_cpu = [r for ratios in cpu_ratios.values() for r in ratios]
        every_wall = [r for ratios in wall_ratios.values() for r in ratios]
        figures["median_wall_vs_kafka"] = round(statistics.median(every_wall), 3)
        if every_cpu:
            figures["median_cpu_vs_kafka"] = round(statistics.median(every_cpu), 3)
        print(f"  all cases median ratio: wall/wall "
              f"{statistics.median(r for ratios in wall_ratios.values() for r in ratios):.2f}x"
              + (f", CPU/CPU {statistics.median(every_cpu):.2f}x" if every_cpu else ""))
    print(f"  load average after: {os.getloadavg()[0]:.1f}")


def large_cases():
    """(name, assignor, case) for every large case ``bench_large`` times, in its order."""
    for shape, heterogeneous, racks in SHAPES:
        step1 = synthetic_case(heterogeneous=heterogeneous, racks=racks)
        for assignor, shapes in ASSIGNORS.items():
            if shape in shapes:
                step2 = next_step(step1, run(assignor, step1))
                yield f"{assignor} {shape} step 1", assignor, step1
                yield f"{assignor} {shape} step 2", assignor, step2


def write_cases(path: str) -> None:
    """The large cases as JSON Lines (``case``, ``assignor``, ``input``), for timing Kafka's own assignors on them."""
    with open(path, "w", encoding="utf-8") as handle:
        for name, assignor, case in large_cases():
            handle.write(json.dumps({"case": name, "assignor": assignor, "input": case}) + "\n")


def bench_golden(figures: dict | None = None) -> None:
    """Time every golden case of the consumer and share assignors; fills ``figures["golden"]``."""
    golden = ({} if figures is None else figures).setdefault("golden", {})
    for assignor in ("uniform", "range", "simple"):
        golden[assignor] = _golden(assignor)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("parts", nargs="*", metavar="large|golden", help="default: both")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--input", choices=tuple(INPUT_MODES), default="job",
                        help="; ".join(f"{mode}: {text}" for mode, text in INPUT_MODES.items()) + " (default: job)")
    parser.add_argument("--kafka", choices=("same-run", "stored"), default="same-run",
                        help="Kafka's figures: its assignors timed in this run through the oracle (default; needs "
                             "`make kafka`, else the stored figures are used and the output says so), or the stored "
                             "bench/reference/assignors_kafka.jsonl")
    parser.add_argument("--write-cases", metavar="PATH",
                        help="write the large cases as JSON Lines (to time Kafka's assignors on them) and stop")
    args = parser.parse_args()
    if args.write_cases:
        write_cases(args.write_cases)
        return
    parts = args.parts or ["large", "golden"]
    if set(parts) - {"large", "golden"}:
        parser.error(f"unknown part(s) {sorted(set(parts) - {'large', 'golden'})}: use large and/or golden")
    figures: dict = {"repeat": args.repeat}
    if "large" in parts:
        bench_large(args.repeat, args.input, figures, args.kafka)
    if "golden" in parts:
        bench_golden(figures)
    from results import record  # bench/ is this script's folder, first on sys.path

    record("assignors", figures)


if __name__ == "__main__":
    main()
