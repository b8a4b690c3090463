"""Decode throughput: pure core, vectorised core (one thread) and Spark path (local[2]) vs Kafka's own decoder.

Generates N rows (default 1,000,000): ~90% OffsetCommit records (value versions 0-4, mostly 3 and 4 as
modern brokers write them) and ~10% group records of every family (10% of them tombstones), built with ``encode_record`` from
schema-driven samples of realistic size (the golden vectors are fuzzing-sized, ~2.5 KB). Prints
records/s and the ratio to the reference:

* the reference, measured in the same run on the same records: Kafka's own decoder, ``kafka-dump-log
  --offsets-decoder --print-data-log`` (``DumpLogSegments`` of the default Kafka version, jars from ``make kafka``)
  over the rows written as uncompressed segments with ``SegmentWriter``, output to /dev/null; records per CPU
  second of its JVM (JIT and GC threads included), its start-up (timed on a one-batch segment) left out and
  printed apart (``--skip-kafka`` leaves it out and prints no ratios);
* pure core: ``decode_record`` and ``decode_columns`` over Python lists;
* Arrow batch, generic and vectorised: ``decode_batch_generic`` / ``decode_batch`` (what each mapInArrow call
  runs) over Arrow batches of ``--batch-rows`` rows, no Spark;
* Spark: parquet -> ``codec.spark.decode`` -> noop sink, vectorised (and generic with ``--spark-generic``):
  wall time, and records per CPU second of the JVM and the Python workers together (read from /proc for
  this process tree), best of two runs. The machine's load average is printed: other work shares the
  cores, so the CPU-second figures are the ones to compare with Kafka's.

    .venv/bin/python bench/decode.py [--rows 1000000] [--skip-spark] [--spark-generic] [--skip-kafka]

The figures go to ``bench/results/decode.jsonl`` (``bench/results.py``).
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from offsets_audit.codec import decode_record, encode_record  # noqa: E402
from offsets_audit.codec.spark import (  # noqa: E402
    COALESCE_ROWS, decode_batch, decode_batch_generic, decode_columns,
)

OFFSET_COMMIT_PREFIX = (1).to_bytes(2, "big")


def _sample(msg, fields, version, rng, depth=0):
    """A modest, realistic-sized value for every field of a schema struct (schema-driven, no per-record code)."""
    out = {}
    for f in fields:
        if version not in f.versions:
            continue
        if version in f.tagged_versions:
            continue  # tagged fields keep their default, as most records do
        out[f.name] = _sample_value(msg, f, f.element_type, version, rng, depth, f.is_array)
    return out


def _sample_value(msg, f, t, version, rng, depth, is_array):
    if is_array:
        return [_sample_value(msg, f, t, version, rng, depth + 1, False) for _ in range(rng.randrange(1, 4))]
    if t in ("int8", "int16"):
        return rng.randrange(0, 100)
    if t in ("int32", "uint16"):
        return rng.randrange(0, 30000)
    if t == "int64":
        return rng.randrange(1 << 40)
    if t == "bool":
        return rng.random() < 0.5
    if t == "uuid":
        return base64.urlsafe_b64encode(rng.randbytes(16))[:22].decode()
    if t == "string":
        return f"{f.name}-{rng.randrange(1000)}"
    if t == "bytes":
        return rng.randbytes(16)
    if t == "float64":
        return rng.random()
    return _sample(msg, msg.structs[t], version, rng, depth + 1)


def _group_records(rng, count):
    """Records of every non-offset family at their newest value version, plus tombstones."""
    from offsets_audit.codec import encode_consumer_protocol
    from offsets_audit.codec.schema import load_schemas

    records = []
    types = [spec for t, spec in sorted(load_schemas().record_types.items()) if t not in (0, 1)]
    for i in range(count):
        spec = types[i % len(types)]
        version = spec.value.valid_versions.highest
        key = _sample(spec.key, spec.key.fields, 0, rng)
        value = None if i % 10 == 9 else _sample(spec.value, spec.value.fields, version, rng)
        if spec.record_type == 2 and value is not None:
            value["protocolType"] = "consumer"
            for member in value["members"]:
                member["subscription"] = encode_consumer_protocol(
                    "subscription", 3, {"topics": ["orders-1", "orders-2"], "userData": None,
                                        "ownedPartitions": [], "generationId": 5, "rackId": None})
                member["assignment"] = encode_consumer_protocol(
                    "assignment", 3, {"assignedPartitions": [{"topic": "orders-1", "partitions": [0, 1, 2]}],
                                      "userData": None})
        records.append(encode_record(spec.record_type, key, value, None if value is None else version))
    return records


def build_rows(n: int, seed: int = 1) -> list[tuple[bytes, bytes | None]]:
    rng = random.Random(seed)
    group_records = _group_records(rng, 2000)
    groups = [f"consumer-group-{i}" for i in range(500)]
    topics = [f"orders-{i}" for i in range(40)]
    topic_ids = [base64.urlsafe_b64encode(rng.randbytes(16))[:22].decode() for _ in topics]
    commits = []
    for i in range(20_000):
        t = rng.randrange(len(topics))
        version = rng.choices((0, 1, 2, 3, 4), weights=(1, 1, 2, 30, 66))[0]
        value = {"offset": rng.randrange(1 << 40), "leaderEpoch": rng.randrange(50), "metadata": "",
                 "commitTimestamp": 1_760_000_000_000 + i, "expireTimestamp": -1,
                 "topicId": topic_ids[t] if rng.random() < 0.5 else "AAAAAAAAAAAAAAAAAAAAAA"}
        key = {"group": groups[rng.randrange(len(groups))], "topic": topics[t], "partition": rng.randrange(64)}
        commits.append(encode_record(1, key, value if rng.random() > 0.01 else None, version))
    # distinct encoded records are reused: the decoder does the same work for a repeated row
    return [commits[rng.randrange(len(commits))] if rng.random() < 0.9
            else group_records[rng.randrange(len(group_records))] for _ in range(n)]


def write_segments(rows, directory: Path, batch_records: int = 50) -> list[Path]:
    """``rows`` as uncompressed ``__consumer_offsets`` segments (one partition, batches of ``batch_records``)."""
    from offsets_audit.sources.segment_writer import SegmentWriter

    with SegmentWriter.create(directory, 0) as writer:
        for start in range(0, len(rows), batch_records):
            writer.append_batch(rows[start:start + batch_records], 1_760_000_000_000 + start)
    return [writer.path]


def bench_kafka(rows) -> dict:
    """Kafka's decoder over ``rows`` written as segments (``bench/read.py``'s ``kafka_decode``)."""
    from read import kafka_decode  # bench/ is this script's folder, first on sys.path

    with tempfile.TemporaryDirectory(prefix="decode-segments-") as tmp:
        return kafka_decode(write_segments(rows, Path(tmp)), len(rows))


def bench_pure(rows) -> tuple[float, float]:
    keys = [k for k, _ in rows]
    values = [v for _, v in rows]
    start, wall = time.process_time(), time.perf_counter()
    for key, value in rows:
        decode_record(key, value)
    decode_only = len(rows) / (time.process_time() - start)
    print(f"  (decode only, wall clock: {len(rows) / (time.perf_counter() - wall):,.0f} rec/s)")
    start, wall = time.process_time(), time.perf_counter()
    out = decode_columns(keys, values)
    with_json = len(rows) / (time.process_time() - start)
    print(f"  (decode + JSON, wall clock: {len(rows) / (time.perf_counter() - wall):,.0f} rec/s)")
    assert not any(out["error_code"])
    return decode_only, with_json


def arrow_batches(rows, batch_rows: int) -> list:
    import pyarrow as pa

    batches = []
    for start in range(0, len(rows), batch_rows):
        chunk = rows[start:start + batch_rows]
        batches.append(pa.RecordBatch.from_pydict({
            "key": pa.array([k for k, _ in chunk], pa.binary()),
            "value": pa.array([v for _, v in chunk], pa.binary()),
            "topic": pa.array(["__consumer_offsets"] * len(chunk)),
            "partition": pa.array([i % 50 for i in range(start, start + len(chunk))], pa.int32()),
            "offset": pa.array(range(start, start + len(chunk)), pa.int64()),
        }))
    return batches


def bench_batches(batches, decode) -> float:
    """Records/s of one decode function over Arrow batches (process CPU time, one thread)."""
    start = time.process_time()
    rows = 0
    for batch in batches:
        rows += decode(batch).num_rows
    return rows / (time.process_time() - start)


def process_tree_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of this process and its descendants (the JVM, the Python workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/comm") as f:
                    name = f.read().strip()
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / ticks, name)
    tree, grown = {os.getpid()}, True
    while grown:
        grown = False
        for pid, (parent, _, _) in stats.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grown = True
    out = {"jvm": 0.0, "python": 0.0}
    for pid in tree:
        if pid in stats:
            _, cpu, name = stats[pid]
            out["jvm" if "java" in name else "python"] += cpu
    return out


def bench_spark(rows, master: str, generic: bool = False, batch_rows: int = 10_000,
                runs: int = 2) -> tuple[float, dict]:
    """(records/s wall time, CPU seconds per side) of parquet -> decode -> noop; the run with least CPU."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from offsets_audit.codec.spark import decode, output_schema
    from offsets_audit.spark_session import get_spark

    def decode_generic(df):
        return df.mapInArrow(lambda batches: map(decode_batch_generic, batches), output_schema(df.schema))

    run = decode_generic if generic else decode
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rows.parquet")
        table = pa.table({
            "key": pa.array([k for k, _ in rows], pa.binary()),
            "value": pa.array([v for _, v in rows], pa.binary()),
            "topic": pa.array(["__consumer_offsets"] * len(rows)),
            "partition": pa.array([i % 50 for i in range(len(rows))], pa.int32()),
            "offset": pa.array(range(len(rows)), pa.int64()),
        })
        pq.write_table(table, path, row_group_size=100_000)
        spark = get_spark("offsets-audit-bench", master=master,
                          extra_conf={"spark.sql.execution.arrow.maxRecordsPerBatch": str(batch_rows),
                                      "spark.sql.files.maxPartitionBytes": str(16 << 20)})
        df = spark.read.parquet(path)
        run(df.limit(1000)).write.format("noop").mode("overwrite").save()  # warm the Python workers
        best = None
        for _ in range(runs):  # the first run also pays the JVM's JIT compilation
            cpu_before, start = process_tree_cpu(), time.perf_counter()
            run(df).write.format("noop").mode("overwrite").save()
            elapsed = time.perf_counter() - start
            cpu = {side: seconds - cpu_before[side] for side, seconds in process_tree_cpu().items()}
            if best is None or sum(cpu.values()) < sum(best[1].values()):
                best = (elapsed, cpu)
        spark.stop()
    return len(rows) / best[0], best[1]


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min) {five:.1f} (5 min) on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-rows", type=int, default=10_000, help="Arrow batch size (maxRecordsPerBatch)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--skip-kafka", action="store_true", help="leave out Kafka's decoder (the reference)")
    parser.add_argument("--spark-generic", action="store_true", help="also time Spark with the generic path")
    args = parser.parse_args()

    figures: dict = {"rows": args.rows}
    reference: float | None = None

    def line(label: str, rate: float, key: str | None = None) -> None:
        versus = f"  ({rate / reference:.2f}x Kafka per CPU second)" if reference else ""
        print(f"{label:<58} {rate:>10,.0f} rec/s{versus}")
        if key:
            figures[key] = round(rate)
            if reference:
                figures[key.replace("records_per_s", "vs_kafka")] = round(rate / reference, 3)

    start = time.perf_counter()
    rows = build_rows(args.rows)
    share = sum(1 for key, _ in rows if key[:2] == OFFSET_COMMIT_PREFIX) / len(rows)
    print(f"generated {len(rows):,} rows in {time.perf_counter() - start:.1f}s ({share:.0%} offset commits); "
          f"{_load()}")
    if not args.skip_kafka:
        kafka = bench_kafka(rows)
        figures.update(kafka)
        reference = kafka["kafka_dump_log_records_per_cpu_s"]
        print(f"Kafka's decoder (kafka-dump-log to /dev/null): {reference:,.0f} rec/s per JVM CPU second, "
              f"{kafka['kafka_dump_log_records_per_s']:,.0f} per wall second; JVM start-up "
              f"{kafka['kafka_jvm_startup_s']:.1f} s wall, {kafka['kafka_jvm_startup_cpu_s']:.1f} s CPU, left out; "
              f"{_load()}")
    print("pure and Arrow figures use process CPU time (one thread), Spark wall time and CPU seconds")
    decode_only, with_json = bench_pure(rows)
    line("pure core, decode_record only", decode_only, key="decode_record_records_per_s")
    line("pure core, decode_columns (decode + JSON text)", with_json, key="decode_columns_records_per_s")
    batches = arrow_batches(rows, args.batch_rows)
    generic = bench_batches(batches, decode_batch_generic)
    fast = bench_batches(batches, decode_batch)
    joined = bench_batches(arrow_batches(rows, COALESCE_ROWS), decode_batch)
    line(f"Arrow batches of {args.batch_rows:,}, generic path", generic, key="arrow_generic_records_per_s")
    line(f"Arrow batches of {args.batch_rows:,}, vectorised path", fast, key="arrow_vectorised_records_per_s")
    line(f"Arrow batches of {COALESCE_ROWS:,} (as decode() joins them), vectorised", joined,
         key="arrow_joined_vectorised_records_per_s")
    print(f"  vectorised / generic: {fast / generic:.2f}x, joined batches {joined / generic:.2f}x; {_load()}")
    if not args.skip_spark:
        cores = int(args.master[args.master.index("[") + 1:-1]) if args.master.startswith("local[") else 1
        modes = [("vectorised", False)] + ([("generic", True)] if args.spark_generic else [])
        for label, generic_mode in modes:
            rate, cpu = bench_spark(rows, args.master, generic=generic_mode, batch_rows=args.batch_rows)
            line(f"Spark {args.master} {label}, wall clock", rate, key=f"spark_{label}_records_per_s")
            line(f"  wall clock / {cores} cores", rate / cores, key=f"spark_{label}_per_core_records_per_s")
            line("  per CPU second (JVM + Python workers)", len(rows) / sum(cpu.values()),
                 key=f"spark_{label}_per_cpu_second_records_per_s")
            print(f"  CPU seconds: JVM {cpu['jvm']:.2f}, Python {cpu['python']:.2f}; {_load()}")
            figures[f"spark_{label}_cpu_s"] = {side: round(seconds, 2) for side, seconds in cpu.items()}
        figures["spark_master"] = args.master
    from results import record  # bench/ is this script's folder, first on sys.path

    record("decode", figures)


if __name__ == "__main__":
    main()
