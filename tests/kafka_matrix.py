"""What the real-Kafka version matrix verified, one machine-written line per release.

``make test-kafka-versions`` (``pytest tests/test_real_kafka.py --kafka-versions ...``) starts a broker of each
release and judges it; at the session's end each release's outcome (the scenarios its clients ran and how they
ended, the judges passed, failed and skipped, the command and the commit) is appended to
``bench/results/kafka_versions.jsonl`` by ``bench/results.py``'s ``record`` (which adds the date and the machine),
so the matrix docs/real-kafka.md describes is backed by a dated line per release, not by prose. The default
suite (no ``--kafka-versions``) records nothing.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

BENCH_NAME = "kafka_versions"
MODULE = "test_real_kafka.py"
_RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results.py"

#: The commit the session's code came from (HEAD may move while a long matrix runs).
_STARTED_AT: dict[str, str] = {}
#: release -> {"scenarios": {name: status}, "passed": [...], "failed": [...], "skipped": [...]}
_RELEASES: dict[str, dict[str, Any]] = {}


def _release(version: str) -> dict[str, Any]:
    return _RELEASES.setdefault(version, {"scenarios": {}, "passed": [], "failed": [], "skipped": []})


def scenarios_ran(version: str, scenarios: dict[str, dict[str, Any]]) -> None:
    """Note how each scenario the driver ran on ``version``'s broker ended (``ok`` or its error)."""
    _release(version)["scenarios"] = {name: s["status"] if s["status"] == "ok" else f"{s['status']}: {s['error']}"
                                      for name, s in scenarios.items()}


def _version_of(nodeid: str) -> str | None:
    if MODULE not in nodeid:
        return None
    found = re.search(r"\[(\d+\.\d+\.\d+)\]$", nodeid)
    return found.group(1) if found else None


def pytest_runtest_logreport(report) -> None:
    """A judge's outcome, per release: its call's outcome, or its setup's when the setup failed or skipped."""
    version = _version_of(report.nodeid)
    if version is None:
        return
    test = report.nodeid.split("::")[-1].split("[")[0]
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = "failed" if report.failed else "skipped" if report.skipped else "passed"
        _release(version)[outcome].append(test)


def _results_module():
    spec = importlib.util.spec_from_file_location("offsets_audit_bench_results", _RESULTS)
    assert spec is not None and spec.loader is not None
    results = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(results)
    return results


def pytest_sessionstart(session) -> None:
    if session.config.getoption("--kafka-versions", default=None):
        _STARTED_AT["commit"] = _results_module().git_commit()


def _command(config) -> list[str]:
    args = [a for a in config.invocation_params.args if not str(a).startswith("--basetemp")]
    return [".venv/bin/python", "-m", "pytest", *map(str, args)]


def pytest_sessionfinish(session, exitstatus) -> None:
    if not session.config.getoption("--kafka-versions", default=None) or not _RELEASES:
        return
    results = _results_module()
    for version in sorted(_RELEASES, key=lambda v: tuple(int(p) for p in v.split("."))):
        release = _RELEASES[version]
        if not (release["passed"] or release["failed"] or release["skipped"]):
            continue
        figures = {
            "release": version,
            "verdict": "passed" if not release["failed"] and release["passed"] else "failed",
            "scenarios": release["scenarios"],
            "judges": {"passed": len(release["passed"]), "failed": len(release["failed"]),
                       "skipped": len(release["skipped"])},
            "failed": release["failed"],
        }
        if _STARTED_AT.get("commit") not in (None, results.git_commit()):
            figures["code_commit"] = _STARTED_AT["commit"]  # what ran, when HEAD moved during the run
        path = results.record(BENCH_NAME, figures, argv=_command(session.config))
        print(f"\n{version}: {figures['verdict']} (recorded in {path})", file=sys.stderr)
