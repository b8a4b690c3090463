"""Kill -9 `offsets-audit run --incremental` at random moments of a sequence of nights; nothing may be lost or doubled.

A small simulated history (one damaged segment, so quarantine has rows) grows over ``--nights`` nights. The
reference is the uninterrupted sequence: night 1, 2, ... on one checkpoint. Then the same sequence again on a new
checkpoint and output, where runs are killed with SIGKILL (their whole process group) at random moments until
``--kills`` kills have landed (spread over the nights; a run that ends before its moment is not a kill, and the
attempts are capped at three times the kills): every other attempt anywhere in the run, the rest after its write
stage began (the tables, the summary, the checkpoint's states and snapshot, ``runs.json``, the run manifest: where a
kill between two of them could lose or double a night). After a kill the operator does what a nightly schedule
does, alternately:

* reruns the killed night (same run id), or
* goes on with the next night (a new run id, the log grown); when that is refused with one line asking for the
  killed night to be run again first (it was published in the checkpoint but its tables are not marked complete),
  reruns it, then the next night. A night that goes on early leaves its kills still owed to the next night.

At the end every run marked complete (``_runs/<id>.json``) is read back. What the nights found must be what the
reference found, nothing lost, nothing twice: per table, the row count and an order-independent content hash
(the sum of ``xxhash64`` over every column but ``run_id``) summed over the complete runs, for the tables of what
happened (findings, rebalances, group events, target assignments, assignor re-runs, quarantine), and the last run's
own for the tables of the state at the end (group state, members, offsets, provisional findings, rebalances and
re-runs). A run that fails otherwise (an exit other than 0, or 2 with the one line asked for) is a failure too.

Prints one line per attempt and the verdict; exits 1 on any mismatch.

    .venv/bin/python bench/kill_incremental.py [--kills 20] [--nights 4] [--seed 23] [--keep DIR]
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))  # the growing log is shared with the incremental tests

from growing_log import batch_cuts, damaged_history, grow  # noqa: E402

#: Tables of what happened: every night adds its own rows, summed over the complete runs.
EVENT_TABLES = ("findings", "rebalances", "group_events", "target_assignments", "assignor_audit", "quarantine")
#: Tables of the state at the end of the log: the last run's own.
STATE_TABLES = ("group_state", "members", "offsets", "provisional_findings", "provisional_rebalances",
                "provisional_assignor_audit")
#: The stage whose start opens the window where a run's pieces are written one after the other.
TAIL_STAGE = "[offsets-audit] write"


def command(live: Path, output: Path, checkpoint: Path, run_id: str, config: Path) -> list[str]:
    return [sys.executable, "-m", "offsets_audit.cli", "run", "--incremental", "--checkpoint", str(checkpoint),
            "--input", str(live), "--input-format", "segments", "--output", str(output), "--run-id", run_id,
            "--config", str(config)]


def environment() -> dict:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


#: Where a run that failed otherwise than with one line leaves its whole stderr (set by ``main``).
FAILED_LOGS: list[Path] = []


def run(argv: list[str]) -> tuple[int, list[str]]:
    """A run to its end: (exit code, the ``offsets-audit: error:`` lines; for any other failure its first lines
    naming an exception, the whole stderr kept in a file beside the bench's work)."""
    done = subprocess.run(argv, capture_output=True, text=True, env=environment())
    errors = [line for line in done.stderr.splitlines() if line.startswith("offsets-audit: error:")]
    if errors or done.returncode in (0, 2):
        return done.returncode, errors
    log = FAILED_LOGS[0] / f"failed-{len(list(FAILED_LOGS[0].glob('failed-*')))}.stderr" if FAILED_LOGS else None
    if log is not None:
        log.write_text(done.stderr)
    causes = [line.strip() for line in done.stderr.splitlines()
              if re.search(r"(Exception|Error)(:|\b)", line) and not line.lstrip().startswith("at ")]
    return done.returncode, causes[:3] + ([f"stderr in {log}"] if log is not None else [])


def run_and_kill(argv: list[str], delay: float | None, in_tail: bool) -> dict:
    """Start the run, SIGKILL its process group ``delay`` seconds after it started (after its write stage began
    with ``in_tail``; never with ``delay`` None). Also says how long a run that ended took, whole (``seconds``) and
    from its write stage on (``tail_s``)."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=environment(), start_new_session=True)
    tail = threading.Event()
    tail_at: list[float] = []
    errors: list[str] = []

    def watch():
        for line in process.stderr:
            if line.startswith(TAIL_STAGE):
                tail_at.append(time.perf_counter())
                tail.set()
            elif line.startswith("offsets-audit: error:"):
                errors.append(line.rstrip("\n"))
        tail.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    if in_tail:
        tail.wait()
    killed = False
    if delay is not None:
        time.sleep(delay)
        killed = process.poll() is None
        if killed:
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    ended = time.perf_counter()
    watcher.join(timeout=10)  # its error lines, read to the end of the stream
    return {"killed": killed, "exit": process.returncode, "errors": errors, "seconds": ended - started,
            "tail_s": ended - tail_at[0] if tail_at else None}


def totals(spark, output: Path, live: Path) -> dict:
    """Per table (rows, content hash): summed over the complete runs for ``EVENT_TABLES``, the last complete run's
    for ``STATE_TABLES``. The input folder's path, which quarantine rows name (their file and error message), is
    hashed as one placeholder: the two sequences read copies of one log from different folders."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    def hashed(field):
        column = F.col(f"`{field.name}`")
        if isinstance(field.dataType, StringType):
            return F.regexp_replace(column, r"\Q" + str(live) + r"\E", "<input>")  # a literal: Java regex quoting
        return column

    from offsets_audit import sinks

    runs = [m["run_id"] for m in sinks.complete_runs(spark, str(output))]
    runs.sort(key=lambda r: int(r.split("-")[-1]))
    out: dict = {}
    for name in EVENT_TABLES + STATE_TABLES:
        n, h = 0, 0
        for run_id in (runs if name in EVENT_TABLES else runs[-1:]):
            df = sinks.read_table(spark, str(output), name, run_id, "parquet")
            if df is None:
                continue
            row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(F.xxhash64(*[hashed(f) for f in df.schema.fields])
                                                              .cast("decimal(38,0)")).alias("h")).first()
            n, h = n + row["n"], h + int(row["h"] or 0)
        out[name] = (n, str(h))
    return {"last_run": runs[-1] if runs else None, "tables": out}


