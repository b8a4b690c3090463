"""The job's fixed cost: each command's wall time as a user times it, against the Spark floor measured in the same run,
and the Spark jobs, stages and SQL executions each stage of the job makes.

For each case (``--cases``) the simulator writes a history (``offsets_audit.simulate``, as ``bench/audit.py`` builds
them), then, in fresh processes, alternated round by round (``--rounds``):

* the Spark floor: a process that starts the job's local session (``spark_session.get_spark``, the same
  configuration), runs one JVM job and one Python/Arrow job (``mapInArrow``) and exits: what any command pays before
  it reads a record;
* the case's command (``offsets-audit check`` / ``run`` / ``run --incremental``) exactly as a user types it, timed
  from the process's start to its exit;
* for both, the CPU seconds of the process tree (Python driver, JVM, Python workers), which a machine others load
  moves far less than the wall time.

Then once more per case with Spark's event log on, in a process that marks the job's stages as it runs
(``[offsets-audit] <stage> ...``, the job's progress lines), to count per stage of the run: Spark jobs, stages
(submitted; a skipped stage is not run), SQL executions (a query: a count, a collect, a write) and tasks, with the
seconds of the stage and the seconds some job of the stage was running (the rest is the driver alone: planning,
Python, file commits). Counts are deterministic; wall times depend on the machine's load, so compare the ratio to the
floor measured in the same round.

Cases: ``tiny`` (3 groups, 6 min, 2 partitions: ``check``), ``demo`` (30 groups, 1 h: ``check``), ``hour`` (300
groups, 1 h, 50 partitions, ~1.9 M records: ``run``), ``idle`` (``run --incremental`` with nothing new, on the
``hour`` history after a first incremental run over it), ``new1`` (``run --incremental`` over 1 % new records of a
~5 M-record history: 800 groups, 1 h, 50 partitions, after a first run over the other 99 %).

    .venv/bin/python bench/fixed_cost.py [--cases tiny,demo,hour,idle] [--rounds 2] [--keep DIR]
                                         [--baseline SRC] [--conf key=value ...]

``--baseline SRC``: also time (and count) the same commands with another checkout's ``src`` folder first on the
Python path (e.g. ``git archive`` of an older commit with this checkout's compiled kernels and its ``defaults.yaml``
and ``schemas`` links copied in), alternated with this one's; ``--new-conf`` / ``--old-conf`` add Spark settings to
one side only (the same ``src`` on both sides compares two settings).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SRC = REPO / "src"

#: name -> (groups, hours, partitions, command). ``idle`` and ``new1`` run on histories of their own.
CASES = {
    "tiny": (3, 0.1, 2, "check"),
    "demo": (30, 1.0, 50, "check"),
    "hour": (300, 1.0, 50, "run"),
    "idle": (300, 1.0, 50, "incremental-idle"),
    "new1": (800, 1.0, 50, "incremental-new"),
}
#: What a case's history is called on disk: ``idle`` reads ``hour``'s.
HISTORY = {"idle": "hour"}
NEW_FRACTION = 0.01


# -- the child processes ----------------------------------------------------------------------------------------

def floor_child() -> None:
    """Start the job's local session, run a first JVM job and a first Python/Arrow job, and exit (as a command does:
    without stopping the session)."""
    from offsets_audit.spark_session import get_spark

    spark = get_spark("offsets-audit-floor")
    spark.range(1000).count()

    def same(batches):
        yield from batches

    spark.range(1000).mapInArrow(same, "id long").count()


def counted_child(marks_path: str, argv: list[str]) -> int:
    """``offsets-audit <argv>`` in this process, writing ``(stage, epoch ms)`` marks to ``marks_path``: one at each
    of the job's progress lines (shown even where the command runs quietly), ``after`` when the job returns. The
    package comes from ``PYTHONPATH`` (this checkout's ``src`` or the baseline's)."""
    marks: list = [["startup", time.time() * 1000]]

    class Marks:
        def __init__(self, real):
            self.real = real

        def write(self, text: str) -> int:
            line = text.strip()
            if line.startswith("[offsets-audit] ") and line.endswith(" ..."):
                marks.append([line[len("[offsets-audit] "):-4], time.time() * 1000])
                return len(text)
            return self.real.write(text)

        def flush(self) -> None:
            self.real.flush()

        def __getattr__(self, name):
            return getattr(self.real, name)

    from offsets_audit import cli, incremental, job

    def loud(run):
        def wrapped(*args, **kwargs):
            kwargs["progress"] = True
            try:
                return run(*args, **kwargs)
            finally:
                marks.append(["after", time.time() * 1000])
        return wrapped

    job.run_job = loud(job.run_job)
    incremental.run_incremental = loud(incremental.run_incremental)
    sys.stderr = Marks(sys.stderr)
    try:
        return cli.main(argv)
    finally:
        sys.stderr = sys.stderr.real
        marks.append(["exit", time.time() * 1000])
        Path(marks_path).write_text(json.dumps(marks))


# -- the event log --------------------------------------------------------------------------------------------

def event_counts(log: Path, marks: list) -> dict:
    """Per stage of the run (``marks``: ``(stage, epoch ms)`` in order, the last one the end): Spark jobs, stages
    run, SQL executions and tasks started in it, its seconds, and the seconds some job of it was running."""
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    bounds = [(name, at) for name, at in marks]

    def segment(at_ms: float) -> str:
        name = bounds[0][0]
        for stage, began in bounds:
            if at_ms >= began:
                name = stage
        return name

    names = [name for name, _ in bounds[:-1]]
    out = {name: {"jobs": 0, "stages": 0, "sql": 0, "tasks": 0, "seconds": 0.0, "jobs_running_s": 0.0}
           for name in names}
    for (name, began), (_, ended) in zip(bounds, bounds[1:]):
        out[name]["seconds"] = round(out[name]["seconds"] + (ended - began) / 1000, 3)
    spans: dict = {name: [] for name in names}
    job_start: dict = {}
    sites: dict = {}
    for event in events:
        kind = event["Event"]
        if kind == "SparkListenerJobStart":
            job_start[event["Job ID"]] = event["Submission Time"]
            sites[event["Job ID"]] = event.get("Properties", {}).get("callSite.short")
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in job_start:
            began = job_start[event["Job ID"]]
            name = segment(began)
            if name in out:
                out[name]["jobs"] += 1
                spans[name].append((began, event["Completion Time"]))
        elif kind == "SparkListenerStageSubmitted":
            name = segment(event["Stage Info"].get("Submission Time") or 0)
            if name in out:
                out[name]["stages"] += 1
        elif kind == "SparkListenerTaskStart":
            name = segment(event["Task Info"]["Launch Time"])
            if name in out:
                out[name]["tasks"] += 1
        elif kind.endswith("SparkListenerSQLExecutionStart"):
            name = segment(event["time"])
            if name in out:
                out[name]["sql"] += 1
    for name, intervals in spans.items():
        busy, end = 0.0, None
        for began, ended in sorted(intervals):  # the union of the jobs' intervals
            if end is None or began > end:
                busy += ended - began
                end = ended
            elif ended > end:
                busy += ended - end
                end = ended
        out[name]["jobs_running_s"] = round(busy / 1000, 3)
    total = {key: sum(stage[key] for stage in out.values()) for key in ("jobs", "stages", "sql", "tasks")}
    return {"total": total, "per_stage": out}


# -- the cases ------------------------------------------------------------------------------------------------

def simulate_case(root: Path, name: str) -> dict:
    """The case's history under ``root/<history>`` (simulated once, reused by the cases that share it)."""
    sys.path.insert(0, str(SRC))
    from offsets_audit.simulate import simulate

    history = HISTORY.get(name, name)
    groups, hours, partitions, _ = CASES[history]
    folder = root / history
    info_path = folder / "simulated.json"
    if info_path.is_file():
        return json.loads(info_path.read_text())
    began = time.perf_counter()
    info = simulate(folder / "sim", groups=groups, hours=hours, seed=11, partitions=partitions,
                    formats=("segments",), workers=2)
    info["simulated_s"] = round(time.perf_counter() - began, 1)
    info_path.write_text(json.dumps(info, default=str))
    return info


