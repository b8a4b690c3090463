"""Benchmark: an incremental run over 1 % new records on top of a large history, next to one batch run.

Simulates a history, cuts every partition's log at 99 % of its batches (the active segments cut mid-way, as a
broker leaves them), runs the incremental audit over that (the history), grows the log to 100 % and times the
incremental run over the 1 % that is new (replay + audit + assignor re-runs + tables written); then one batch
run (``job.run_job``) over the whole log, and an incremental run with nothing new (its fixed cost). Prints the
records, micro-batches and per-stage seconds of each.

    .venv/bin/python bench/incremental.py [--groups 40] [--hours 1] [--partitions 10] [--new 0.01] [--history-runs 1]
                                          [--touched-partitions N]

With ``--touched-partitions N`` only N partitions' logs are cut (at ``1 - new`` of their batches), so the timed
run's new records touch only the groups whose coordinator partition is one of them: set beside a run where every
partition is cut, it shows what the touched groups, not all groups, cost.

Figures are wall-clock seconds of whatever machine runs it; on a shared machine say so next to them. The ratio
new-run / batch-run measured in one invocation is what the cost claim rests on: O(new records + touched
groups' state) for the replay and the audit, against O(all records) for the batch run.
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import tempfile
import time
from pathlib import Path


def partition_folders(segments: Path) -> list[Path]:
    return sorted(p for p in segments.iterdir() if p.is_dir())


def cut_logs(segments: Path, live: Path, fraction: float, touched: set[str] | None = None) -> None:
    """Make ``live`` hold the first ``fraction`` of each partition's batches (files only grow or appear); with
    ``touched``, only those partition folders are cut, every other one is copied whole."""
    from offsets_audit.sources.segments_stream import batch_ends

    for folder in partition_folders(segments):
        ends = [(f, end) for f in sorted(folder.glob("*.log")) for end in batch_ends(str(f), 0, f.stat().st_size)]
        if not ends:
            continue
        cut = fraction if touched is None or folder.name in touched else 1.0
        last_file, last_end = ends[max(math.ceil(len(ends) * cut) - 1, 0)]
        (live / folder.name).mkdir(parents=True, exist_ok=True)
        for f in sorted(folder.glob("*.log")):
            if f.name > last_file.name:
                break
            data = f.read_bytes()
            (live / folder.name / f.name).write_bytes(data if f != last_file else data[:last_end])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=40)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--new", type=float, default=0.01, help="fraction of the log that is new in the timed run")
    parser.add_argument("--history-runs", type=int, default=1,
                        help="incremental runs the history is read in (more runs: more micro-batches so far)")
    parser.add_argument("--touched-partitions", type=int, default=None,
                        help="only this many __consumer_offsets partitions get new records (the fraction --new of "
                             "their batches): the timed run touches only the groups of those partitions")
    args = parser.parse_args()

    from offsets_audit import sinks
    from offsets_audit.config import load_settings
    from offsets_audit.incremental import run_incremental
    from offsets_audit.job import run_job
    from offsets_audit.simulate import simulate
    from offsets_audit.spark_session import get_spark

    root = Path(tempfile.mkdtemp(prefix="bench-incremental-"))
    try:
        sim = simulate(root / "sim", groups=args.groups, hours=args.hours, seed=11, partitions=args.partitions,
                       formats=("segments",), segment_bytes=4 * 1024 * 1024)
        print(f"input: {sim['records']:,} records, {args.groups} groups, {args.partitions} partitions; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
        started = time.perf_counter()
        spark = get_spark("bench-incremental")
        spark.range(1).count()
        spark_start = time.perf_counter() - started
        live = root / "live"

        def config(run_id, source, output):
            return load_settings(None, {"run_id": run_id, "source": {"kind": "segments", "path": str(source)},
                                      "output": {"path": str(root / output), "html_report": False},
                                      "broker": {"group_overrides": sim.get("group_overrides") or {}}})

        def timed(label, work):
            load_before = os.getloadavg()[0]
            started = time.perf_counter()
            summary = work().as_dict()
            seconds = time.perf_counter() - started
            records = summary["records"]["read"]
            stages = {k: v for k, v in summary["timings_s"].items() if ":" not in k}
            print(f"{label}: {records:,} records in {seconds:.1f} s (load average {load_before:.1f} -> "
                  f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores), per stage {stages}", flush=True)
            parts = {k: v for k, v in summary["timings_s"].items() if k.startswith("audit:")}
            if parts:
                print("  audit stage by table: " + ", ".join(f"{k[6:]} {v:.1f}" for k, v in parts.items()), flush=True)
            if summary.get("mode") == "incremental":
                kept = {k: v for k, v in summary["stages"].items() if k in ("replay", "history", "provisional")}
                events = sinks.read_table(spark, str(root / "incremental"), "group_events", summary["run_id"],
                                          "parquet")
                touched_groups = events.select("group_id").distinct().count() if events is not None else 0
                print(f"  groups touched: {touched_groups:,} of {summary.get('groups') and sum(summary['groups'].values()):,}; "
                      f"{kept}", flush=True)
            return seconds, records

        segments = root / "sim" / "segments"
        touched = None
        if args.touched_partitions is not None:
            touched = {p.name for p in partition_folders(segments)[: args.touched_partitions]}
        for i in range(1, args.history_runs + 1):
            # The history. With --touched-partitions, its last run leaves only the touched partitions cut.
            last = touched is not None and i == args.history_runs
            cut_logs(segments, live, 1 - args.new if last else (1 - args.new) * i / args.history_runs,
                     touched if last else None)
            timed(f"incremental, history {i}/{args.history_runs}", lambda: run_incremental(
                spark, config(f"history-{i}", live, "incremental"), str(root / "checkpoint"), progress=False))
        cut_logs(segments, live, 1.0)
        what = (f"{args.new:.0%} of every partition new" if touched is None else
                f"{args.new:.0%} of {len(touched)} of {len(partition_folders(segments))} partitions new")
        new, new_records = timed(f"incremental, {what}", lambda: run_incremental(
            spark, config("new", live, "incremental"), str(root / "checkpoint"), progress=False))
        idle, _ = timed("incremental, nothing new", lambda: run_incremental(
            spark, config("idle", live, "incremental"), str(root / "checkpoint"), progress=False))
        batch, batch_records = timed("batch run over the whole log", lambda: run_job(
            spark, config("batch", root / "sim" / "segments", "batch"), progress=False))
        # The fixed part of a run is what a run with nothing new costs (two streaming queries opening the
        # checkpoint, the O(groups) provisional pass and state reads, every table written) plus starting Spark
        # once per process; what the new records add on top of it is the per-record part.
        per_record = (new - idle) / max(new_records, 1)
        print(f"Spark start (once per process): {spark_start:.1f} s")
        print(f"incremental run over {what}: {new:.1f} s = fixed {idle:.1f} s + "
              f"{new_records:,} records x {per_record * 1000:.2f} ms")
        print(f"batch run over the whole log: {batch:.1f} s = {batch_records:,} records x "
              f"{batch / max(batch_records, 1) * 1000:.2f} ms")
        print(f"incremental run over {what} ({new_records / max(batch_records, 1):.2%} of the records) / batch run: "
              f"{new / batch:.2f}")
        from results import record  # bench/ is this script's folder, first on sys.path

        record("incremental", {
            "groups": args.groups, "hours": args.hours, "partitions": args.partitions, "new": args.new,
            "history_runs": args.history_runs, "touched_partitions": args.touched_partitions,
            "history_records": batch_records, "new_records": new_records, "spark_start_s": round(spark_start, 1),
            "new_run_s": round(new, 1), "nothing_new_run_s": round(idle, 1), "batch_run_s": round(batch, 1),
            "per_new_record_ms": round(per_record * 1000, 3), "new_run_vs_batch": round(new / batch, 3)})
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
