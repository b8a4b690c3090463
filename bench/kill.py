"""Kill -9 `offsets-audit run` at random moments; every rerun must leave tables equal to an uninterrupted run's.

For each output format: simulate a small history with one damaged segment (so quarantine has rows), run
it once to completion (the reference), then ``--kills`` times start the same run (same output, same run
id) and SIGKILL its whole process group (driver, JVM, Python workers: a lost node) at a random moment:
every other kill anywhere in the run, the rest inside the write stage (after its progress line, within the
reference's write time), where a half-written table is possible. After each kill:

* the run must not look complete unless it is: if its manifest ``_runs/<run_id>.json`` exists, its tables
  must already equal the reference's, and when the manifest is this attempt's, so must its summary and report be
  (written after it started), not an earlier run's; a manifest older than the attempt means it was killed before
  its write stage, where a run first removes its manifest, and the previous complete run is still there, untouched;
* a plain rerun must succeed (exit 0) and its tables must equal the reference's: per table the row count
  and an order-independent content hash (the sum of ``xxhash64`` over every column of every row).

With ``--overlaps N`` it also starts N pairs of runs of one output and run id together (or 2 s apart), over two
different histories or the same one: exactly one of each pair may run, the other must stop with one line naming
it (exit 2), and the output's tables must equal an uninterrupted run's of the input that ran.

Formats: ``parquet``, ``delta`` (the ``deltalake`` package writes the tables) and ``delta-spark`` (Delta's own
Spark writer: the session gets the Delta jars ``tests/kafka_jars.py`` resolves, handed to it as ``spark.jars``;
its reference run is the ``deltalake`` package's, whose tables it must equal).

Prints one line per kill and the totals; exits 1 on any mismatch.

    .venv/bin/python bench/kill.py [--kills 20] [--formats parquet,delta,delta-spark] [--overlaps 4] [--seed 17] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

RUN_ID = "kill-bench"


def make_history(root: Path, seed: int, name: str = "history") -> Path:
    """A small simulated history; one segment gets a zeroed 4 KiB block, so quarantine is not empty."""
    from offsets_audit.simulate import simulate

    simulate(str(root / name), groups=4, hours=0.2, partitions=3, seed=seed, formats=("segments",))
    segments = sorted((root / name / "segments").rglob("*.log"), key=lambda p: p.stat().st_size)
    biggest = segments[-1]
    data = bytearray(biggest.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 4096] = bytes(min(4096, len(data) - middle))
    biggest.write_bytes(bytes(data))
    return root / name / "segments"


def command(source: Path, output: Path, fmt: str, extra: Sequence[str] = ()) -> list[str]:
    return [sys.executable, "-m", "offsets_audit.cli", "run", "--input", str(source), "--input-format", "segments",
            "--output", str(output), "--output-format", fmt, "--run-id", RUN_ID, *extra]


def spark_delta_args(root: Path) -> list[str]:
    """``run`` arguments that give the session Delta's jars (``spark.jars``, resolved by ``tests/kafka_jars.py``),
    so that Delta's own Spark writer writes the tables."""
    sys.path.insert(0, str(REPO / "tests"))
    import kafka_jars

    config = root / "delta-spark.yaml"
    jars = ",".join(str(jar) for jar in kafka_jars.spark_connector_jars())
    config.write_text(json.dumps({"spark": {"conf": {"spark.jars": jars}}}))
    return ["--config", str(config)]


