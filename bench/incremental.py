"""Benchmark: incremental replay (Structured Streaming, state in a checkpoint) against the batch replay.

Simulates a history, then prints for the incremental run its micro-batches, seconds per query and records/s,
for a second run with no new data its fixed cost, and the batch replay's seconds on the same input.

    .venv/bin/python bench/incremental.py [--groups 40] [--hours 1] [--max-bytes 2000000]
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=40)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--max-bytes", type=int, default=2_000_000, help="maxBytesPerTrigger")
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from offsets_audit.codec.spark import decode, split
    from offsets_audit.config import load_config
    from offsets_audit.replay.incremental import run_incremental
    from offsets_audit.replay.spark import replay
    from offsets_audit.simulate import simulate
    from offsets_audit.sources import read
    from offsets_audit.spark_session import get_spark

    root = Path(tempfile.mkdtemp(prefix="bench-incremental-"))
    try:
        sim = simulate(root / "sim", groups=args.groups, hours=args.hours, seed=11, partitions=args.partitions,
                       formats=("segments",), segment_bytes=4 * 1024 * 1024)
        print(f"input: {sim['records']:,} records, {args.groups} groups, {args.partitions} partitions")
        spark = get_spark("bench-incremental")
        config = load_config(None, {
            "source": {"kind": "segments", "path": str(root / "sim" / "segments"),
                       "options": {"maxBytesPerTrigger": args.max_bytes}},
            "output": {"path": str(root / "out")}})
        started = time.perf_counter()
        summary = run_incremental(spark, config, str(root / "checkpoint"), progress=False)
        seconds = time.perf_counter() - started
        print(f"incremental: {len(summary['batches']['fold'])} micro-batches, {seconds:.1f} s "
              f"({summary['records']['read'] / seconds:,.0f} records/s), per stage {summary['timings_s']}")
        started = time.perf_counter()
        run_incremental(spark, config, str(root / "checkpoint"), progress=False)
        print(f"incremental, nothing new: {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        tables = replay(split(decode(read(spark, {"kind": "segments", "path": str(root / "sim" / "segments")})))[0])
        counts = {name: df.agg(F.count("*")).first()[0] for name, df in tables.as_dict().items()}
        print(f"batch replay (counting every table): {time.perf_counter() - started:.1f} s {counts}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
