"""Where benchmark figures live: one machine-written JSON line per bench run in ``bench/results/<bench>.jsonl``.

Every bench calls :func:`record` once at its end with the figures it printed. A line carries what a reader needs
to trust or compare it: the bench, the command that ran it, the commit (``+dirty`` when the tree had changes),
the UTC time, the machine (cores, CPU model, memory, load average when it started and ended, Python and Java
versions) and the figures themselves. ``bench/README.md`` shows the latest line of each file.

    from results import record        # bench scripts put bench/ on sys.path (their own folder)
    record("decode", {"records_per_s": 446_000, "reference_records_per_s": 175_000})
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"


def _run(command: Sequence[str]) -> str:
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, cwd=REPO, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (done.stdout or done.stderr).strip()


def git_commit() -> str:
    """HEAD's commit id, with ``+dirty`` when tracked files differ from it (figures of uncommitted code).

    The results and the page :func:`record` itself writes do not count: benches run one after the other would
    otherwise mark every line but the first as uncommitted code."""
    commit = _run(["git", "rev-parse", "--short=12", "HEAD"])
    if not commit:
        return "unknown"
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                  ":(exclude)bench/results/*.jsonl", ":(exclude)bench/README.md"])
    return commit + ("+dirty" if dirty else "")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _java_version() -> str:
    first = _run(["java", "-version"]).splitlines()
    return first[0] if first else ""


def machine() -> dict[str, Any]:
    """The facts of this machine a figure depends on."""
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gib": _memory_gib(),
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "python": platform.python_version(),
        "java": _java_version(),
        "host": platform.node(),
    }


def record(bench: str, figures: Mapping[str, Any], *, argv: Sequence[str] | None = None,
           results_dir: Path | None = None) -> Path:
    """Append one JSON line of ``figures`` for ``bench`` to ``bench/results/<bench>.jsonl``; return that file.

    ``argv`` defaults to the running command line (the bench script and its arguments).
    """
    argv = list(sys.argv if argv is None else argv)
    if argv and argv[0].endswith(".py"):
        argv[0] = os.path.relpath(os.path.abspath(argv[0]), REPO)
    line = {
        "bench": bench,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": git_commit(),
        "command": shlex.join(argv),
        "machine": machine(),
        "figures": dict(figures),
    }
    folder = RESULTS if results_dir is None else results_dir
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{bench}.jsonl"
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=False, default=str) + "\n")
    if folder == RESULTS:
        rewrite_readme()
    return path


def rewrite_readme() -> None:
    """Regenerate ``bench/README.md`` (``bench/report.py``) so that it shows the line just recorded; a failure
    only says so, the figures are already safe in their JSON file."""
    try:
        spec = importlib.util.spec_from_file_location("offsets_audit_bench_report", BENCH / "report.py")
        assert spec is not None and spec.loader is not None
        report = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(report)
        report.write()
    except Exception as exc:  # noqa: BLE001 - the bench's figures are written; the page can be rebuilt by hand
        print(f"bench/README.md not rewritten ({exc}): run .venv/bin/python bench/report.py", file=sys.stderr)


def latest(bench: str, results_dir: Path | None = None) -> dict[str, Any] | None:
    """The newest line of ``bench/results/<bench>.jsonl``, or None when the bench never ran."""
    path = (RESULTS if results_dir is None else results_dir) / f"{bench}.jsonl"
    if not path.is_file():
        return None
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else None
