"""The commands with tables by name: ``check --output-catalog`` reads the run's findings by name, and
``run --incremental --output-catalog`` writes its tables by name while its state stays in its checkpoint.

On the suite's session and its own catalog (``spark_catalog``, Parquet tables), in a schema of its own whose
tables live under the test's folder. Delta tables by name, killed and rerun: ``test_catalog_delta.py``.
"""

from __future__ import annotations

import json
import shutil

import pytest

from offsets_audit import tables
from offsets_audit.sinks.catalog import RUNS_TABLE, Namespace
from replay_support import HISTORIES

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.full]  # a whole run each (minutes on 2 busy cores)

HISTORY = "history-assignment-batching-00000000000000000000.log"


@pytest.fixture
def log_dir(tmp_path):
    """One partition's log: a consumer group whose assignments come in batches."""
    folder = tmp_path / "logs" / "__consumer_offsets-0"
    folder.mkdir(parents=True)
    shutil.copy(HISTORIES / HISTORY, folder / "00000000000000000000.log")
    return folder.parent


def _table_names(spark, ns: Namespace) -> set[str]:
    return {r["tableName"] for r in spark.sql(f"SHOW TABLES IN {ns.sql}").collect() if not r["isTemporary"]}


def _run_ids(spark, ns: Namespace, name: str) -> list[str]:
    return sorted(r["run_id"] for r in spark.table(ns.table(name)).select("run_id").distinct().collect())


def _rows(spark, ns: Namespace, name: str) -> list[str]:
    """The table's rows, without what a run measures of itself, as sorted JSON (order-independent)."""
    df = spark.table(ns.table(name)).drop("run_id")
    df = tables.without_measured(tables.conform(df, name), name) if name in tables.TABLES else df
    return sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str) for r in df.collect())


def test_check_by_name_judges_the_findings_it_reads_by_name(spark, namespace, log_dir, tmp_path, capsys):
    from offsets_audit.cli import main

    files = tmp_path / "files"
    code = main(["check", "--input", str(log_dir), "--input-format", "segments", "--output", str(files),
                 "--output-catalog", str(namespace), "--run-id", "ci-1", "--fail-on", "info",
                 "--json-summary", str(tmp_path / "summary.json")])
    out = capsys.readouterr().out.strip().splitlines()
    findings = spark.table(namespace.table("findings")).collect()
    assert findings, "the batching history has findings at info at least"
    assert code == 1 and out[-1].startswith("offsets-audit check: FAIL run ci-1:"), out[-3:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    by_rule: dict[str, int] = {}
    for row in findings:
        by_rule[row["rule"]] = by_rule.get(row["rule"], 0) + 1
    assert {rule: sum(counts.values()) for rule, counts in summary["findings_by_rule"].items()} == by_rule
    assert _table_names(spark, namespace) == {name for name in tables.TABLES if name != "decoded"} | {RUNS_TABLE}
    assert spark.table(namespace.table(RUNS_TABLE)).select("run_id").collect()[0]["run_id"] == "ci-1"
    assert (files / "report" / "ci-1.html").is_file() and (files / "summary" / "ci-1.json").is_file()
    assert not [p for p in files.iterdir() if p.name in tables.TABLES], "no table written under the path"


def test_incremental_by_name_reruns_its_run_id_and_keeps_its_state_in_the_checkpoint(spark, namespace, log_dir,
                                                                                        tmp_path, capsys):
    from offsets_audit.cli import main

    checkpoint, files = tmp_path / "checkpoint", tmp_path / "files"
    command = ["run", "--incremental", "--checkpoint", str(checkpoint), "--input", str(log_dir), "--input-format",
               "segments", "--output", str(files), "--output-catalog", str(namespace), "--run-id", "night-1"]
    assert main(command) == 0, capsys.readouterr().err[-2000:]
    manifest = spark.table(namespace.table(RUNS_TABLE)).collect()[0]["tables"]
    names = set(manifest)
    assert {name for name in tables.TABLES if name != "decoded"} <= names, names
    assert _table_names(spark, namespace) == names | {RUNS_TABLE}, "the run's state is no table of the catalog"
    first = {name: _rows(spark, namespace, name) for name in names}
    assert first["group_state"] and first["members"], "the history's group is in the run's tables"

    assert main(command) == 0, capsys.readouterr().err[-2000:]  # the last run again, with its run id
    for name in names | {RUNS_TABLE}:
        assert _run_ids(spark, namespace, name) in ([], ["night-1"]), name
    assert {name: _rows(spark, namespace, name) for name in names} == first, "a rerun replaces its own rows"
    assert _run_ids(spark, namespace, RUNS_TABLE) == ["night-1"]

    published = json.loads((checkpoint / "runs.json").read_text())
    runs = published["runs"] if isinstance(published, dict) else published
    assert [r["run_id"] for r in runs] == ["night-1"]
    assert runs[-1]["output"]["catalog"] == str(namespace)
    assert (checkpoint / "fold").is_dir(), "the replay's state stays in the checkpoint"
    assert not [p for p in files.iterdir() if p.name in tables.TABLES], "no table written under the path"
