"""`offsets-audit run --incremental` on a history of one big churning consumer group: memory and checkpoint size.

Simulates one group of ``--members`` members (they join within a minute, then one joins or leaves every
``--churn-ms`` on average, all reading one topic of ``--topic-partitions`` partitions) beside one ordinary group,
runs ``run --incremental`` once on it as a subprocess and samples the resident memory of the run's whole process
tree (driver, JVM, Python workers) while it runs. An incremental run's state must stay proportional to the group
and its checkpoint to the log: the figures are the input's and the checkpoint's bytes (and the fold rows' bytes by
kind, the part that grew with member events times members), the peak memory and the run's wall time, and whether
it ended with exit 0.

    .venv/bin/python bench/incremental_big_group.py [--members 2000] [--hours 0.03] [--topic-partitions 600] [--keep DIR]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and every process below it (read from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--hours", type=float, default=0.03)
    parser.add_argument("--topic-partitions", type=int, default=600)
    parser.add_argument("--churn-ms", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--history", help="a history this bench simulated before (its folder), reused")
    parser.add_argument("--keep", help="work in this folder and keep it")
    args = parser.parse_args()

    from offsets_audit.simulate import simulate

    root = Path(args.keep or tempfile.mkdtemp(prefix="incremental-big-group-"))
    root.mkdir(parents=True, exist_ok=True)
    history = Path(args.history) if args.history else root / "history"
    if not args.history:
        simulate(str(history), groups=1, hours=args.hours, partitions=1, seed=args.seed, formats=("segments",),
                 hog_members=args.members, hog_partitions=args.topic_partitions, hog_churn_mean_ms=args.churn_ms)
    checkpoint, output = root / "checkpoint", root / "output"
    for stale in (checkpoint, output):
        shutil.rmtree(stale, ignore_errors=True)
    config = root / "config.yaml"
    config.write_text("output:\n  html_report: false\n")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    argv = [sys.executable, "-m", "offsets_audit.cli", "run", "--incremental", "--checkpoint", str(checkpoint),
            "--input", str(history / "segments"), "--input-format", "segments", "--output", str(output),
            "--run-id", "night-1", "--config", str(config)]
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(1.0):
            peak[0] = max(peak[0], tree_rss(process.pid))

    threading.Thread(target=sample, daemon=True).start()
    stdout, stderr = process.communicate()
    done.set()
    seconds = time.perf_counter() - started
    fold_rows = checkpoint / "fold_rows"
    kinds: dict[str, int] = {}
    for folder in fold_rows.glob("batch=*/kind=*"):
        kind = folder.name.split("=", 1)[1]
        kinds[kind] = kinds.get(kind, 0) + folder_bytes(folder)
    warnings = [line for line in stderr.splitlines() if line.startswith("offsets-audit: warning")]
    errors = [line for line in stderr.splitlines() if line.startswith("offsets-audit: error")]
    notes = [line for line in stderr.splitlines() if line.startswith("offsets-audit: note")]
    figures = {
        "members": args.members, "hours": args.hours, "exit": process.returncode,
        "input_bytes": folder_bytes(history / "segments"), "checkpoint_bytes": folder_bytes(checkpoint),
        "output_bytes": folder_bytes(output), "fold_rows_bytes_by_kind": dict(sorted(kinds.items())),
        "peak_rss_bytes": peak[0], "seconds": round(seconds, 1), "warnings": warnings[:3], "errors": errors[:3],
        "notes": notes[:5],
    }
    figures["checkpoint_per_input"] = round(figures["checkpoint_bytes"] / max(figures["input_bytes"], 1), 2)
    print(f"{args.members} members: exit {process.returncode}, input {figures['input_bytes'] / 1e6:.1f} MB, "
          f"checkpoint {figures['checkpoint_bytes'] / 1e6:.1f} MB ({figures['checkpoint_per_input']}x), "
          f"peak RSS {peak[0] / 2**30:.2f} GiB, {seconds:.0f} s")
    for line in warnings + errors:
        print(f"  {line}")
    if process.returncode != 0:
        print(stderr[-3000:], file=sys.stderr)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    from results import record  # bench/ is this script's folder, first on sys.path

    record("incremental_big_group", figures)
    return 0 if process.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
