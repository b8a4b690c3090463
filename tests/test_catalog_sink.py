"""Tables by name (``sinks.catalog``): the path sink's contract kept in Spark's catalog.

On the session's own catalog (``spark_catalog``, in memory, no Delta: Parquet tables) in a schema of its own
under the test's folder. The same writes on Delta, and the whole job, run in ``test_catalog_delta.py``.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from chispa import assert_df_equality

from offsets_audit import tables
from offsets_audit.errors import UserError
from offsets_audit.sinks import Output
from offsets_audit.sinks.catalog import (
    RUNS_TABLE,
    Namespace,
    begin_catalog_run,
    catalog_run_manifest,
    complete_catalog_run,
    complete_catalog_runs,
    read_catalog_table,
    table_format,
    write_catalog_table,
)

pytestmark = pytest.mark.spark


def _namespace(spark, folder) -> Namespace:
    """A schema of the session catalog of its own, its managed tables under ``folder``."""
    ns = Namespace("spark_catalog", f"audit_{uuid.uuid4().hex[:8]}")
    spark.sql(f"CREATE SCHEMA {ns.sql} LOCATION '{folder}'")
    return ns


@pytest.fixture
def namespace(spark, tmp_path):
    ns = _namespace(spark, tmp_path / "warehouse")
    yield ns
    spark.sql(f"DROP SCHEMA IF EXISTS {ns.sql} CASCADE")


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """Two runs written by name (``r1`` with two findings, ``r2`` with one) and ``r1`` by path too: the runs
    every test below reads (writing a run is the costly part)."""
    root = tmp_path_factory.mktemp("catalog")
    ns = _namespace(spark, root / "warehouse")
    by_name, by_path = Output(path=str(root / "files"), catalog=str(ns)), Output(path=str(root / "out"))
    names = by_name.write_run(spark, "r1", _run(spark, [1, 2]))
    by_name.write_run(spark, "r2", _run(spark, [4]))
    by_path.write_run(spark, "r1", _run(spark, [1, 2]))
    yield ns, names, by_name, by_path
    spark.sql(f"DROP SCHEMA IF EXISTS {ns.sql} CASCADE")


def _findings(spark, ids):
    rows = [{"id": f"f{i}", "group_id": f"group-{i}", "group_type": "consumer", "rule": "partition_owned_twice",
             "severity": "error", "time": dt.datetime(2026, 11, 22, 3, i), "message": "m", "evidence": [f"0:{i}"],
             "details": "{}", "data_gap": False, "data_gap_quarantined": 0} for i in ids]
    return spark.createDataFrame(rows, tables.schema("findings"))


def _run(spark, ids):
    """A run's frames: findings with rows, every other table empty (None)."""
    return {name: (_findings(spark, ids) if name == "findings" else None)
            for name in tables.TABLES if name != "decoded"}


def test_namespace_is_catalog_dot_schema_and_a_mistake_names_the_fix():
    assert str(Namespace.parse("main.kafka_audit")) == "main.kafka_audit"
    assert Namespace.parse("main.kafka_audit").table("findings") == "`main`.`kafka_audit`.`findings`"
    for wrong in ("kafka_audit", "main.kafka_audit.findings", "main..x", ""):
        with pytest.raises(UserError, match="--output-catalog main.kafka_audit"):
            Namespace.parse(wrong)
    with pytest.raises(UserError, match="<catalog>.<schema>"):
        Output(path="out", catalog="kafka_audit").check()


def test_every_table_is_written_with_its_schema_and_comments_even_empty(spark, written):
    namespace, names, _, _ = written
    assert table_format(spark, namespace) == "parquet"  # no Delta in this session
    assert names == {name: f"{namespace}.{name}" for name in tables.TABLES if name != "decoded"}
    for name in names:
        table = spark.table(namespace.table(name))
        assert table.schema.fieldNames() == tables.schema(name, with_run_id=True).fieldNames(), name
        assert [f.dataType for f in table.schema] == [f.dataType for f in tables.schema(name, with_run_id=True)], name
        comment, columns = tables.comments(name)
        extended = {r["col_name"]: (r["data_type"], r["comment"]) for r in
                    spark.sql(f"DESCRIBE TABLE EXTENDED {namespace.table(name)}").collect()}
        assert all(extended[c][1] == text for c, text in columns.items()), name
        assert extended["Comment"][0] == comment and extended["Provider"][0] == "parquet", name
    assert spark.table(namespace.table("group_state")).count() == 0
    assert_df_equality(read_catalog_table(spark, namespace, "findings", "r1"), _findings(spark, [1, 2]),
                       ignore_row_order=True)


