"""Scale-out for real: the nightly job on a Spark standalone cluster (a master and two workers on 127.0.0.1)
gives the same tables as on ``local[2]``.

    .venv/bin/python bench/cluster.py                  # a small simulated history, both runs, table comparison
    .venv/bin/python bench/cluster.py --groups 20 --hours 0.5

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


def submit(master: str, out: Path, history: Path, root: Path, env: dict, py_files: Path) -> float:
    config = root / "cluster.yaml"
    config.write_text("run_id: cluster\noutput:\n  format: parquet\n  html_report: true\n")
    command = [str(BIN / "spark-submit"), "--master", master,
               "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4",
               "--conf", "spark.executor.memory=768m", "--conf", "spark.driver.host=127.0.0.1",
               "--py-files", str(py_files), str(REPO / "jobs" / "nightly_audit.py"),
               "--config", str(config), "--input", str(history / "segments"), "--output", str(out)]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"spark-submit --master {master} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return time.perf_counter() - started


def table_figures(out: Path, name: str):
    """``(rows, content hash)`` of a table's rows of this run: every column but run_id, rows sorted."""
    import pandas as pd

    path = out / name
    if not path.exists():
        return 0, None
    frame = pd.read_parquet(path)
    frame = frame.drop(columns=[c for c in ("run_id",) if c in frame.columns])
    text = sorted(json.dumps(row, sort_keys=True, default=str) for row in frame.to_dict(orient="records"))
    return len(text), hashlib.sha256("\n".join(text).encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--hours", type=float, default=0.25)
    args = parser.parse_args(argv)

    from offsets_audit.simulate import simulate

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
        port, ui_port = free_port(), free_port()
        started: list[subprocess.Popen] = []
        try:
            started.append(start([spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", str(port), "--webui-port", str(ui_port)], root / "master.log", env))
            for n in (1, 2):
                started.append(start([spark_class(), "org.apache.spark.deploy.worker.Worker",
                                      f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "1",
                                      "--memory", "1g", "--webui-port", str(free_port()),
                                      "--work-dir", str(root / f"worker-{n}")], root / f"worker-{n}.log", env))
            wait_for_workers(ui_port, 2)
            cluster_s = submit(f"spark://127.0.0.1:{port}", root / "out-cluster", history, root, env, py_files)
        finally:
            for process in reversed(started):
                stop(process)
        local_s = submit("local[2]", root / "out-local", history, root, env, py_files)
        print(f"{summary['records']:,} records, {args.groups} groups: standalone cluster (master + 2 workers × 1 core) "
              f"{cluster_s:.1f} s, local[2] {local_s:.1f} s (spark-submit wall time, JVM start included)")
        different = []
        for name in TABLES:
            cluster, local = table_figures(root / "out-cluster", name), table_figures(root / "out-local", name)
            same = cluster == local
            print(f"  {name:<20} rows {cluster[0]:>7,} / {local[0]:>7,}  hash {cluster[1]} / {local[1]}  "
                  f"{'equal' if same else 'DIFFERENT'}")
            if not same:
                different.append(name)
        alive = [p.pid for p in started if p.poll() is None]
        print("stopped the master and both workers" if not alive else f"still running: {alive}")
        print("OK: every table equal" if not different else f"DIFFERENT: {', '.join(different)}")
        from results import record  # bench/ is this script's folder, first on sys.path

        record("cluster", {"records": summary["records"], "groups": args.groups, "hours": args.hours,
                           "cluster": "standalone master + 2 workers x 1 core", "cluster_s": round(cluster_s, 1),
                           "local_s": round(local_s, 1), "tables_equal": not different, "tables_different": different,
                           "all_stopped": not alive})
        return 1 if different or alive else 0


if __name__ == "__main__":
    sys.exit(main())
