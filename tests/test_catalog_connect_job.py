"""The whole job by name on Spark Connect: ``run --output-catalog`` on a local Connect server
(``--remote local[2]``), then ``check --output-catalog`` on another, in another process, in the same folder.

Each command starts its own server, whose session catalog is kept in Spark's Hive metastore in the working folder
(``sinks.catalog.local_session_conf``, passed to the server at its start), so the second finds the first's tables
and adds its run to them. A whole run each on its own JVM: ``full``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from replay_support import HISTORIES

pytestmark = [pytest.mark.slow, pytest.mark.full]

REPO = Path(__file__).resolve().parents[1]
HISTORY = "history-assignment-batching-00000000000000000000.log"
NAMESPACE = "spark_catalog.connect_audit"


def _command(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("SPARK_REMOTE", None)
    return subprocess.run([sys.executable, "-m", "offsets_audit.cli", *args, "--remote", "local[2]"], cwd=cwd,
                          capture_output=True, text=True, timeout=900, env=env)


def test_run_then_check_by_name_on_spark_connect(tmp_path):
    logs = tmp_path / "logs" / "__consumer_offsets-0"
    logs.mkdir(parents=True)
    shutil.copy(HISTORIES / HISTORY, logs / "00000000000000000000.log")
    common = ["--input", str(logs.parent), "--input-format", "segments", "--output", str(tmp_path / "files"),
              "--output-catalog", NAMESPACE]

    ran = _command(tmp_path, "run", *common, "--run-id", "c-1")
    assert ran.returncode == 0, ran.stderr[-3000:]
    checked = _command(tmp_path, "check", *common, "--run-id", "c-2", "--fail-on", "info",
                       "--json-summary", str(tmp_path / "summary.json"))
    assert checked.returncode == 1, checked.stderr[-3000:]
    assert checked.stdout.strip().splitlines()[-1].startswith("offsets-audit check: FAIL run c-2:")
    assert json.loads((tmp_path / "summary.json").read_text())["findings_by_rule"]

    schema = tmp_path / "spark-warehouse" / "connect_audit.db"
    assert (tmp_path / "metastore_db").is_dir()
    for table in ("runs", "findings", "rebalances"):
        runs = sorted(p.name for p in (schema / table).glob("run_id=*"))
        assert runs == ["run_id=c-1", "run_id=c-2"], (table, runs)
    assert not (schema / "_lease.json").exists(), "each run released the namespace's lease"