def _config(root: Path, case: str, conf: dict, event_dir: Path | None, label: str = "new") -> Path:
    """A config file for the case's command: its output, the check's files, and Spark's event log when counting."""
    spark_conf = dict(conf)
    if event_dir is not None:
        spark_conf.update({"spark.eventLog.enabled": "true", "spark.eventLog.dir": event_dir.as_uri(),
                           "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"})
    out = root / "out" / case
    config = {"output": {"path": str(out), "format": "parquet", "html_report": False},
              "check": {"junit_xml": str(out / "junit.xml"), "json_summary": str(out / "check.json")},
              "spark": {"conf": spark_conf}}
    path = root / f"config-{case}-{label}-{'events' if event_dir else 'plain'}.json"
    path.write_text(json.dumps(config))  # YAML is a superset of JSON
    return path


def _argv(root: Path, case: str, config: Path, run_id: str) -> list[str]:
    history = root / HISTORY.get(case, case) / "sim"
    command = CASES[case][3]
    argv = ["--config", str(config), "--run-id", run_id, "--group-configs", str(history / "group_configs.json"),
            "--topic-metadata", str(history / "topics.json")]
    if command == "check":
        return ["check", "--input", str(history / "segments"), "--input-format", "segments", *argv]
    if command == "run":
        return ["run", "--input", str(history / "segments"), "--input-format", "segments", *argv]
    live = root / case / "live"
    return ["run", "--input", str(live), "--input-format", "segments", "--incremental", "--checkpoint",
            str(root / case / "checkpoint"), *argv]


