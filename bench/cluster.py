"""Scale-out for real: the nightly job on a Spark standalone cluster (a master and two workers on 127.0.0.1)
gives the same tables as on ``local[2]``.

    .venv/bin/python bench/cluster.py                  # a small simulated history, both runs, table comparison
    .venv/bin/python bench/cluster.py --groups 20 --hours 0.5
    .venv/bin/python bench/cluster.py --variants segments-delta,kafka-parquet --bootstrap-server HOST:PORT --ending-offsets JSON

Variants (input-output): ``segments-parquet`` (the default), ``segments-delta`` (Delta's own Spark writer) and
``kafka-parquet`` (Spark's ``kafka`` source reading a live broker up to ``--ending-offsets``). The last two hand
spark-submit the jars ``tests/kafka_jars.py`` resolves with ``--jars`` (the executors get them too) and, for
Delta, its extension and catalog.

Starts ``org.apache.spark.deploy.master.Master`` and two ``org.apache.spark.deploy.worker.Worker`` s from PySpark's
own distribution (``spark-class``; one core and 1 GiB each), then runs ``jobs/nightly_audit.py`` twice through
``spark-submit --py-files offsets_audit.zip`` (the ``make dist`` zip): once with ``--master spark://127.0.0.1:PORT``
and once with ``--master local[2]``. The package is hidden from every Python process the cluster starts (a
``sitecustomize`` drops ``src/`` from ``sys.path``), so executors, which run in the workers' own JVMs and Python
workers, can only use what the zip ships. Every output table is compared row for row (sorted, run_id aside);
the figures are printed and everything started here is stopped, whatever happens.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TABLES = ("group_state", "members", "group_events", "target_assignments", "offsets", "assignor_audit", "findings",
          "rebalances", "latency_summary", "quarantine")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def start(command: list[str], log: Path, env: dict) -> subprocess.Popen:
    handle = open(log, "w")
    return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def stop(process: subprocess.Popen) -> None:
    """Stop a process started here and its children (its own session), politely first."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_for_workers(ui_port: int, count: int, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as response:
                state = json.load(response)
            alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
            if len(alive) >= count:
                return
        except OSError:
            pass
        time.sleep(2)
    raise RuntimeError(f"the standalone master did not see {count} workers within {timeout_s:.0f} s")


def submit(master: str, out: Path, source_args: list[str], root: Path, env: dict, py_files: Path,
           fmt: str = "parquet", jars: list[Path] | None = None, source_options: dict | None = None) -> float:
    config = root / f"cluster-{out.name}.yaml"
    config.write_text(json.dumps({"run_id": "cluster", "output": {"format": fmt, "html_report": True},
                                  **({"source": {"options": source_options}} if source_options else {})}))
    command = [str(BIN / "spark-submit"), "--master", master,
               "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4",
               "--conf", "spark.executor.memory=768m", "--conf", "spark.driver.host=127.0.0.1"]
    if jars:
        command += ["--jars", ",".join(str(jar) for jar in jars)]
    if fmt == "delta":
        from offsets_audit.sinks.delta import DELTA_SESSION_CONF

        for key, value in DELTA_SESSION_CONF.items():
            command += ["--conf", f"{key}={value}"]
    command += ["--py-files", str(py_files), str(REPO / "jobs" / "nightly_audit.py"),
                "--config", str(config), *source_args, "--output", str(out), "--output-format", fmt]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"spark-submit --master {master} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return time.perf_counter() - started


def table_rows(out: Path, name: str, fmt: str = "parquet") -> list[str] | None:
    """A table's rows of this run as sorted JSON lines: every column but run_id, without what a run measures of
    itself (``tables.MEASURED_COLUMNS`` and ``MEASURED_ROWS``, as ``tables.without_measured``); None without it."""
    import pandas as pd

    from offsets_audit import tables

    path = out / name
    if not path.exists():
        return None
    if fmt == "delta":
        from deltalake import DeltaTable

        frame = DeltaTable(str(path)).to_pandas()
    else:
        frame = pd.read_parquet(path)
    if name in tables.MEASURED_ROWS and tables.MEASURED_ROWS[name][0] in frame.columns:
        column, values = tables.MEASURED_ROWS[name]
        frame = frame[frame[column].isna() | ~frame[column].isin(values)]
    dropped = {"run_id", *tables.MEASURED_COLUMNS.get(name, ())}
    frame = frame.drop(columns=[c for c in frame.columns if c in dropped])
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in frame.to_dict(orient="records"))


def table_figures(rows: list[str] | None) -> tuple[int, str | None]:
    """``(rows, content hash)`` of ``table_rows``' lines."""
    if rows is None:
        return 0, None
    return len(rows), hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]


def print_difference(cluster: list[str] | None, local: list[str] | None, limit: int = 5) -> None:
    """The rows only one side has, so a difference can be read without re-running both sides."""
    only_cluster = sorted(set(cluster or ()) - set(local or ()))
    only_local = sorted(set(local or ()) - set(cluster or ()))
    for side, rows in (("cluster only", only_cluster), ("local only", only_local)):
        for row in rows[:limit]:
            print(f"    {side}: {row[:600]}")


VARIANTS = ("segments-parquet", "segments-delta", "kafka-parquet")


def connector_jars() -> list[Path]:
    """Spark's kafka source and Delta's Spark jars, resolved by Maven (``tests/kafka_jars.py``)."""
    sys.path.insert(0, str(REPO / "tests"))
    import kafka_jars

    return kafka_jars.spark_connector_jars()


