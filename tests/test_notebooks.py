"""notebooks/explore: the Jupyter and plain-script forms run against one audit run and draw their plots.

One small simulated history is audited once per module (the session SparkSession); the notebook then runs
in a Jupyter kernel of this venv and the Databricks source as a plain Python script, each with its own
local Spark reading the tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from script_modules import load_script

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
RUN_ID = "nb-test"


def _sync_module():
    return load_script("notebooks/sync.py", "notebooks_sync")


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    """Tables of one run over a small simulated history with injected faults."""
    from offsets_audit.config import load_settings
    from offsets_audit.job import run_job
    from offsets_audit.simulate import simulate

    root = tmp_path_factory.mktemp("notebooks")
    simulate(str(root / "history"), groups=8, hours=0.5, seed=11, formats=("segments",),
             faults=("wrong_assignment", "epoch_regression", "early_assignment"))
    config = load_settings(overrides={
        "run_id": RUN_ID,
        "source": {"kind": "segments", "path": str(root / "history" / "segments")},
        "output": {"path": str(root / "tables"), "format": "parquet", "html_report": False},
    })
    run_job(spark, config, progress=False)
    findings = spark.read.parquet(str(root / "tables" / "findings")).filter(f"run_id = '{RUN_ID}'")
    by_group = {r["group_id"]: r["n"] for r in findings.groupBy("group_id").count().withColumnRenamed("count", "n")
                .collect()}
    return {"tables": root / "tables", "root": root, "findings_by_group": by_group}


def _env(audited, **extra) -> dict:
    env = dict(os.environ)
    env.update({"OFFSETS_AUDIT_TABLES": str(audited["tables"]), "OFFSETS_AUDIT_RUN_ID": "",
                "OFFSETS_AUDIT_GROUP_ID": "", "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable})
    env.update(extra)
    return env


def test_ipynb_has_the_cells_of_the_databricks_source():
    import nbformat

    sync = _sync_module()
    expected = sync.databricks_cells((NOTEBOOKS / "explore.py").read_text(encoding="utf-8"))
    notebook = nbformat.read(NOTEBOOKS / "explore.ipynb", as_version=4)
    assert [(c.cell_type, c.source) for c in notebook.cells] == expected, \
        "explore.ipynb is out of date: run `python notebooks/sync.py`"
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code"), \
        "explore.ipynb is committed with outputs: run `python notebooks/sync.py`"


@pytest.mark.spark
@pytest.mark.slow
def test_notebook_runs_in_jupyter_and_draws_plots(audited, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    prefix = tmp_path / "kernel"
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(prefix),
                    "--name", "offsets-audit-venv"], check=True, capture_output=True)
    for key, value in _env(audited).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))

    notebook = nbformat.read(NOTEBOOKS / "explore.ipynb", as_version=4)
    NotebookClient(notebook, kernel_name="offsets-audit-venv", timeout=300,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()

    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3, "epoch timeline, rebalance latency and assignor plots"
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and o.name == "stdout")
    most = max(audited["findings_by_group"].items(), key=lambda item: item[1])
    assert f"run id: {RUN_ID}" in text
    assert "exploring group " in text
    chosen = text.split("exploring group ", 1)[1].split(" ", 1)[0]
    assert audited["findings_by_group"].get(chosen) == most[1], "the default group has the most findings"


@pytest.mark.spark
@pytest.mark.slow
def test_databricks_source_runs_as_a_plain_script(audited, tmp_path):
    plots = tmp_path / "plots"
    group = max(audited["findings_by_group"].items(), key=lambda item: item[1])[0]
    done = subprocess.run([sys.executable, str(NOTEBOOKS / "explore.py")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300,
                          env=_env(audited, OFFSETS_AUDIT_PLOTS=str(plots), OFFSETS_AUDIT_RUN_ID=RUN_ID,
                                   OFFSETS_AUDIT_GROUP_ID=group, MPLBACKEND="Agg"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"exploring group {group}" in done.stdout
    assert f"findings of {group}" in done.stdout
    assert "per-member counts, recorded vs re-run" in done.stdout or "no assignor re-runs" in done.stdout
    assert f"{group}: what each assignment interval would have done" in done.stdout or "no what-if for" in done.stdout
    saved = sorted(p.name for p in plots.glob("*.png"))
    assert {"epoch_timeline.png", "rebalance_latency.png"} <= set(saved), saved
    assert all((plots / name).stat().st_size > 5000 for name in saved)
    assert json.loads((audited["tables"] / "summary" / f"{RUN_ID}.json").read_text())["run_id"] == RUN_ID
