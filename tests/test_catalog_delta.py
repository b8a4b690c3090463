"""Tables by name on Delta, for real: ``offsets-audit run --output-catalog spark_catalog.kafka_audit`` on a local
session with Delta's jars (resolved by Maven, ``tests/kafka_jars.py``) and its session catalog kept in a Hive
metastore under the test's folder, so that each process below sees the tables the one before wrote.

1. the run by name, as a user starts it (its own process), killed with SIGKILL (its whole process group) inside
   its write stage, when some tables hold the run's rows and others do not;
2. in a second process (``catalog_delta_check.py``; the metastore serves one process at a time): the killed run
   must not look complete; the same command line again (the CLI's ``main``), a plain rerun over what the kill
   left, then the same input by path; every table read with ``spark.table`` must hold that one run's rows, equal
   row for row to the path output's, as Delta tables with their comments.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.slow, pytest.mark.full]  # three whole runs on Delta; tables by name: test_catalog_sink

REPO = Path(__file__).resolve().parents[1]
RUN_ID = "catalog-e2e"
NAMESPACE = "spark_catalog.kafka_audit"


@pytest.fixture(scope="module")
def delta_jars() -> list[str]:
    import kafka_jars

    try:
        jars = kafka_jars.spark_connector_jars()
    except kafka_jars.JarsUnavailable as error:
        pytest.fail(f"Delta's jars could not be resolved with Maven (make kafka): {error}")
    return [str(jar) for jar in jars if jar.name.startswith("delta-")]


def _config(root: Path, jars: list[str]) -> Path:
    """A local session with Delta (jars, extension, Delta's catalog as the session catalog) whose catalog is a
    Hive metastore (Derby) and warehouse under ``root``."""
    conf = {
        "spark.jars": ",".join(jars),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore'};create=true",
        "spark.sql.shuffle.partitions": "2",
    }
    path = root / "delta.yaml"
    path.write_text(yaml.safe_dump({"spark": {"conf": conf}}), encoding="utf-8")
    return path


def _environment() -> dict:
    return dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)


def _run_command(config: Path, source: Path, files: Path) -> list[str]:
    return [sys.executable, "-m", "offsets_audit.cli", "run", "--config", str(config), "--input", str(source),
            "--input-format", "segments", "--output-catalog", NAMESPACE, "--output", str(files), "--run-id", RUN_ID]


def _run_and_kill_in_write_stage(command: list[str], cwd: Path, delay: float) -> bool:
    """Start ``command``, SIGKILL its process group ``delay`` seconds after its write stage began; True when the
    kill landed before the run ended."""
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=_environment(), start_new_session=True)
    writing = threading.Event()

    def watch():
        for line in process.stderr:
            if line.startswith("[offsets-audit] write"):
                writing.set()
        writing.set()

    threading.Thread(target=watch, daemon=True).start()
    writing.wait()
    time.sleep(delay)
    killed = process.poll() is None
    if killed:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return killed


def test_run_by_name_on_delta_equals_the_path_output_reruns_and_survives_a_kill(tmp_path, delta_jars):
    from script_modules import load_script

    source = load_script("bench/kill.py", "kill_bench").make_history(tmp_path, seed=17)  # quarantine not empty
    config, files = _config(tmp_path, delta_jars), tmp_path / "files"

    killed = _run_and_kill_in_write_stage(_run_command(config, source, files), tmp_path, delay=1.0)

    check = subprocess.run([sys.executable, str(REPO / "tests" / "catalog_delta_check.py"), str(config), str(source),
                            NAMESPACE, str(files), str(tmp_path / "by-path"), RUN_ID], cwd=tmp_path,
                           capture_output=True, text=True, env=_environment())
    assert check.returncode == 0, check.stderr[-3000:]
    result = json.loads(check.stdout.strip().splitlines()[-1])
    print(f"kill landed: {killed}; killed run complete: {result['killed_run_complete']}")

    if result["killed_run_complete"]:  # the run ended before the kill: its tables must be whole
        assert not killed
        assert result["killed_run_tables"] == {name: t["by_path"] for name, t in result["tables"].items()}
    assert result["rerun_exit"] == 0 and result["path_exit"] == 0
    for name, table in result["tables"].items():
        assert table["run_ids"] == [RUN_ID], name
        assert table["by_name"] == table["by_path"] and table["differences"] == 0, name
        assert table["provider"] == "delta" and table["commented"], name
    assert result["tables"]["quarantine"]["by_name"][0] > 0
    assert result["manifest"]["format"] == "delta" and result["runs_rows"] == 1
    assert set(result["manifest"]["tables"]) == set(result["tables"])
