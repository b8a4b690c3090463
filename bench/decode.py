"""Decode throughput: pure core (one thread) and Spark path (local[2]) vs Kafka's Java decoder.

Generates N rows (default 1,000,000): ~90% OffsetCommit records (value versions 0-4, mostly 3 and 4 as
modern brokers write them) and ~10% group records of every family (10% of them tombstones), built with ``encode_record`` from
schema-driven samples of realistic size (the golden vectors are fuzzing-sized, ~2.5 KB). Prints
records/s and the ratio to /work/shared/bench/java_decode.json.

    .venv/bin/python bench/decode.py [--rows 1000000] [--skip-spark]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from offsets_audit.codec import decode_record, encode_record  # noqa: E402
from offsets_audit.codec.spark import decode_columns  # noqa: E402

JAVA_REFERENCE = Path(os.environ.get("OFFSETS_AUDIT_SHARED", REPO.parent / "shared")) / "bench" / "java_decode.json"
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


def bench_spark(rows, master: str) -> float:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from offsets_audit.codec.spark import decode
    from offsets_audit.spark_session import get_spark

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
                          extra_conf={"spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
                                      "spark.sql.files.maxPartitionBytes": str(16 << 20)})
        df = spark.read.parquet(path)
        decode(df.limit(1000)).write.format("noop").mode("overwrite").save()  # warm the Python workers
        start = time.perf_counter()
        decode(df).write.format("noop").mode("overwrite").save()
        elapsed = time.perf_counter() - start
        spark.stop()
    return len(rows) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-spark", action="store_true")
    args = parser.parse_args()

    java = json.loads(JAVA_REFERENCE.read_text())["records_per_second_one_thread"]["to_dev_null"]
    java_mid = sum(java) / len(java)
    start = time.perf_counter()
    rows = build_rows(args.rows)
    share = sum(1 for key, _ in rows if key[:2] == OFFSET_COMMIT_PREFIX) / len(rows)
    print(f"generated {len(rows):,} rows in {time.perf_counter() - start:.1f}s ({share:.0%} offset commits)")
    decode_only, with_json = bench_pure(rows)
    print("pure core figures use process CPU time (the machine is shared); Spark is wall time")
    print(f"pure core, one thread, decode only:          {decode_only:>10,.0f} rec/s  "
          f"({decode_only / java_mid:.2f}x Java {java[0]:,}-{java[1]:,})")
    print(f"pure core, one thread, decode + JSON text:   {with_json:>10,.0f} rec/s  "
          f"({with_json / java_mid:.2f}x Java)")
    if not args.skip_spark:
        spark_rate = bench_spark(rows, args.master)
        print(f"Spark {args.master}, parquet -> decode -> noop: {spark_rate:>10,.0f} rec/s  "
              f"({spark_rate / java_mid:.2f}x Java one thread)")


if __name__ == "__main__":
    main()
