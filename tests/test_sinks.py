"""Sinks write idempotently: a rerun of a run id replaces that run's rows and never duplicates them."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality

from offsets_audit.sinks import write_table
from offsets_audit.sinks.delta import spark_has_delta

pytestmark = pytest.mark.spark


def _rows(spark, values):
    return spark.createDataFrame([(v, f"group-{v}") for v in values], "n int, group_id string")


@pytest.mark.parametrize("fmt", ["parquet", "delta"])
def test_rerun_of_a_run_id_replaces_its_rows_and_keeps_other_runs(spark, tmp_path, fmt):
    out = str(tmp_path / "tables")
    write_table(_rows(spark, [1, 2, 3]), out, "scratch", "2026-11-21", fmt)
    write_table(_rows(spark, [10, 11]), out, "scratch", "2026-11-22", fmt)
    write_table(_rows(spark, [20]), out, "scratch", "2026-11-22", fmt)  # rerun of the same night

    if fmt == "parquet":
        table = spark.read.parquet(f"{out}/scratch")
    else:
        from deltalake import DeltaTable

        assert DeltaTable.is_deltatable(f"{out}/scratch")
        table = spark.createDataFrame(DeltaTable(f"{out}/scratch").to_pandas())
    got = table.select("n", "group_id", "run_id")
    expected = spark.createDataFrame(
        [(1, "group-1", "2026-11-21"), (2, "group-2", "2026-11-21"), (3, "group-3", "2026-11-21"),
         (20, "group-20", "2026-11-22")], "n int, group_id string, run_id string")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_delta_without_jars_writes_a_real_delta_table_through_deltalake(spark, tmp_path):
    assert not spark_has_delta(spark), "this machine has no Delta jars: the deltalake path is the one under test"
    from deltalake import DeltaTable

    path = write_table(_rows(spark, [1]), str(tmp_path), "scratch", "r1", "delta")
    write_table(_rows(spark, [2]), str(tmp_path), "scratch", "r2", "delta")
    table = DeltaTable(path)
    assert table.version() == 1
    assert table.metadata().partition_columns == ["run_id"]
    assert sorted(table.to_pandas()["n"]) == [1, 2]


def test_unknown_format_names_the_fix(spark, tmp_path):
    from offsets_audit.errors import UserError

    with pytest.raises(UserError, match="output.format"):
        write_table(_rows(spark, [1]), str(tmp_path), "t", "r", "orc")


def test_both_parquet_writers_store_a_finding_time_as_utc_micros(spark, tmp_path):
    """Spark's writer (per table, where the executors may not share this file system) and the one-action pyarrow
    writer (a local session) store ``findings.time`` alike, so pandas and pyarrow read the same table wherever the
    run ran; Spark's INT96 default reads there without its time zone."""
    import datetime as dt

    import pyarrow.parquet as pq

    from offsets_audit import tables
    from offsets_audit.sinks.parquet import write_parquet_run

    at = dt.datetime(2025, 7, 31, 22, 18, 20, 214000)
    findings = tables.conform(spark.createDataFrame([("g", "some_rule", at)], "group_id string, rule string, "
                                                                              "time timestamp"), "findings")
    spark.conf.unset("spark.sql.parquet.outputTimestampType")
    by_spark = write_table(findings, str(tmp_path / "spark"), "findings", "r1")
    by_pyarrow = write_parquet_run(spark, str(tmp_path / "pyarrow"), "r1", {"findings": findings})
    assert by_pyarrow is not None, "the tests' session is a local one"
    types = [pq.read_table(f"{path}/run_id=r1").schema.field("time").type for path in (by_spark, by_pyarrow["findings"])]
    assert types[0] == types[1] and str(types[0]) == "timestamp[us, tz=UTC]"
    values = [pq.read_table(f"{path}/run_id=r1").column("time").to_pylist() for path in (by_spark, by_pyarrow["findings"])]
    assert values[0] == values[1] == [at.replace(tzinfo=dt.timezone.utc)]
