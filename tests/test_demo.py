"""The quickstart's first command works from a clean clone: `offsets-audit demo` simulates a history,
runs the whole job with local Spark and prints the summary and the report's path.

`make demo` is this command after `make install`; the test runs the committed tree (a fresh `git clone`),
so a file the demo needs but git does not track fails here, as it would on a user's machine.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.full]  # the quickstart's make demo runs it whole


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.fail("the demo test needs the project's git checkout and git")
    target = tmp_path_factory.mktemp("clone") / "consumer-offsets-audit"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(target)], check=True)
    return target


def test_demo_runs_end_to_end_from_a_clean_clone(clone, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(clone / "src"), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    out = tmp_path / "demo-out"
    proc = subprocess.run(
        [sys.executable, "-m", "offsets_audit.cli", "demo", "--out", str(out), "--groups", "8", "--hours", "0.25"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stdout = proc.stdout
    assert "decoded + 0 quarantined" in stdout
    assert "findings:" in stdout and "rebalance latency" in stdout
    report = Path(stdout.split("report: ", 1)[1].split()[0])
    assert report.is_file() and report.stat().st_size > 10_000
    assert str(report).startswith(str(out))
    for table in ("group_state", "members", "group_events", "offsets", "findings", "rebalances", "latency_summary",
                  "assignor_audit", "quarantine"):
        assert (out / "tables" / table).is_dir(), table
