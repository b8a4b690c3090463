"""Tables by name on Spark Connect: the catalog sink speaks only DataFrame and SQL, so a Connect client writes and
reads them as a classic session does. A real local Connect server (``SparkSession.builder.remote("local[2]")``) in
a process of its own (``catalog_connect_check.py``): every table written with its schema and read back equal to
what was written, a rerun replaces the run's rows (also with none), and the manifest table tells a run killed
after it began writing from a complete one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.full]  # a Connect server of its own; test_connect runs the job on Connect

REPO = Path(__file__).resolve().parents[1]


def test_tables_by_name_on_a_spark_connect_session(tmp_path):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("SPARK_REMOTE", None)
    done = subprocess.run([sys.executable, str(REPO / "tests" / "catalog_connect_check.py"), str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["session"] == "pyspark.sql.connect.session"
    assert all(result["equal_to_input"].values()), result["equal_to_input"]
    assert result["after_rerun"] == [["r1", "f3"], ["r2", "f7"]]
    assert set(result["after_empty_rerun"].values()) == {0}
    assert result["complete_runs"] == ["r2", "r1"] and result["after_begin"] == ["r1"]
