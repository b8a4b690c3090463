"""End-to-end audit throughput on local[2]: the job users run (``job.run_job``), at several input sizes.

For each size (``--sizes``, records; default 0.5 M and 5 M) the simulator writes a history of ``--groups``
groups on 50 partitions with every fault kind injected, as many hours as the size needs (about 6,300 records
per group-hour). Then, on one local[2] SparkSession:

* ``run_job`` reads the segments, decodes, replays, re-runs the assignors, audits and writes every table as
  Parquet; its own stage timings materialise each stage's outputs at the stage's end (persist + count), so
  every stage is the work it really did;
* decode only: the same input read and decoded into the whole decoded table (``codec.source.read_decoded``), nothing
  else (a noop write); then read as the job reads it (``compact``: no JSON texts; the replay's decoded records and
  marks; mid-run commits packed), the part of the job's first stage before it caches;
* the CPU the job used: the driver JVM's (which is the executor too) with HotSpot's compile time (elapsed) and its
  compiler threads' CPU, the collectors' pauses, and its Python workers';
* the ratio end to end / decode-only (``decode-only s / end-to-end s``), the driver's peak RSS (Python and
  JVM, ``VmHWM``), and between consecutive sizes the time ratio against the records ratio (linear cost:
  10x the records within 11x the time).

    .venv/bin/python bench/audit.py [--sizes 500000,5000000] [--groups 100] [--keep DIR]

Figures depend on the machine and its load: compare ratios measured in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

#: Records per group and simulated hour of the default mix (627,016 records for 100 groups x 1 h).
RECORDS_PER_GROUP_HOUR = 6_270


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _stat_seconds(stat: Path, reaped: bool = False) -> float:
    """User + system CPU seconds in a ``/proc`` ``stat`` file (a process's or a thread's), with ``reaped`` its ended
    children's too; OSError when it has gone."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(f) for f in fields[11:15 if reaped else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int, reaped: bool = False) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc``), with ``reaped`` its ended children's too;
    0 for one that has gone."""
    try:
        return _stat_seconds(Path(f"/proc/{pid}/stat"), reaped)
    except OSError:
        return 0.0


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (the JVM's Python workers), from the parent ids in ``/proc``."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        out += children
        todo += children
    return out


def _compiler_threads_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each of JVM ``pid``'s JIT compiler threads alive now (``/proc/<pid>/task``, threads named
    ``C1 CompilerThread#`` and ``C2 CompilerThread#``). HotSpot's own compile time (``CompilationMXBean``) is the
    compilations' elapsed time, which on a busy 2-core machine includes the time a compiler thread waited for a
    core, so it can be about twice the threads' own CPU."""
    out = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            if (task / "comm").read_text().startswith(("C1 CompilerThre", "C2 CompilerThre")):
                out[int(task.name)] = _stat_seconds(task / "stat")
        except OSError:
            continue
    return out


def _jvm_figures(spark) -> dict:
    """Cumulative figures of the driver JVM (the executor too, locally): its CPU seconds, its Python workers' CPU
    seconds (per process alive now, with its ended children's: PySpark's daemon forks the workers), HotSpot's compile
    time and the collectors' time (``java.lang.management``), its compiler threads' CPU seconds (per thread alive
    now), and Spark's generated classes compiled (``CodegenMetrics``)."""
    jvm = spark._jvm
    management = jvm.java.lang.management.ManagementFactory
    pid = jvm.java.lang.ProcessHandle.current().pid()
    return {"pid": pid, "jvm_cpu": _cpu_seconds(pid),
            "workers": {child: _cpu_seconds(child, reaped=True) for child in _descendants(pid)},
            "compiler_threads": _compiler_threads_cpu(pid),
            "compile": management.getCompilationMXBean().getTotalCompilationTime() / 1000,
            "gc": sum(b.getCollectionTime() for b in management.getGarbageCollectorMXBeans()) / 1000,
            "classes": jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()}