def main(argv: list[str] | None = None, results_dir: Path | None = None) -> int:
    """Returns 0 when every variant's tables are equal on the cluster and on local[2] and everything started was
    stopped; the figures go to ``bench/results/cluster.jsonl`` (or ``results_dir``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--hours", type=float, default=0.25)
    parser.add_argument("--variants", default="segments-parquet", help=f"any of {', '.join(VARIANTS)}")
    parser.add_argument("--bootstrap-server", help="kafka-parquet: the broker to read __consumer_offsets from")
    parser.add_argument("--ending-offsets", help="kafka-parquet: where the read stops (Spark's endingOffsets JSON)")
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or ("kafka-parquet" in variants and not (args.bootstrap_server and args.ending_offsets)):
        parser.error(f"variants are {', '.join(VARIANTS)}; kafka-parquet needs --bootstrap-server and "
                     "--ending-offsets")

    from offsets_audit.simulate import simulate

    jars = connector_jars() if set(variants) - {"segments-parquet"} else None
    with tempfile.TemporaryDirectory(prefix="cluster-") as tmp:
        root = Path(tmp)
        history = root / "history"
        summary = simulate(str(history), groups=args.groups, hours=args.hours, seed=11, formats=("segments",),
                           faults=("wrong_assignment", "epoch_regression"))
        py_files = root / "offsets_audit.zip"
        subprocess.run([sys.executable, "-m", "zipfile", "-c", str(py_files), "offsets_audit"], cwd=REPO / "src",
                       check=True)
        hide_src = root / "hide_src"
        hide_src.mkdir()
        (hide_src / "sitecustomize.py").write_text(
            "import sys\n"
            f"sys.path[:] = [p for p in sys.path if p.rstrip('/') != {str(REPO / 'src')!r}]\n")
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                   PYTHONPATH=str(hide_src), SPARK_LOCAL_IP="127.0.0.1", SPARK_WORKER_DIR=str(root / "work"))

        def run(master: str, variant: str) -> float:
            source, fmt = variant.split("-")
            if source == "kafka":
                source_args = ["--input-format", "kafka", "--bootstrap-server", args.bootstrap_server]
                options = {"startingOffsets": "earliest", "endingOffsets": args.ending_offsets}
            else:
                source_args, options = ["--input", str(history / "segments"), "--input-format", "segments"], None
            where = "cluster" if master.startswith("spark://") else "local"
            return submit(master, root / f"out-{where}-{variant}", source_args, root, env, py_files, fmt,
                          jars if variant != "segments-parquet" else None, options)

        port, ui_port = free_port(), free_port()
        started: list[subprocess.Popen] = []
        cluster_s: dict[str, float] = {}
        try:
            started.append(start([spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", str(port), "--webui-port", str(ui_port)], root / "master.log", env))
            for n in (1, 2):
                started.append(start([spark_class(), "org.apache.spark.deploy.worker.Worker",
                                      f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "1",
                                      "--memory", "1g", "--webui-port", str(free_port()),
                                      "--work-dir", str(root / f"worker-{n}")], root / f"worker-{n}.log", env))
            wait_for_workers(ui_port, 2)
            for variant in variants:
                cluster_s[variant] = run(f"spark://127.0.0.1:{port}", variant)
        finally:
            for process in reversed(started):
                stop(process)
        local_s = {variant: run("local[2]", variant) for variant in variants}
        different = []
        for variant in variants:
            fmt = variant.split("-")[1]
            print(f"{variant}: {summary['records']:,} simulated records, {args.groups} groups: standalone cluster "
                  f"(master + 2 workers × 1 core) {cluster_s[variant]:.1f} s, local[2] {local_s[variant]:.1f} s "
                  "(spark-submit wall time, JVM start included)")
            for name in TABLES:
                cluster_rows = table_rows(root / f"out-cluster-{variant}", name, fmt)
                local_rows = table_rows(root / f"out-local-{variant}", name, fmt)
                cluster, local = table_figures(cluster_rows), table_figures(local_rows)
                same = cluster == local
                print(f"  {name:<20} rows {cluster[0]:>7,} / {local[0]:>7,}  hash {cluster[1]} / {local[1]}  "
                      f"{'equal' if same else 'DIFFERENT'}")
                if not same:
                    different.append(f"{variant}:{name}")
                    print_difference(cluster_rows, local_rows)
        alive = [p.pid for p in started if p.poll() is None]
        print("stopped the master and both workers" if not alive else f"still running: {alive}")
        print("OK: every table equal" if not different else f"DIFFERENT: {', '.join(different)}")
        from results import record  # bench/ is this script's folder, first on sys.path

        first = variants[0]
        record("cluster", {"records": summary["records"], "groups": args.groups, "hours": args.hours,
                           "cluster": "standalone master + 2 workers x 1 core", "variant": first,
                           "cluster_s": round(cluster_s[first], 1), "local_s": round(local_s[first], 1),
                           "variants_s": {v: {"cluster": round(cluster_s[v], 1), "local": round(local_s[v], 1)}
                                          for v in variants},
                           "tables_equal": not different, "tables_different": different, "all_stopped": not alive},
               results_dir=results_dir)
        return 1 if different or alive else 0


if __name__ == "__main__":
    sys.exit(main())