def environment() -> dict:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_to_completion(source: Path, output: Path, fmt: str, in_process: bool = False,
                      extra: Sequence[str] = ()) -> tuple[float, dict]:
    """The run, uninterrupted: its own process (a JVM started cold, as a user's), or with ``in_process`` the same
    command line through the CLI's ``main`` here, on this process's Spark session (warm: no JVM start, no
    first-run compiling)."""
    started = time.perf_counter()
    if in_process:
        from offsets_audit.cli import main as cli_main

        code = cli_main(command(source, output, fmt, extra)[3:])
        if code != 0:
            raise SystemExit(f"run failed with exit {code}")
    else:
        done = subprocess.run(command(source, output, fmt, extra), capture_output=True, text=True,
                              env=environment())
        if done.returncode != 0:
            raise SystemExit(f"run failed with exit {done.returncode}:\n{done.stderr[-3000:]}")
    summary = json.loads((output / "summary" / f"{RUN_ID}.json").read_text())
    return time.perf_counter() - started, summary


def run_and_kill(source: Path, output: Path, fmt: str, delay: float, in_write_stage: bool,
                 extra: Sequence[str] = ()) -> dict:
    """Start the run, SIGKILL its process group after ``delay`` seconds (counted from the write stage's
    progress line when ``in_write_stage``); returns what happened."""
    attempt_started = time.time()
    process = subprocess.Popen(command(source, output, fmt, extra), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, env=environment(), start_new_session=True)
    write_started = threading.Event()

    def watch():
        for line in process.stderr:
            if line.startswith("[offsets-audit] write"):
                write_started.set()
        write_started.set()   # the process ended: stop waiting

    threading.Thread(target=watch, daemon=True).start()
    started = time.perf_counter()
    if in_write_stage:
        write_started.wait()
    time.sleep(delay)
    killed = process.poll() is None
    if killed:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return {"killed": killed, "after_s": round(time.perf_counter() - started, 2), "exit": process.returncode,
            "started_at": attempt_started}


def manifest_written_before(output: Path, started_at: float) -> bool:
    """Whether the run manifest predates the attempt that started at ``started_at``: the attempt was killed before
    its write stage, which is where a run first removes its manifest, so the output is still the previous complete
    run's, untouched."""
    manifest = output / "_runs" / f"{RUN_ID}.json"
    return manifest.exists() and manifest.stat().st_mtime < started_at


def stale_side_files(output: Path, started_at: float) -> list[str]:
    """The run's summary and report when they were not written by the attempt that started at ``started_at``
    although its manifest was (a complete run's must be its own: the manifest is written after them)."""
    return [str(p.relative_to(output)) for p in (output / "summary" / f"{RUN_ID}.json",
                                                  output / "report" / f"{RUN_ID}.html")
            if p.exists() and p.stat().st_mtime < started_at]


def fingerprint(spark, output: Path, fmt: str) -> dict:
    """{table: (rows, content hash)} of the run's rows in every table, without the columns a run measures of
    itself (``tables.without_measured``)."""
    from pyspark.sql import functions as F

    from offsets_audit import sinks, tables

    out: dict = {}
    sums = None
    for name in tables.TABLES:
        if name == "decoded":
            continue
        df = sinks.read_table(spark, str(output), name, RUN_ID, fmt)
        if df is None:
            out[name] = None
            continue
        df = tables.without_measured(df, name)
        one = df.agg(F.lit(name).alias("table"), F.count(F.lit(1)).alias("n"),
                     F.sum(F.xxhash64(*[F.col(f"`{c}`") for c in df.columns]).cast("decimal(38,0)")).alias("h"))
        sums = one if sums is None else sums.unionByName(one)
    for row in (sums.collect() if sums is not None else []):  # one job for every table's figures
        out[row["table"]] = (row["n"], str(row["h"] or 0))
    return {name: out[name] for name in tables.TABLES if name in out}


