"""notebooks/explore reads tables by name: both forms run against a run written into ``spark_catalog.<schema>``.

``offsets-audit run --output-catalog`` writes the run's tables into the session catalog of its own local
session, kept in Spark's Hive metastore in its working folder; the Databricks source as a plain script, then the
Jupyter notebook through nbclient, run in that folder with ``OFFSETS_AUDIT_CATALOG`` set and read them by name.
Each is its own JVM (the embedded metastore admits one at a time), so the module is ``full``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.full]

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
RUN_ID = "nb-by-name"
NAMESPACE = "spark_catalog.nb_audit"


def _env(**extra) -> dict:
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", ""),
                "OFFSETS_AUDIT_CATALOG": NAMESPACE, "OFFSETS_AUDIT_RUN_ID": "", "OFFSETS_AUDIT_GROUP_ID": "",
                "OFFSETS_AUDIT_TABLES": "", "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def metastore(tmp_path_factory):
    """A folder whose Hive metastore holds one run's tables by name, written by ``offsets-audit run``."""
    from offsets_audit.simulate import simulate

    root = tmp_path_factory.mktemp("by-name")
    simulate(str(root / "history"), groups=8, hours=0.5, seed=11, formats=("segments",),
             faults=("wrong_assignment", "epoch_regression", "early_assignment"))
    done = subprocess.run([sys.executable, "-m", "offsets_audit.cli", "run", "--input",
                           str(root / "history" / "segments"), "--input-format", "segments", "--output",
                           str(root / "files"), "--output-catalog", NAMESPACE, "--run-id", RUN_ID],
                          cwd=root, capture_output=True, text=True, timeout=900, env=_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert (root / "metastore_db").is_dir() and (root / "spark-warehouse" / "nb_audit.db" / "findings").is_dir()
    return root


def test_databricks_source_reads_the_tables_by_name(metastore):
    plots = metastore / "plots"
    done = subprocess.run([sys.executable, str(NOTEBOOKS / "explore.py")], cwd=metastore, capture_output=True,
                          text=True, timeout=600, env=_env(OFFSETS_AUDIT_PLOTS=str(plots), MPLBACKEND="Agg"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"tables: {NAMESPACE}" in done.stdout
    assert f"run id: {RUN_ID}" in done.stdout
    assert "exploring group " in done.stdout
    saved = {p.name for p in plots.glob("*.png")}
    assert {"epoch_timeline.png", "rebalance_latency.png"} <= saved, saved


def test_notebook_reads_the_tables_by_name_in_jupyter(metastore, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    prefix = tmp_path / "kernel"
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(prefix),
                    "--name", "offsets-audit-venv"], check=True, capture_output=True)
    for key, value in _env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend shows the figures
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))

    notebook = nbformat.read(NOTEBOOKS / "explore.ipynb", as_version=4)
    NotebookClient(notebook, kernel_name="offsets-audit-venv", timeout=600,
                   resources={"metadata": {"path": str(metastore)}}).execute()

    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and o.name == "stdout")
    assert f"tables: {NAMESPACE}" in text and f"run id: {RUN_ID}" in text and "exploring group " in text
    assert len([o for o in outputs if "image/png" in o.get("data", {})]) >= 3