def campaign(spark, root: Path, kills: int, nights: int, rng: random.Random, report=print) -> dict:
    """The reference sequence, then the killed one; returns the counts and whether they agree."""
    segments = root / "history" / "segments"
    cuts = batch_cuts(segments)
    config = root / "config.yaml"
    config.write_text("output:\n  html_report: false\n")
    ref = {name: root / f"reference-{name}" for name in ("live", "output", "checkpoint")}
    # How long a night takes, whole and from its write stage on: the kill moments are drawn within them, from the
    # latest run that ended (the machine's pace changes while the bench runs).
    pace = {"run_s": 0.0, "tail_s": 0.0}
    for night in range(1, nights + 1):
        grow(cuts, ref["live"], night, nights)
        ended = run_and_kill(command(ref["live"], ref["output"], ref["checkpoint"], f"night-{night}", config),
                             None, False)
        if ended["exit"] != 0:
            raise SystemExit(f"reference night {night} failed with exit {ended['exit']}: {ended['errors']}")
        pace = {"run_s": ended["seconds"], "tail_s": ended["tail_s"] or ended["seconds"] * 0.2}
    reference = totals(spark, ref["output"], ref["live"])
    report(f"reference: {nights} nights, the last {pace['run_s']:.1f} s ({pace['tail_s']:.1f} s from its write "
           f"stage on); rows {({k: v[0] for k, v in reference['tables'].items()})}")

    live, output, checkpoint = root / "live", root / "output", root / "checkpoint"
    per_night = [kills // nights + (1 if i < kills % nights else 0) for i in range(nights)]
    counts = {"attempts": 0, "landed": 0, "in_tail": 0, "reruns": 0, "went_on": 0, "asked_to_rerun_first": 0,
              "failures": []}
    attempt = 0

    def asked_first(code: int, errors: list[str]) -> str | None:
        """The run id a refusal asks to run again first, if the run was refused that way."""
        found = re.search(r"--run-id (\S+)", errors[0]) if code == 2 and errors and "again first" in errors[0] \
            else None
        return found.group(1) if found else None

    def rerun_first(run_id: str) -> bool:
        counts["asked_to_rerun_first"] += 1
        first, first_errors = run(command(live, output, checkpoint, run_id, config))
        if first != 0:
            counts["failures"].append(f"rerun of {run_id}: exit {first} {first_errors}")
        return first == 0

    def complete(run_id: str) -> None:
        """Run ``run_id`` to its end as an operator would: when it asks for a killed night to be run again first,
        that one first (the run id its line names)."""
        code, errors = run(command(live, output, checkpoint, run_id, config))
        for _ in range(nights):
            asked = asked_first(code, errors)
            if asked is None or not rerun_first(asked):
                break
            code, errors = run(command(live, output, checkpoint, run_id, config))
        if code != 0:
            counts["failures"].append(f"{run_id}: exit {code} {errors}")

    owed = 0
    for night in range(1, nights + 1):
        grow(cuts, live, night, nights)
        run_id = f"night-{night}"
        went_on = False
        quota, landed, tries = per_night[night - 1] + owed, 0, 0
        while landed < quota and tries < 3 * quota:
            tries += 1
            in_tail = attempt % 2 == 1
            delay = rng.uniform(0, pace["tail_s"]) if in_tail else rng.uniform(0, pace["run_s"])
            outcome = run_and_kill(command(live, output, checkpoint, run_id, config), delay, in_tail)
            if not outcome["killed"] and outcome["exit"] == 0 and outcome["tail_s"] is not None:
                pace = {"run_s": outcome["seconds"], "tail_s": outcome["tail_s"]}
            counts["attempts"] += 1
            attempt += 1
            asked = None if outcome["killed"] else asked_first(outcome["exit"], outcome["errors"])
            if asked is not None:
                # The last night went on after a kill and was published but not marked complete: the operator
                # runs it again first, as the line says, and this night's attempts go on.
                report(f"night {night} attempt {attempt:>2}: refused, asked to run {asked} again first; rerun it")
                if not rerun_first(asked):
                    break
                continue
            landed += outcome["killed"]
            counts["landed"] += outcome["killed"]
            counts["in_tail"] += outcome["killed"] and in_tail
            action = "rerun" if (attempt - 1) % 4 < 2 or night == nights else "go on"
            ended = "killed" if outcome["killed"] else f"ended (exit {outcome['exit']})"
            report(f"night {night} attempt {attempt:>2}: {'after the write began' if in_tail else 'anywhere'} "
                   f"+{delay:5.1f} s -> {ended}; then {action}")
            if not outcome["killed"] and outcome["exit"] != 0:
                counts["failures"].append(f"{run_id} attempt {attempt}: exit {outcome['exit']} {outcome['errors']}")
            if action == "go on" and outcome["killed"]:
                counts["went_on"] += 1
                went_on = True  # the next night covers this one's records, or asks for it to be rerun first
                break
            counts["reruns"] += 1
        owed = quota - landed
        if not went_on:
            complete(run_id)
    killed = totals(spark, output, live)
    counts["equal"] = killed["tables"] == reference["tables"]
    counts["different_tables"] = sorted(name for name in reference["tables"]
                                        if killed["tables"].get(name) != reference["tables"][name])
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--nights", type=int, default=4)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--keep", help="work in this folder and keep it")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from offsets_audit.spark_session import get_spark

    root = Path(args.keep or tempfile.mkdtemp(prefix="kill-incremental-"))
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    damaged_history(root, args.seed, hours=0.15)
    FAILED_LOGS.append(root)
    spark = get_spark("offsets-audit-kill-incremental", extra_conf={"spark.sql.shuffle.partitions": "2"})
    started = time.perf_counter()
    try:
        counts = campaign(spark, root, args.kills, args.nights, rng)
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    seconds = round(time.perf_counter() - started)
    failed = bool(counts["failures"]) or not counts["equal"]
    print(f"{counts['landed']} kills landed in {counts['attempts']} attempts ({counts['in_tail']} after the write began); "
          f"{counts['reruns']} reruns of the killed night, {counts['went_on']} times on to the next night "
          f"({counts['asked_to_rerun_first']} asked to rerun the killed night first); "
          f"every night's findings and state {'equal' if counts['equal'] else 'DIFFERENT from'} the uninterrupted "
          f"sequence's{'' if counts['equal'] else ': ' + ', '.join(counts['different_tables'])}; {seconds} s")
    for failure in counts["failures"]:
        print(f"  FAILED {failure}")
    from results import record  # bench/ is this script's folder, first on sys.path

    record("kill_incremental", {"seed": args.seed, "nights": args.nights, "seconds": seconds, "failed": failed,
                                **{k: v for k, v in counts.items() if k != "failures"},
                                "failures": counts["failures"][:10]})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