def campaign(spark, root: Path, fmt: str, kills: int, rng: random.Random, report=print,
             first_in_write: bool = False, in_process: bool = False) -> dict:
    """One format's kills (alternating anywhere / in the write stage); returns the counts. With ``in_process``
    the reference run and the reruns use ``spark`` (``run_to_completion``); the killed runs are always their own
    process group. ``delta-spark``: the killed runs and their reruns write through Delta's Spark writer in their
    own processes (``spark_delta_args``), the reference through the ``deltalake`` package."""
    from offsets_audit import sinks

    label, extra, reruns_in_process = fmt, [], in_process
    if fmt == "delta-spark":
        fmt, extra, reruns_in_process = "delta", spark_delta_args(root), False
    source = root / "history" / "segments"
    reference_out = root / f"reference-{label}"
    total_s, summary = run_to_completion(source, reference_out, fmt, in_process)
    write_s = summary["timings_s"].get("write", total_s / 4)
    reference = fingerprint(spark, reference_out, fmt)
    rows = {name: value[0] for name, value in reference.items() if value}
    report(f"{label}: reference run {total_s:.1f} s (write stage {write_s:.1f} s); rows per table {rows}")
    output = root / f"killed-{label}"
    counts = {"kills": 0, "landed": 0, "in_write": 0, "complete_after_kill": 0, "complete_but_wrong": 0,
              "complete_but_stale": 0, "previous_run_untouched": 0, "incomplete_after_kill": 0, "rerun_equal": 0, "rerun_different": 0}
    for attempt in range(kills):
        in_write = (attempt + first_in_write) % 2 == 1
        delay = rng.uniform(0, write_s * 1.2) if in_write else rng.uniform(0, total_s)
        outcome = run_and_kill(source, output, fmt, delay, in_write, extra)
        counts["kills"] += 1
        counts["landed"] += outcome["killed"]
        counts["in_write"] += outcome["killed"] and in_write
        complete = sinks.run_manifest(spark, str(output), RUN_ID) is not None
        verdict = "incomplete"
        if complete:
            counts["complete_after_kill"] += 1
            untouched = manifest_written_before(output, outcome["started_at"])
            stale = [] if untouched else stale_side_files(output, outcome["started_at"])
            if fingerprint(spark, output, fmt) != reference:
                counts["complete_but_wrong"] += 1
                verdict = "COMPLETE BUT DIFFERENT"
            elif untouched:
                counts["previous_run_untouched"] += 1
                verdict = "complete: the previous run's, untouched (killed before writing)"
            elif stale:
                counts["complete_but_stale"] += 1
                verdict = f"COMPLETE WITH AN EARLIER RUN'S {', '.join(stale)}"
            else:
                verdict = "complete, equal"
        else:
            counts["incomplete_after_kill"] += 1
        run_to_completion(source, output, fmt, reruns_in_process, extra)
        equal = fingerprint(spark, output, fmt) == reference
        counts["rerun_equal" if equal else "rerun_different"] += 1
        report(f"{label} kill {attempt + 1:>2}: {'in write stage' if in_write else 'anywhere      '} "
               f"+{delay:5.1f} s -> {'killed' if outcome['killed'] else 'ended before the kill'}; "
               f"after it: {verdict}; rerun {'equal' if equal else 'DIFFERENT'}")
    return counts


