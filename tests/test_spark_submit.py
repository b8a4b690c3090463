"""The nightly job under spark-submit with the package shipped as a --py-files zip (Makefile target ``dist``).

The editable install of this venv is hidden from every Python process Spark starts (a ``sitecustomize``
removes ``src/`` from ``sys.path``), so the driver and the Python workers can only import ``offsets_audit``
from the zip: config defaults and codec schemas are read through importlib.resources from inside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
RUN_ID = "submit-test"


def build_py_files_zip(target: Path) -> Path:
    """The ``make dist`` zip step: ``cd src && python -m zipfile -c <zip> offsets_audit``."""
    subprocess.run([sys.executable, "-m", "zipfile", "-c", str(target), "offsets_audit"], cwd=REPO / "src",
                   check=True)
    return target


@pytest.fixture(scope="module")
def submitted(tmp_path_factory):
    from offsets_audit.simulate import simulate

    root = tmp_path_factory.mktemp("spark_submit")
    simulate(str(root / "history"), groups=4, hours=0.25, seed=5, formats=("segments",),
             faults=("wrong_assignment", "epoch_regression", "early_assignment"))
    py_files = build_py_files_zip(root / "offsets_audit.zip")

    hide_src = root / "hide_src"
    hide_src.mkdir()
    (hide_src / "sitecustomize.py").write_text(
        "import sys\n"
        f"sys.path[:] = [p for p in sys.path if p.rstrip('/') != {str(REPO / 'src')!r}]\n")
    config = root / "nightly-test.yaml"
    config.write_text(f"run_id: {RUN_ID}\n"
                      "output:\n  format: parquet\n  html_report: true\n"
                      "spark:\n  master: local[1]   # spark-submit's --master must win\n")
    events = root / "events"
    events.mkdir()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=str(hide_src))
    command = [str(SPARK_SUBMIT), "--master", "local[2]",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
               "--conf", "spark.eventLog.enabled=true", "--conf", "spark.eventLog.compress=false",
               "--conf", f"spark.eventLog.dir={events}",
               "--py-files", str(py_files), str(REPO / "jobs" / "nightly_audit.py"),
               "--config", str(config), "--input", str(root / "history" / "segments"),
               "--output", str(root / "out")]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    return {"root": root, "out": root / "out", "events": events, "env": env, "zip": py_files, "done": done}


def _table(submitted, name: str) -> pd.DataFrame:
    return pd.read_parquet(submitted["out"] / name, filters=[("run_id", "=", RUN_ID)])


def test_py_files_zip_holds_the_package_data(tmp_path):
    names = set(zipfile.ZipFile(build_py_files_zip(tmp_path / "offsets_audit.zip")).namelist())
    assert {"offsets_audit/__init__.py", "offsets_audit/defaults.yaml", "offsets_audit/schemas/record_types.json",
            "offsets_audit/job.py"} <= names


@pytest.mark.spark
@pytest.mark.slow
def test_package_is_importable_only_from_the_zip(submitted):
    hidden = subprocess.run([sys.executable, "-c", "import offsets_audit"], env=submitted["env"],
                            capture_output=True, text=True)
    assert hidden.returncode != 0 and "ModuleNotFoundError" in hidden.stderr
    seen = subprocess.run([sys.executable, "-c", "import offsets_audit; print(offsets_audit.__file__)"],
                          env=dict(submitted["env"], PYTHONPATH=f"{submitted['zip']}:{submitted['env']['PYTHONPATH']}"),
                          capture_output=True, text=True, check=True)
    assert seen.stdout.strip().startswith(str(submitted["zip"]))


@pytest.mark.spark
@pytest.mark.slow
def test_nightly_job_runs_under_spark_submit(submitted):
    done = submitted["done"]
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"run {RUN_ID}: read " in done.stdout


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("table", ["group_state", "members", "group_events", "target_assignments", "offsets",
                                   "assignor_audit", "findings", "rebalances", "latency_summary"])
def test_output_table_has_rows(submitted, table):
    assert submitted["done"].returncode == 0, submitted["done"].stderr[-4000:]
    rows = _table(submitted, table)
    assert len(rows) > 0, f"{table} has no rows of run {RUN_ID}"


@pytest.mark.spark
@pytest.mark.slow
def test_summary_json_and_report_are_written(submitted):
    assert submitted["done"].returncode == 0, submitted["done"].stderr[-4000:]
    summary = json.loads((submitted["out"] / "summary" / f"{RUN_ID}.json").read_text())
    records = summary["records"]
    assert summary["run_id"] == RUN_ID
    assert records["read"] > 0 and records["read"] == records["decoded"] + records["quarantined"]
    assert sum(summary["findings"].values()) == len(_table(submitted, "findings"))
    assert (submitted["out"] / "report" / f"{RUN_ID}.html").stat().st_size > 0
    assert (submitted["out"] / "quarantine").is_dir()


@pytest.mark.spark
@pytest.mark.slow
def test_spark_submit_settings_are_kept(submitted):
    """The job's local defaults (config spark.master, shuffle partitions) never replace what was submitted."""
    assert submitted["done"].returncode == 0, submitted["done"].stderr[-4000:]
    log = "".join(p.read_text(errors="replace") for p in submitted["events"].rglob("*") if p.is_file())
    assert '"spark.master":"local[2]"' in log
    assert '"spark.master":"local[1]"' not in log
    assert '"spark.sql.shuffle.partitions":"2"' in log
