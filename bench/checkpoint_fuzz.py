"""Damage an incremental checkpoint one file at a time; every next run must refuse in one line or equal a clean run.

A small simulated history (one damaged segment, so quarantine has rows) grows over three nights: nights 1 and 2
build the checkpoint, night 3 runs on it. The reference is night 3 on an undamaged copy. Then, for every file of
the checkpoint as night 2 left it (Spark's streaming folders, the fold's micro-batch outputs, the compact
snapshots, the offset-rule and assignor states, the coordinator's run rows, ``runs.json``, ``checkpoint.json``,
the ``.crc`` files beside them), and for each damage (``delete``; ``truncate`` to half its size; ``flip`` one
byte in its middle), night 3 runs on a copy of the checkpoint and of the output with that one damage, through the
command line's ``main``:

* ``refused``: exit 2 and exactly one line on stderr (``offsets-audit: error: ...``), nothing else;
* ``equal``: exit 0, and night 3's tables equal the reference's (row count and content hash per table);
* anything else (a traceback, another exit code, exit 0 with other tables) is a failure, printed with its first
  lines.

Prints one line per case and the totals; exits 1 on any failure.

    .venv/bin/python bench/checkpoint_fuzz.py [--damages delete,truncate,flip] [--only SUBSTRING] [--limit N]
                                              [--seed 5] [--keep DIR]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))  # the growing log is shared with the incremental tests

from growing_log import batch_cuts, damaged_history, grow  # noqa: E402

DAMAGES = ("delete", "truncate", "flip")
NIGHTS = 3
#: Tables compared (the run's own rows; ``decoded`` is not written).
TABLES = ("group_events", "target_assignments", "group_state", "members", "offsets", "quarantine", "findings",
          "rebalances", "provisional_findings", "provisional_rebalances", "latency_summary", "rebalance_causes",
          "latency_daily", "assignor_audit", "provisional_assignor_audit", "coordinator_load",
          "assignment_interval_whatif")


def command(live: Path, output: Path, checkpoint: Path, night: int, config: Path) -> list[str]:
    return ["run", "--incremental", "--checkpoint", str(checkpoint), "--input", str(live), "--input-format",
            "segments", "--output", str(output), "--run-id", f"night-{night}", "--config", str(config)]


#: A Python worker that did not start in Spark's fixed time (a machine loaded by other work): not an outcome of
#: the damage, the run is made again.
NOT_STARTED = "Python worker failed to connect back"


def run(argv: list[str], tries: int = 3) -> tuple[int | str, list[str]]:
    """``offsets-audit`` through ``main`` in this process: (exit code, or ``"traceback"``; stderr lines)."""
    for _ in range(tries - 1):
        code, lines = _run(argv)
        if not any(NOT_STARTED in line for line in lines):
            return code, lines
    return _run(argv)


def _run(argv: list[str]) -> tuple[int | str, list[str]]:
    from offsets_audit.cli import main

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code: int | str = main(argv)
    except BaseException as exc:  # noqa: BLE001 - a traceback is an outcome here, reported
        return "traceback", [f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"]
    lines = [line for line in err.getvalue().splitlines() if line and not line.startswith(("[offsets-audit] ", "offsets-audit: note: "))
             and "Streaming TransformWithStateInPandas" not in line and line.strip()]
    return code, lines


def fingerprint(spark, output: Path, run_id: str) -> dict:
    """{table: (rows, content hash)} of run ``run_id``'s rows, without what the run measured of its own re-runs
    (``tables.without_measured``: it differs from any run to the next)."""
    from pyspark.sql import functions as F

    from offsets_audit import sinks
    from offsets_audit.tables import without_measured

    out: dict = {}
    for name in TABLES:
        df = sinks.read_table(spark, str(output), name, run_id, "parquet")
        if df is None:
            out[name] = None
            continue
        df = without_measured(df, name)
        row = df.agg(F.count(F.lit(1)).alias("n"), F.sum(F.xxhash64(*[F.col(f"`{c}`") for c in df.columns])
                                                          .cast("decimal(38,0)")).alias("h")).first()
        out[name] = (row["n"], str(row["h"] or 0))
    return out


def damage(path: Path, how: str, rng: random.Random) -> None:
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        size = path.stat().st_size
        with open(path, "r+b") as handle:
            handle.truncate(size // 2)
    else:
        data = bytearray(path.read_bytes())
        if not data:
            path.write_bytes(b"\x01")
            return
        at = len(data) // 2 if len(data) < 4 else rng.randrange(len(data) // 4, 3 * len(data) // 4)
        data[at] ^= 0xFF
        path.write_bytes(bytes(data))


def checkpoint_files(checkpoint: Path) -> list[str]:
    from offsets_audit.lease import LEASE_FILE

    return sorted(str(p.relative_to(checkpoint)) for p in checkpoint.rglob("*") if p.is_file() and p.name != LEASE_FILE)


def prepare(spark, root: Path, seed: int) -> dict:
    """Nights 1 and 2 on a fresh checkpoint, then night 3 on a copy (the reference); returns the paths."""
    segments = damaged_history(root, seed, hours=0.1)
    cuts = batch_cuts(segments)
    config = root / "config.yaml"
    config.write_text("output:\n  html_report: false\n")
    live, output, checkpoint = root / "live", root / "output", root / "checkpoint"
    for night in (1, 2):
        grow(cuts, live, night, NIGHTS)
        code, lines = run(command(live, output, checkpoint, night, config))
        if code != 0:
            raise SystemExit(f"night {night} failed: {code} {lines[:5]}")
    grow(cuts, live, 3, NIGHTS)
    shutil.copytree(checkpoint, root / "ref-checkpoint")
    shutil.copytree(output, root / "ref-output")
    code, lines = run(command(live, root / "ref-output", root / "ref-checkpoint", 3, config))
    if code != 0:
        raise SystemExit(f"night 3 (reference) failed: {code} {lines[:5]}")
    return {"live": live, "output": output, "checkpoint": checkpoint, "config": config,
            "reference": fingerprint(spark, root / "ref-output", "night-3")}


def case(spark, root: Path, prepared: dict, relative: str, how: str, rng: random.Random) -> tuple[str, str]:
    """One damage, night 3 on it: (``refused`` | ``equal`` | ``FAILED``, detail)."""
    work = root / "case"
    shutil.rmtree(work, ignore_errors=True)
    checkpoint, output = work / "checkpoint", work / "output"
    shutil.copytree(prepared["checkpoint"], checkpoint)
    shutil.copytree(prepared["output"], output)
    damage(checkpoint / relative, how, rng)
    code, lines = run(command(prepared["live"], output, checkpoint, 3, prepared["config"]))
    if code == 2 and len(lines) == 1 and lines[0].startswith("offsets-audit: error: "):
        return "refused", lines[0][len("offsets-audit: error: "):]
    if code == 0 and not [line for line in lines if "Traceback" in line or "Exception" in line]:
        if fingerprint(spark, output, "night-3") == prepared["reference"]:
            return "equal", ""
        return "FAILED", "exit 0 with tables other than a clean run's"
    return "FAILED", f"exit {code}: " + " | ".join(lines[:3])[:400]


def campaign(spark, root: Path, damages=DAMAGES, only: str | None = None, limit: int | None = None, seed: int = 5,
             report=print) -> dict:
    """Every (file, damage) case (or those whose path contains ``only``, at most ``limit`` of them, picked with
    ``seed``); returns the counts and the failures."""
    rng = random.Random(seed)
    prepared = prepare(spark, root, seed)
    files = [f for f in checkpoint_files(prepared["checkpoint"]) if only is None or only in f]
    cases = [(f, how) for f in files for how in damages]
    if limit is not None and limit < len(cases):
        cases = sorted(rng.sample(cases, limit))
    counts: dict = {"files": len(files), "cases": 0, "refused": 0, "equal": 0, "failed": 0, "failures": []}
    for relative, how in cases:
        started = time.perf_counter()
        outcome, detail = case(spark, root, prepared, relative, how, rng)
        counts["cases"] += 1
        counts[outcome.lower()] += 1
        if outcome == "FAILED":
            counts["failures"].append(f"{how} {relative}: {detail}")
        report(f"{how:<8} {relative:<90} {outcome:<7} {time.perf_counter() - started:5.1f} s  {detail[:160]}")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--damages", default=",".join(DAMAGES))
    parser.add_argument("--only", help="only files whose path (relative to the checkpoint) contains this")
    parser.add_argument("--limit", type=int, help="at most this many cases, picked with --seed")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--keep", help="work in this folder and keep it")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from offsets_audit.spark_session import get_spark

    root = Path(args.keep or tempfile.mkdtemp(prefix="checkpoint-fuzz-"))
    root.mkdir(parents=True, exist_ok=True)
    # a loaded machine may take more than the default 15 s to start a Python worker
    spark = get_spark("offsets-audit-checkpoint-fuzz", extra_conf={"spark.sql.shuffle.partitions": "2",
                                                                   "spark.python.authenticate.socketTimeout": "120s"})
    started = time.perf_counter()
    try:
        counts = campaign(spark, root, tuple(args.damages.split(",")), args.only, args.limit, args.seed)
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    seconds = round(time.perf_counter() - started)
    print(f"{counts['cases']} cases over {counts['files']} files: {counts['refused']} refused in one line, "
          f"{counts['equal']} equal to a clean run, {counts['failed']} failed; {seconds} s")
    for failure in counts["failures"]:
        print(f"  FAILED {failure}")
    from results import record  # bench/ is this script's folder, first on sys.path

    record("checkpoint_fuzz", {"seed": args.seed, "damages": args.damages, "only": args.only, "limit": args.limit,
                               **{k: v for k, v in counts.items() if k != "failures"},
                               "failures": counts["failures"][:20], "seconds": seconds})
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