def overlap(spark, root: Path, fmt: str, pairs: int, rng: random.Random, report=print) -> dict:
    """``pairs`` times, two runs of one output and run id started together or 2 s apart, over two histories or the
    same one: one runs, the other stops in one line naming it; the tables equal the clean run of the input that
    ran. Returns the counts."""
    sources = {"a": root / "history" / "segments", "b": root / "history-b" / "segments"}
    if not sources["b"].exists():
        make_history(root, 1000 + rng.randrange(1000), "history-b")
    references = {}
    for name, source in sources.items():
        run_to_completion(source, root / f"overlap-reference-{name}-{fmt}", fmt)
        references[name] = fingerprint(spark, root / f"overlap-reference-{name}-{fmt}", fmt)
    counts = {"pairs": 0, "one_refused": 0, "both_ran": 0, "tables_equal": 0, "tables_different": 0,
              "other_failures": 0}
    for attempt in range(pairs):
        output = root / f"overlap-{fmt}-{attempt}"
        inputs = ("a", "b") if attempt % 2 == 0 else ("a", "a")
        stagger = 0.0 if attempt % 4 < 2 else 2.0
        processes = []
        for index, name in enumerate(inputs):
            if index:
                time.sleep(stagger)
            processes.append(subprocess.Popen(command(sources[name], output, fmt), stdout=subprocess.DEVNULL,
                                              stderr=subprocess.PIPE, text=True, env=environment()))
        results = [(p.wait(), p.stderr.read()) for p in processes]
        errors = [line for _, err in results for line in err.splitlines() if line.startswith("offsets-audit: error:")]
        codes = sorted(code for code, _ in results)
        counts["pairs"] += 1
        verdict = f"exits {codes}"
        if codes == [0, 2] and len(errors) == 1 and "is in use by run" in errors[0]:
            counts["one_refused"] += 1
            ran = inputs[[code for code, _ in results].index(0)]
            equal = fingerprint(spark, output, fmt) == references[ran]
            counts["tables_equal" if equal else "tables_different"] += 1
            verdict = f"one refused ({errors[0][:90]}...), tables {'equal' if equal else 'DIFFERENT'}"
        elif codes == [0, 0]:
            counts["both_ran"] += 1
            verdict = "BOTH RAN"
        else:
            counts["other_failures"] += 1
            verdict = f"FAILED: exits {codes}: " + " | ".join(e.strip().splitlines()[-1][:200] for _, e in results if e)
        report(f"{fmt} overlap {attempt + 1:>2}: inputs {'+'.join(inputs)}, {stagger:.0f} s apart -> {verdict}")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="kills per format")
    parser.add_argument("--formats", default="parquet,delta")
    parser.add_argument("--overlaps", type=int, default=0, help="pairs of overlapping runs per format")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--keep", help="work in this folder and keep it")
    args = parser.parse_args()

    from offsets_audit.spark_session import get_spark

    root = Path(args.keep or tempfile.mkdtemp(prefix="kill-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    make_history(root, args.seed)
    spark = get_spark("offsets-audit-kill-bench", extra_conf={"spark.sql.shuffle.partitions": "2"})
    started = time.perf_counter()
    failed = False
    figures: dict = {"seed": args.seed, "kills_per_format": args.kills, "overlaps_per_format": args.overlaps}
    try:
        for fmt in args.formats.split(","):
            counts = campaign(spark, root, fmt, args.kills, rng)
            figures[fmt] = dict(counts)
            print(f"{fmt}: {counts['kills']} kills ({counts['landed']} landed, {counts['in_write']} in the write "
                  f"stage); after the kill {counts['incomplete_after_kill']} incomplete, "
                  f"{counts['complete_after_kill']} complete ({counts['complete_but_wrong']} of them different); "
                  f"reruns equal to the reference {counts['rerun_equal']}/{counts['kills']}")
            failed |= bool(counts["complete_but_wrong"] or counts["complete_but_stale"] or counts["rerun_different"])
            if args.overlaps and fmt != "delta-spark":  # the lease is the same whichever writer writes
                overlaps = overlap(spark, root, fmt, args.overlaps, rng)
                figures[f"{fmt}_overlap"] = overlaps
                print(f"{fmt}: {overlaps['pairs']} overlapping pairs: {overlaps['one_refused']} with one refused in one "
                      f"line ({overlaps['tables_equal']} with tables equal to a clean run), {overlaps['both_ran']} "
                      f"both ran, {overlaps['other_failures']} other failures")
                failed |= overlaps["one_refused"] != overlaps["pairs"] or bool(overlaps["tables_different"])
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"total {time.perf_counter() - started:.0f} s; {'FAILED' if failed else 'all reruns equal a clean run'}")
    from results import record  # bench/ is this script's folder, first on sys.path

    record("kill", {**figures, "seconds": round(time.perf_counter() - started), "failed": failed})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