def _environment(src: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and of its children it has reaped (0 once it has gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it (the JVM, its Python daemon and workers), from the parent ids in /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [pid], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        out += children
        todo += children
    return out


#: Seconds between two samples of a command's processes' CPU (``_timed``).
CPU_SAMPLE_S = 0.2


def _timed(argv: list[str], src: Path) -> tuple[float, int, str, float]:
    """``(wall seconds, exit code, the output's tail, CPU seconds)`` of a command in a fresh process. The CPU is that
    of the command's process tree (the Python driver, its JVM, the JVM's Python workers), sampled every
    ``CPU_SAMPLE_S``: a process's last fraction of a sample before it ends is missed. On a machine others load, the
    CPU a command takes moves far less than its wall time."""
    import threading

    began = time.perf_counter()
    process = subprocess.Popen(argv, env=_environment(src), cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    seen: dict[int, float] = {}
    kinds: dict[int, str] = {}
    threads: dict[int, tuple[str, float]] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(CPU_SAMPLE_S):
            for pid in _tree(process.pid):
                seen[pid] = max(seen.get(pid, 0.0), _process_cpu(pid))
                if kinds.get(pid) != "jvm":  # a launcher script becomes the JVM when it execs java
                    kinds[pid] = _kind(pid, process.pid)
                if kinds[pid] == "jvm":
                    for tid, (group, cpu) in _jvm_threads(pid).items():
                        threads[tid] = (group, max(threads.get(tid, (group, 0.0))[1], cpu))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = process.communicate()
    wall = time.perf_counter() - began
    done.set()
    sampler.join()
    split: dict[str, float] = {}
    for pid, cpu in seen.items():
        split[kinds.get(pid, "other")] = round(split.get(kinds.get(pid, "other"), 0.0) + cpu, 2)
    for group, cpu in threads.values():  # the JVM's share spent compiling and collecting
        split[f"jvm {group}"] = round(split.get(f"jvm {group}", 0.0) + cpu, 2)
    LAST_SPLIT.clear()
    LAST_SPLIT.update(split)
    return wall, process.returncode, (output or "")[-2000:], round(sum(seen.values()), 2)


#: The CPU seconds of the last ``_timed`` command per kind of process (``_kind``).
LAST_SPLIT: dict[str, float] = {}


def _jvm_threads(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds of JVM ``pid``'s HotSpot compiler threads (``jit``) and collector threads (``gc``), by thread id."""
    out = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            name = (task / "comm").read_text()
            group = ("jit" if "CompilerThre" in name else
                     "gc" if name.startswith(("GC Thread", "ParGC", "VM Thread")) else None)
            if group:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                out[int(task.name)] = (group, sum(int(f) for f in fields[11:13]) / os.sysconf("SC_CLK_TCK"))
        except OSError:
            continue
    return out


def _kind(pid: int, root: int) -> str:
    """``driver`` (the command's own Python process), ``jvm``, ``python workers`` (the JVM's daemon and workers)."""
    if pid == root:
        return "driver"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return "other"
    return "jvm" if command.endswith("java") else "python workers"


def _command(src: Path, argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "offsets_audit.cli", *argv]


def floor(src: Path) -> tuple[float, float]:
    seconds, code, text, cpu = _timed([sys.executable, str(Path(__file__).resolve()), "--floor-child"], src)
    if code != 0:
        raise SystemExit(f"the floor's process failed:\n{text}")
    return seconds, cpu


def prepare_incremental(root: Path, case: str, src: Path) -> None:
    """``idle``: a first incremental run over the whole history (the timed runs then find nothing new). ``new1``: the
    history's logs cut at 99 % of their batches, a first incremental run over them. Each timed or counted run then
    starts from a copy of the checkpoint and output that first run left (``reset_incremental``), ``new1``'s with the
    logs grown to 100 %: a checkpoint refuses a run id it published before the last run, and a kept folder serves
    later invocations that reuse the same run ids."""
    sys.path.insert(0, str(BENCH))
    from incremental import cut_logs

    folder = root / case
    segments = root / HISTORY.get(case, case) / "sim" / "segments"
    live = folder / "live"
    if (folder / "prepared").is_file() and (folder / "checkpoint.base").is_dir():
        return
    for stale in (folder / "prepared", folder / "checkpoint.base", folder / "out.base", root / "out" / case):
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()
    shutil.rmtree(folder / "checkpoint", ignore_errors=True)
    shutil.rmtree(live, ignore_errors=True)
    live.mkdir(parents=True)
    cut_logs(segments, live, 1.0 if case == "idle" else 1 - NEW_FRACTION)
    config = _config(root, case, {}, None)
    seconds, code, text, _ = _timed(_command(src, _argv(root, case, config, "history")), src)
    if code != 0:
        raise SystemExit(f"the first incremental run of {case} failed:\n{text}")
    print(f"  {case}: first incremental run over the history {seconds:.1f} s", flush=True)
    shutil.copytree(folder / "checkpoint", folder / "checkpoint.base")
    shutil.copytree(root / "out" / case, folder / "out.base")
    if case == "new1":
        cut_logs(segments, live, 1.0)
    (folder / "prepared").write_text("")


def reset_incremental(root: Path, case: str) -> None:
    """An incremental case's checkpoint and output as its first run left them: every timed run finds the same new
    records (none for ``idle``, the 1 % for ``new1``) and publishes its run id on a checkpoint that never saw it."""
    if not CASES[case][3].startswith("incremental"):
        return
    folder = root / case
    for name, base in (("checkpoint", folder / "checkpoint.base"), ("out", folder / "out.base")):
        target = folder / "checkpoint" if name == "checkpoint" else root / "out" / case
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(base, target)


def count(root: Path, case: str, src: Path, conf: dict, label: str) -> dict:
    """One run of the case's command with the event log on, its stages marked: ``event_counts``."""
    events = root / "events" / label / case
    shutil.rmtree(events, ignore_errors=True)
    events.mkdir(parents=True)
    config = _config(root, case, conf, events, label)
    marks_path = root / f"marks-{label}-{case}.json"
    reset_incremental(root, case)
    argv = [sys.executable, str(Path(__file__).resolve()), "--counted-child", str(marks_path), "--",
            *_argv(root, case, config, f"counted-{label}")]
    seconds, code, text, _ = _timed(argv, src)
    if code not in (0, 1):
        raise SystemExit(f"the counted run of {case} ({label}) failed:\n{text}")
    logs = [p for p in events.iterdir() if p.is_file()]
    if not logs:
        raise SystemExit(f"the counted run of {case} ({label}) left no event log:\n{text}")
    counts = event_counts(logs[0], json.loads(marks_path.read_text()))
    counts["wall_s"] = round(seconds, 2)
    summary = root / "out" / case / "summary" / f"counted-{label}.json"
    if summary.is_file():  # what the run read: a simulated history decodes whole
        counts["records"] = {k: v for k, v in json.loads(summary.read_text())["records"].items()
                             if k in ("read", "decoded", "quarantined")}
    return counts


def print_counts(case: str, label: str, counts: dict) -> None:
    total = counts["total"]
    print(f"  {case} [{label}] with the event log: {counts['wall_s']:.1f} s; {total['jobs']} jobs, {total['stages']} "
          f"stages, {total['sql']} SQL executions, {total['tasks']} tasks; records {counts.get('records')}", flush=True)
    print(f"    {'stage':<16}{'s':>7}{'jobs run s':>11}{'jobs':>6}{'stages':>7}{'SQL':>5}{'tasks':>7}")
    for name, stage in counts["per_stage"].items():
        print(f"    {name:<16}{stage['seconds']:7.2f}{stage['jobs_running_s']:11.2f}{stage['jobs']:6d}"
              f"{stage['stages']:7d}{stage['sql']:5d}{stage['tasks']:7d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="tiny,demo,hour,idle", help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds (floor and each command, alternated)")
    parser.add_argument("--keep", help="simulate into this folder and keep it (reused by a later run)")
    parser.add_argument("--baseline", help="another checkout's src folder, timed and counted beside this one")
    parser.add_argument("--src", help="the src folder timed as this checkout's (default: this checkout's src; a copy "
                        "keeps the figures of one version while the checkout changes)")
    parser.add_argument("--no-count", action="store_true", help="time only (no event-log runs)")
    parser.add_argument("--conf", action="append", default=[], help="key=value added to the commands' spark.conf")
    parser.add_argument("--new-conf", action="append", default=[], help="key=value for this checkout's runs only")
    parser.add_argument("--old-conf", action="append", default=[], help="key=value for the baseline's runs only")
    parser.add_argument("--note", default="", help="recorded with the figures (e.g. the machine's state)")
    args = parser.parse_args()

    sys.path.insert(0, str(BENCH))
    from results import record

    conf = dict(item.split("=", 1) for item in args.conf)
    confs = {"new": {**conf, **dict(item.split("=", 1) for item in args.new_conf)},
             "old": {**conf, **dict(item.split("=", 1) for item in args.old_conf)}}
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {', '.join(unknown)}: pick from {', '.join(CASES)}")
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-fixed-cost-"))
    root.mkdir(parents=True, exist_ok=True)
    sources = {"new": Path(args.src).resolve() if args.src else SRC,
               **({"old": Path(args.baseline).resolve()} if args.baseline else {})}
    figures: dict = {"cases": {}, "floor_s": {label: [] for label in sources},
                     "floor_cpu_s": {label: [] for label in sources}, "note": args.note,
                     "baseline": args.baseline, "conf": confs}
    try:
        for case in cases:
            info = simulate_case(root, case)
            figures["cases"][case] = {"command": CASES[case][3], "records": info["records"],
                                      "groups": CASES[HISTORY.get(case, case)][0],
                                      **{key: {label: [] for label in sources} for key in (
                                          "wall_s", "ratio_to_floor", "cpu_s", "cpu_ratio_to_floor")}}
            print(f"{case}: {info['records']:,} records, {CASES[HISTORY.get(case, case)][0]} groups", flush=True)
        for case in cases:
            if CASES[case][3].startswith("incremental"):
                prepare_incremental(root, case, SRC)
        for round_ in range(args.rounds):
            for label, src in sources.items():
                floor_s, floor_cpu = floor(src)
                figures["floor_s"][label].append(round(floor_s, 2))
                figures["floor_cpu_s"][label].append(floor_cpu)
                print(f"round {round_ + 1} [{label}]: floor {floor_s:.1f} s, {floor_cpu:.1f} CPU s {LAST_SPLIT} "
                      f"(load average {os.getloadavg()[0]:.1f})", flush=True)
                for case in cases:
                    reset_incremental(root, case)
                    config = _config(root, case, confs[label], None, label)
                    seconds, code, text, cpu = _timed(_command(src, _argv(root, case, config, f"timed-{label}")), src)
                    if code not in (0, 1):
                        raise SystemExit(f"{case} ({label}) failed:\n{text}")
                    entry = figures["cases"][case]
                    entry["wall_s"][label].append(round(seconds, 2))
                    entry["cpu_s"][label].append(cpu)
                    entry["ratio_to_floor"][label].append(round(seconds / floor_s, 2))
                    entry["cpu_ratio_to_floor"][label].append(round(cpu / floor_cpu, 2))
                    entry.setdefault("cpu_split_s", {}).setdefault(label, []).append(dict(LAST_SPLIT))
                    print(f"  {case} [{label}]: {seconds:.1f} s = {seconds / floor_s:.2f}x the floor "
                          f"({entry['records'] / seconds:,.0f} records/s); {cpu:.1f} CPU s = "
                          f"{cpu / floor_cpu:.2f}x the floor's {LAST_SPLIT}", flush=True)
        if not args.no_count:
            for case in cases:
                for label, src in sources.items():
                    counts = count(root, case, src, confs[label], label)
                    figures["cases"][case].setdefault("counts", {})[label] = counts
                    print_counts(case, label, counts)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    record("fixed_cost", figures)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--floor-child":
        floor_child()
    elif len(sys.argv) > 2 and sys.argv[1] == "--counted-child":
        sys.exit(counted_child(sys.argv[2], sys.argv[sys.argv.index("--") + 1:]))
    else:
        main()