def _cpu_during(before: dict, after: dict) -> dict:
    """What the job used between two ``_jvm_figures``: a worker (or compiler thread) started meanwhile counts from
    zero."""
    def grown(name: str) -> float:
        earlier = before.get(name, {})
        return sum(cpu - earlier.get(key, 0.0) for key, cpu in after.get(name, {}).items())

    return {"jvm_cpu_s": round(after["jvm_cpu"] - before["jvm_cpu"], 1), "workers_cpu_s": round(grown("workers"), 1),
            "jit_s": round(after["compile"] - before["compile"], 1),
            "jit_cpu_s": round(grown("compiler_threads"), 1), "gc_s": round(after["gc"] - before["gc"], 1),
            "generated_classes": after["classes"] - before["classes"]}


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def run_size(spark, root: Path, target: int, groups: int, seed: int, workers: int) -> dict:
    from offsets_audit.codec import source as codec_source
    from offsets_audit.config import load_settings
    from offsets_audit.job import run_job
    from offsets_audit.simulate import FAULT_KINDS, simulate

    hours = max(0.05, target / (RECORDS_PER_GROUP_HOUR * groups))
    start = time.perf_counter()
    # A kept folder (``--keep``) serves a later run of the same history: what the simulator said is kept beside it.
    asked = {"groups": groups, "hours": hours, "seed": seed, "partitions": 50, "faults": sorted(FAULT_KINDS)}
    kept = root / "simulated.json"
    earlier = json.loads(kept.read_text()) if kept.is_file() else None
    if earlier is not None and earlier.get("asked") == asked and (root / "segments").is_dir():
        info, how = earlier["info"], "simulated by an earlier run"
    else:
        shutil.rmtree(root, ignore_errors=True)
        info = simulate(root, groups=groups, hours=hours, seed=seed, partitions=50, faults=list(FAULT_KINDS),
                        formats=("segments",), workers=workers)
        kept.write_text(json.dumps({"asked": asked, "info": {k: info.get(k) for k in ("records", "group_overrides")}}))
        how = f"simulated in {time.perf_counter() - start:.1f} s"
    shutil.rmtree(root / "tables", ignore_errors=True)
    records = info["records"]
    print(f"\n== {records:,} records ({groups} groups, {hours:.2f} h), {how}; load average {_load()}", flush=True)

    # Group configs are not records: the simulator reports the per-group assignment intervals it used.
    config = load_settings(overrides={
        "source": {"kind": "segments", "path": str(root / "segments")},
        "output": {"path": str(root / "tables"), "format": "parquet", "html_report": False},
        "run_id": "bench",
        "broker": {"group_overrides": info.get("group_overrides") or {}},
    })
    figures = _jvm_figures(spark)
    start = time.perf_counter()
    summary = run_job(spark, config, progress=False)
    wall = time.perf_counter() - start
    cpu = _cpu_during(figures, _jvm_figures(spark))
    stages = {k: v for k, v in summary.timings_s.items() if ":" not in k}
    staged = sum(stages.values())
    print(f"end to end: {wall:.1f} s wall = {records / wall:,.0f} records/s "
          f"(stages {staged:.1f} s; summary and manifest {wall - staged:.1f} s)")
    for name, seconds in stages.items():
        print(f"  {name:<16} {seconds:7.1f} s  {100 * seconds / wall:5.1f} %")
        # Each table of the stage as it was materialised (the first reader of a shared intermediate pays for it).
        parts = {k.split(":", 1)[1]: v for k, v in summary.timings_s.items() if k.startswith(f"{name}:")}
        if parts and name != "write":
            print("      " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()))

    # Where the CPU went (2 cores give 2 s a second): HotSpot's compiler threads warming up take a real share of
    # a JVM's first runs. HotSpot's compile time is elapsed time, which counts a compiler
    # thread waiting for a core; its compiler threads' CPU is what compiling took from the tasks.
    print(f"CPU during the job: JVM {cpu['jvm_cpu_s']:.1f} s (HotSpot compiling {cpu['jit_s']:.1f} s elapsed, "
          f"{cpu['jit_cpu_s']:.1f} s of its compiler threads' CPU; collectors "
          f"{cpu['gc_s']:.1f} s), Python workers {cpu['workers_cpu_s']:.1f} s; {cpu['generated_classes']} "
          "generated classes compiled")
    source = {"kind": "segments", "path": str(root / "segments")}
    start = time.perf_counter()
    codec_source.read_decoded(spark, source).write.format("noop").mode("overwrite").save()
    decode_only = time.perf_counter() - start
    print(f"decode only: {decode_only:.1f} s = {records / decode_only:,.0f} records/s; "
          f"end to end / decode-only = {decode_only / wall:.3f}")
    # The job's own read: compact (no JSON texts, file names or batch fields on decoded rows), with the decoded
    # records and marks the replay reads, mid-run commits packed; what the job's first stage costs before it caches
    # and counts.
    start = time.perf_counter()
    codec_source.read_decoded(spark, source, with_decoded_record=True, compact=True, pack_commits=True) \
        .write.format("noop").mode("overwrite").save()
    job_read = time.perf_counter() - start
    print(f"decode as the job reads it (compact, decoded records, marks, commits packed): {job_read:.1f} s = "
          f"{records / job_read:,.0f} records/s; end to end / that = {job_read / wall:.3f}")
    python_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    jvm_mb = _peak_rss_mb(spark._jvm.java.lang.ProcessHandle.current().pid())
    print(f"peak driver RSS so far: python {python_mb:,.0f} MB, JVM {jvm_mb:,.0f} MB")
    print("findings:", ", ".join(f"{k} {v}" for k, v in (summary.findings or {}).items()))
    # The machine may be shared: figures taken at different loads do not compare, ratios in one run do.
    print(f"load average at the end: {_load()}", flush=True)
    return {"records": records, "wall_s": round(wall, 2), "stages_s": stages, "timings_s": summary.timings_s,
            "decode_only_s": round(decode_only, 2), "job_read_s": round(job_read, 2),
            "ratio": round(decode_only / wall, 3), "python_rss_mb": round(python_mb), "jvm_rss_mb": round(jvm_mb),
            "load_average": os.getloadavg()[0], "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500000,5000000", help="records per run, comma-separated (0.5M, 5M ok)")
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--hours", type=float, help="one run of this many simulated hours instead of --sizes")
    parser.add_argument("--skip-pure", action="store_true", help="accepted for old command lines (no pure-core "
                        "figure here any more: bench/replay.py measures the pure replay)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--workers", type=int, default=2, help="simulator processes")
    parser.add_argument("--keep", help="simulate and write into this folder and keep it (a later run of the same "
                        "sizes, groups and seed reuses its histories)")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--note", default="", help="recorded with the figures (e.g. the machine's state)")
    args = parser.parse_args()

    from offsets_audit.spark_session import get_spark

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-audit-"))
    # The job's local session as it is (one shuffle partition per core, ``spark_session.local_conf``).
    spark = get_spark("bench-audit", master="local[2]", extra_conf={"spark.ui.enabled": "false"})
    results = []
    try:
        sizes = ([round(args.hours * args.groups * RECORDS_PER_GROUP_HOUR)] if args.hours
                 else [_size(s) for s in args.sizes.split(",")])
        for target in sizes:
            results.append(run_size(spark, base / str(target), target, args.groups, args.seed, args.workers))
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    scaling = []
    for small, large in zip(results, results[1:]):
        records_ratio = large["records"] / small["records"]
        time_ratio = large["wall_s"] / small["wall_s"]
        print(f"{records_ratio:.1f}x the records ({small['records']:,} -> {large['records']:,}) cost "
              f"{time_ratio:.1f}x the time (linear: {time_ratio / records_ratio:.2f} of proportional)")
        scaling.append({"records": [small["records"], large["records"]], "records_ratio": round(records_ratio, 2),
                        "time_ratio": round(time_ratio, 2)})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    from results import record  # bench/ is this script's folder, first on sys.path

    record("audit", {"groups": args.groups, "sizes": results, "scaling": scaling,
                     "records_per_s": [round(r["records"] / r["wall_s"]) for r in results],
                     **({"note": args.note} if args.note else {})})


if __name__ == "__main__":
    main()
