"""End-to-end audit timing on local[2]: decode -> replay -> assignor audit -> findings, share per stage.

Simulates a history (default 300 groups over 3 hours on 50 partitions, every fault kind injected), then
runs the job's stages one after the other on a local[2] SparkSession, materializing each stage's
outputs (persist + noop write) so every stage is timed on its own, then writes the tables as Parquet.
Prints records/s end to end, the decode-only rate of the same input and their ratio, and the driver's
peak RSS (Python and JVM). Also times the pure audit core (``audit_events`` over the pure replay's
events) for events/s without Spark (``--skip-pure`` for large sizes).

    .venv/bin/python bench/audit.py [--groups 300] [--hours 3] [--workers 2] [--keep DIR]
"""
from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def materialize(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=300)
    parser.add_argument("--hours", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", help="simulate into this folder and keep it")
    parser.add_argument("--skip-pure", action="store_true", help="skip the pure-core figure (large sizes)")
    args = parser.parse_args()

    from offsets_audit.audit import audit_events
    from offsets_audit.audit import spark as audit_spark
    from offsets_audit.codec import spark as codec_spark
    from offsets_audit.config import load_config
    from offsets_audit.replay import replay_records
    from offsets_audit.replay import spark as replay_spark
    from offsets_audit.simulate import FAULT_KINDS, simulate
    from offsets_audit.sources import read
    from offsets_audit.sources.segments import list_segments, read_segment
    from offsets_audit.spark_session import get_spark

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-audit-"))
    t = time.perf_counter()
    info = simulate(root, groups=args.groups, hours=args.hours, seed=args.seed, partitions=50,
                    faults=list(FAULT_KINDS), formats=("segments",), workers=args.workers)
    print(f"simulated {info['records']:,} records in {info['batches']:,} batches, {args.groups} groups, "
          f"{args.hours} h: {time.perf_counter() - t:.1f} s")

    spark = get_spark("bench-audit", master="local[2]",
                      extra_conf={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"})
    # Group configs are not records: the simulator reports the per-group assignment intervals it used.
    config = load_config(overrides={"broker": {"group_overrides": info.get("group_overrides") or {}}})
    timings: dict[str, float] = {}

    def stage(name, fn):
        start = time.perf_counter()
        result = fn()
        timings[name] = time.perf_counter() - start
        print(f"  {name:<16} {timings[name]:7.1f} s", flush=True)
        return result

    def decode():
        decoded_all = codec_spark.decode(read(spark, {"kind": "segments", "path": str(root / "segments")})).persist()
        materialize(decoded_all)
        return codec_spark.split(decoded_all)[0]

    decoded = stage("read+decode", decode)

    def replay():
        tables = replay_spark.replay(decoded)
        for name in ("offset_commits", "group_state", "members", "group_events", "target_assignments", "offsets"):
            tables[name] = tables[name].persist()
            materialize(tables[name])
        return tables

    tables = stage("replay", replay)

    def assignor_audit():
        from offsets_audit.assignors import spark as assignor_spark

        df = assignor_spark.audit(tables["target_assignments"], None, offsets=tables.get("offsets")).persist()
        materialize(df)
        return df

    tables["assignor_audit"] = stage("assignor-audit", assignor_audit)

    def audit():
        out = audit_spark.audit(tables, config)
        for name in out:
            out[name] = out[name].persist()
            materialize(out[name])
        return out

    out = stage("audit", audit)

    def write():
        target = root / "tables"
        for name, df in [*tables.items(), *out.items()]:
            if name != "offset_commits" and df is not None:
                df.write.mode("overwrite").parquet(str(target / name))

    stage("write", write)
    total = sum(timings.values())
    records = info["records"]
    print(f"total {total:.1f} s for {records:,} records = {records / total:,.0f} records/s end to end")
    for name, seconds in timings.items():
        print(f"  {name:<16} {100 * seconds / total:5.1f} %")

    def decode_only():
        df = codec_spark.decode(read(spark, {"kind": "segments", "path": str(root / "segments")}))
        materialize(df)

    stage("decode-only", decode_only)
    print(f"decode only {records / timings['decode-only']:,.0f} records/s; end to end / decode-only = "
          f"{timings['decode-only'] / total:.3f}")
    jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    print(f"peak driver RSS: python {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB, "
          f"JVM {_peak_rss_mb(jvm_pid):,.0f} MB")
    counts = {r["rule"]: r["n"] for r in out["findings"].groupBy("rule").count().withColumnRenamed("count", "n").collect()}
    print("findings:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))

    if args.skip_pure:
        spark.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        return
    recs = [r for path, part in list_segments(root / "segments") for r in read_segment(path, part)]
    events = replay_records(recs).events
    start = time.perf_counter()
    findings, rebalances = audit_events(events, config)
    seconds = time.perf_counter() - start
    print(f"pure audit core: {len(events):,} events in {seconds:.2f} s = {len(events) / seconds:,.0f} events/s "
          f"({len(findings)} findings, {len(rebalances)} rebalances)")
    spark.stop()
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