def test_the_same_rows_as_the_path_output(spark, written):
    _, names, by_name, by_path = written
    for name in names:
        assert_df_equality(by_name.read_table(spark, name, "r1"), by_path.read_table(spark, name, "r1"),
                           ignore_row_order=True)


def test_the_manifest_row_tells_a_complete_run_from_one_killed_while_writing(spark, written):
    namespace, names, by_name, _ = written
    manifest = catalog_run_manifest(spark, namespace, "r1")
    assert manifest["tables"] == names and manifest["format"] == "parquet"
    assert manifest["completed_at"].endswith("Z") or manifest["completed_at"][-6] in "+-"
    assert [m["run_id"] for m in complete_catalog_runs(spark, namespace)] == ["r1", "r2"]
    assert by_name.run_manifest(spark, "r2")["tables"]["findings"] == f"{namespace}.findings"
    # A rerun of r2 killed after it started writing: r2's row is gone until a rerun completes.
    begin_catalog_run(spark, namespace, "r2")
    try:
        assert catalog_run_manifest(spark, namespace, "r2") is None
        assert [m["run_id"] for m in by_name.complete_runs(spark)] == ["r1"]
    finally:
        complete_catalog_run(spark, namespace, "r2", "parquet", names)
    assert RUNS_TABLE not in tables.TABLES


def test_a_rerun_replaces_the_runs_rows_also_with_none_and_keeps_other_runs(spark, namespace):
    write_catalog_table(_findings(spark, [1, 2, 3]), namespace, "findings", "r1")
    write_catalog_table(_findings(spark, [4]), namespace, "findings", "r2")
    write_catalog_table(_findings(spark, [5]), namespace, "findings", "r1")
    assert sorted((r["run_id"], r["id"]) for r in spark.table(namespace.table("findings")).collect()) == [
        ("r1", "f5"), ("r2", "f4")]
    write_catalog_table(_findings(spark, []), namespace, "findings", "r1")
    assert read_catalog_table(spark, namespace, "findings", "r1").count() == 0
    assert [r["id"] for r in read_catalog_table(spark, namespace, "findings", "r2").collect()] == ["f4"]


def test_a_table_gains_the_columns_a_newer_version_adds_and_nulls_for_dropped_ones(spark, namespace):
    old = spark.createDataFrame([(1, "a")], "n int, gone string")
    write_catalog_table(old, namespace, "scratch", "r1")
    write_catalog_table(spark.createDataFrame([(2, 3)], "n int, added bigint"), namespace, "scratch", "r2")
    rows = {r["run_id"]: r.asDict() for r in spark.table(namespace.table("scratch")).collect()}
    assert rows["r1"] == {"n": 1, "gone": "a", "added": None, "run_id": "r1"}
    assert rows["r2"] == {"n": 2, "gone": None, "added": 3, "run_id": "r2"}


def test_a_missing_table_reads_as_none(spark, namespace):
    assert read_catalog_table(spark, namespace, "findings", "r1") is None
    assert Output(catalog=str(namespace)).run_manifest(spark, "r1") is None


def test_tables_yaml_describes_every_table_and_column_and_nothing_else():
    import yaml
    from importlib import resources

    described = yaml.safe_load((resources.files("offsets_audit") / "tables.yaml").read_text(encoding="utf-8"))
    for name in tables.TABLES:
        comment, columns = tables.comments(name)
        assert comment, f"tables.yaml: describe table {name}"
        assert list(columns) == tables.schema(name).fieldNames(), f"tables.yaml: {name}'s columns, in order"
        assert all(text.strip() for text in columns.values()), name
    for name, entry in described.items():
        assert name in tables.TABLES or entry.get("like") in tables.TABLES, f"tables.yaml: {name} is no table"
