"""Where the job's CPU goes, stage by stage, on local[2]: wall time, the driver JVM's CPU (the executor too, locally)
with its compiler threads', the Python workers' CPU, and the share of the cores the stage kept busy.

Runs ``job.run_job`` on histories already simulated (``bench/audit.py --keep DIR`` leaves ``DIR/<size>/segments``
and ``group_configs.json``), one after the other in one session, as the bench does; the stage boundaries are the
job's own progress lines (``[offsets-audit] <stage> ...``), read as it writes them. For each stage:

* busy = (JVM CPU + Python workers' CPU) / (cores x wall): what is left below 1.0 is cores idle (driver planning,
  small jobs, a stage's last tasks); a stage near 1.0 gets faster only with less CPU, not with more overlap;
* jit = the JVM's compiler threads' CPU inside the JVM figure (warm-up, mostly in a JVM's first runs).

Wall times drift with the machine; the busy share and the CPU split drift less.

    .venv/bin/python bench/stage_cpu.py DIR/500000 DIR/20000000 [--conf key=value ...]
"""
from __future__ import annotations

import argparse
import importlib.util
import io
import json
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "src"))


def _audit_bench():
    """``bench/audit.py`` as a module (its JVM and worker CPU figures), loaded by path: no bench folder on sys.path."""
    spec = importlib.util.spec_from_file_location("offsets_audit_bench_audit", BENCH / "audit.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


audit_bench = _audit_bench()

CORES = 2


class StageMarks(io.TextIOBase):
    """Standard error as it was (``real``), noting ``(stage, time, figures())`` at each ``[offsets-audit] <stage> ...``
    line the job writes."""

    def __init__(self, real, figures) -> None:
        self.real, self.figures, self.marks = real, figures, []

    def write(self, text: str) -> int:
        line = text.strip()
        if line.startswith("[offsets-audit] ") and line.endswith(" ..."):
            self.marks.append((line[len("[offsets-audit] "):-4], time.perf_counter(), self.figures()))
        return self.real.write(text)

    def flush(self) -> None:
        self.real.flush()


def run(spark, history: Path, output: Path) -> dict:
    """Run the job on ``history``, print each stage's wall time, CPU split and busy share; return them."""
    from offsets_audit.config import load_settings
    from offsets_audit.job import run_job

    configs = history / "group_configs.json"
    config = load_settings(overrides={
        "source": {"kind": "segments", "path": str(history / "segments")},
        "output": {"path": str(output), "format": "parquet", "html_report": False},
        "run_id": "stage-cpu",
        "broker": {"group_overrides": json.loads(configs.read_text()) if configs.is_file() else {}},
    })
    marks = StageMarks(sys.stderr, lambda: audit_bench._jvm_figures(spark))
    began, before = time.perf_counter(), audit_bench._jvm_figures(spark)
    sys.stderr = marks
    try:
        summary = run_job(spark, config, progress=True)
    finally:
        sys.stderr = marks.real
    marks.marks.append(("end", time.perf_counter(), audit_bench._jvm_figures(spark)))
    records = summary.records.read
    wall = marks.marks[-1][1] - began
    print(f"\n== {history}: {records:,} records, {wall:.1f} s = {records / wall:,.0f} records/s")
    print(f"  {'stage':<16} {'wall s':>7} {'JVM s':>7} {'jit s':>6} {'Python s':>9} {'busy':>5}")
    previous = ("(before)", began, before)
    stages: dict = {}
    for mark in marks.marks:
        name, start, figures = previous
        seconds = mark[1] - start
        cpu = audit_bench._cpu_during(figures, mark[2])
        busy = (cpu["jvm_cpu_s"] + cpu["workers_cpu_s"]) / (CORES * seconds) if seconds > 0 else 0.0
        if name != "(before)" or seconds >= 0.05:
            print(f"  {name:<16} {seconds:7.1f} {cpu['jvm_cpu_s']:7.1f} {cpu['jit_cpu_s']:6.1f} "
                  f"{cpu['workers_cpu_s']:9.1f} {busy:5.2f}")
            stages[name] = {"wall_s": round(seconds, 1), "jvm_cpu_s": cpu["jvm_cpu_s"], "jit_cpu_s": cpu["jit_cpu_s"],
                            "workers_cpu_s": cpu["workers_cpu_s"], "busy": round(busy, 3)}
        previous = mark
    print("findings:", ", ".join(f"{k} {v}" for k, v in (summary.findings or {}).items()), flush=True)
    return {"history": str(history), "records": records, "wall_s": round(wall, 1), "stages": stages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("histories", nargs="+", help="folders of simulated histories (with segments/), in order")
    parser.add_argument("--output", default="/tmp/stage-cpu", help="where the runs write their tables")
    parser.add_argument("--conf", action="append", default=[], help="extra Spark conf for the session, key=value")
    args = parser.parse_args()
    missing = [h for h in args.histories if not (Path(h) / "segments").is_dir()]
    if missing:
        parser.error(f"no segments/ under {', '.join(missing)}: simulate with bench/audit.py --keep DIR first")

    from offsets_audit.spark_session import get_spark

    extra = dict(item.split("=", 1) for item in args.conf)
    spark = get_spark("bench-stage-cpu", master=f"local[{CORES}]", extra_conf={"spark.ui.enabled": "false", **extra})
    runs = []
    try:
        for i, history in enumerate(args.histories):
            runs.append(run(spark, Path(history), Path(args.output) / str(i)))
    finally:
        spark.stop()
    from results import record  # bench/ is this script's folder, first on sys.path

    record("stage_cpu", {"cores": CORES, "conf": extra, "runs": runs})


if __name__ == "__main__":
    main()
