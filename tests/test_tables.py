"""Every table of a run exists with its schema, empty or not, in Parquet and Delta, and a rerun of a run id
replaces that run's rows in every table, also with nothing."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality

from offsets_audit import plans, sinks, tables
from offsets_audit.sinks import read_table, write_run, write_table

pytestmark = pytest.mark.spark

FORMATS = ["parquet", "delta"]


def _types(schema) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def test_registry_names_every_table_once_with_a_parseable_schema():
    assert list(tables.TABLES) == ["group_state", "members", "group_events", "target_assignments", "offsets",
                                   "assignor_audit", "findings", "rebalances", "latency_summary", "rebalance_causes",
                                   "coordinator_load", "assignment_interval_whatif", "quarantine",
                                   "decoded"]
    for name in tables.TABLES:
        names = tables.schema(name).fieldNames()
        assert len(names) == len(set(names)) and "run_id" not in names, name
    assert {"rule", "group_id", "severity"} <= set(tables.schema("findings").fieldNames())
    with pytest.raises(KeyError, match="not a table"):
        tables.ddl("finding")


def test_conform_gives_every_table_exactly_its_registry_schema(spark):
    """``conform`` casts by SQL text: every table's types (nested ones included) must come back exactly, from
    columns of other types, missing columns and extra ones alike."""
    from pyspark.sql import functions as F

    for name in tables.TABLES:
        known = tables.schema(name)
        # every other column untyped (a bare null) or missing, in reverse order, plus one the registry does not know
        given = spark.range(1).select(*[F.lit(None).alias(f.name) for f in known.fields[::-2]],
                                      F.lit(1).alias("not a column"))
        got = tables.conform(given, name)
        extra = ["not a column"] if name in tables.OPEN_TABLES else []
        assert got.schema.fieldNames() == known.fieldNames() + extra, name
        assert [f.dataType for f in got.schema.fields[:len(known.fields)]] == [f.dataType for f in known.fields], name


def test_without_measured_leaves_out_the_columns_and_rows_that_follow_from_the_runs_own_timings(spark):
    """Two runs of one input agree on a table once ``without_measured`` has dropped what each measured of itself."""
    whatif = tables.empty(spark, "assignment_interval_whatif").unionByName(spark.createDataFrame(
        [("group", "g", 1000, "candidate", 2.5, True), ("cluster", None, None, "recommended", 9.0, None),
         ("cluster", None, 1000, "candidate", 2.5, None)],
        "level string, group_id string, interval_ms long, candidate string, coordinator_ms double, "
        "recommended boolean"), allowMissingColumns=True)
    kept = tables.without_measured(whatif, "assignment_interval_whatif")
    assert not set(kept.columns) & tables.MEASURED_COLUMNS["assignment_interval_whatif"]
    assert sorted((r.level, r.candidate) for r in kept.collect()) == [("cluster", "candidate"), ("group", "candidate")]
    findings = spark.createDataFrame([("a", "coordinator_partition_hogged"), ("b", "offset_regression"),
                                      ("c", None)], "id string, rule string")
    assert sorted(r.id for r in tables.without_measured(findings, "findings").collect()) == ["b", "c"]
    assert tables.without_measured(findings, "group_state") is findings


def test_sql_type_parses_back_to_the_same_type_with_awkward_nested_names(spark):
    from pyspark.sql import types as T

    awkward = T.StructType([
        T.StructField("offset", T.LongType()), T.StructField("a.b", T.StringType()),
        T.StructField("c:d", T.ArrayType(T.StructType([T.StructField("e`f", T.IntegerType())]))),
        T.StructField("m", T.MapType(T.StringType(), T.ArrayType(T.BinaryType()))),
        T.StructField("t", T.TimestampType()), T.StructField("x", T.DoubleType()),
    ])
    got = spark.range(1).selectExpr(f"CAST(NULL AS {plans.sql_type(awkward)}) AS {plans.quoted('v`1')}").schema
    assert got.fieldNames() == ["v`1"]
    assert got.fields[0].dataType == awkward


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(tables.TABLES))
def test_empty_in_empty_table_out_readable_with_its_schema(spark, tmp_path, name, fmt):
    out = str(tmp_path / "out")
    path = write_table(tables.empty(spark, name), out, name, "r1", fmt)

    got = read_table(spark, out, name, "r1", fmt)
    assert got is not None and got.count() == 0
    assert _types(got.schema) == _types(tables.schema(name))
    if fmt == "parquet":   # any Parquet reader given the schema sees the table, with no rows
        whole = spark.read.schema(tables.schema(name, with_run_id=True)).parquet(path)
    else:                  # the Delta log itself carries the schema
        from deltalake import DeltaTable

        delta = DeltaTable(path)
        assert delta.metadata().partition_columns == ["run_id"]
        assert [f.name for f in delta.schema().fields] == tables.schema(name, with_run_id=True).fieldNames()
        whole = spark.createDataFrame(delta.to_pandas(), tables.schema(name, with_run_id=True))
    assert whole.count() == 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_rerun_with_no_rows_replaces_the_runs_rows_and_keeps_other_runs(spark, tmp_path, fmt):
    """A rerun that finds nothing must not leave the earlier attempt's findings."""
    out = str(tmp_path / "out")
    schema = tables.schema("findings")
    row = ("f1", "g", "consumer", "rebalance_storm", "warning", None, "storm", ["1:7"], "{}", False, 0)
    write_table(spark.createDataFrame([row], schema), out, "findings", "night-1", fmt)
    write_table(spark.createDataFrame([row, ("f2",) + row[1:]], schema), out, "findings", "night-2", fmt)
    write_table(tables.empty(spark, "findings"), out, "findings", "night-2", fmt)   # the rerun: clean

    assert read_table(spark, out, "findings", "night-2", fmt).count() == 0
    assert_df_equality(read_table(spark, out, "findings", "night-1", fmt),
                       spark.createDataFrame([row], schema), ignore_nullable=True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_write_run_writes_every_table_and_then_the_manifest(spark, tmp_path, fmt):
    out = str(tmp_path / "out")
    frames = {name: None for name in tables.TABLES if name != "decoded"}
    write_run(spark, out, "r1", fmt, {**frames, "decoded": tables.empty(spark, "decoded")})
    assert read_table(spark, out, "decoded", "r1", fmt) is not None
    paths = write_run(spark, out, "r1", fmt, frames)      # rerun without output.write_decoded
    assert set(paths) == set(frames)
    for name in frames:
        assert read_table(spark, out, name, "r1", fmt).count() == 0
    assert read_table(spark, out, "decoded", "r1", fmt).count() == 0   # the earlier attempt's rows are gone
    manifest = sinks.run_manifest(spark, out, "r1")
    assert manifest["run_id"] == "r1" and set(manifest["tables"]) == set(frames)
    sinks.begin_run(spark, out, "r1")
    assert sinks.run_manifest(spark, out, "r1") is None    # while a rerun writes, the run is incomplete


def test_a_table_that_fails_to_write_leaves_the_run_incomplete_and_the_others_written(spark, tmp_path):
    """The tables are written side by side: one failing must not stop the others half-way, and the run
    gets no manifest (a rerun replaces it whole)."""
    out = str(tmp_path / "out")
    frames = {name: None for name in tables.TABLES if name != "decoded"}
    broken = spark.range(1).selectExpr("raise_error('boom') AS x")  # fails when the job runs
    with pytest.raises(Exception, match="boom"):
        write_run(spark, out, "r1", "parquet", {**frames, "zz_broken": broken})
    assert sinks.run_manifest(spark, out, "r1") is None
    for name in frames:
        assert read_table(spark, out, name, "r1", "parquet").count() == 0, name


def test_run_ids_with_path_characters_stay_one_partition(spark, tmp_path):
    out = str(tmp_path / "out")
    write_table(tables.empty(spark, "findings"), out, "findings", "2026-11-22T01:00/retry", "parquet")
    assert (tmp_path / "out" / "findings" / "run_id=2026-11-22T01%3A00%2Fretry").is_dir()
    whole = spark.read.parquet(str(tmp_path / "out" / "findings"))
    assert "run_id" in whole.columns


@pytest.mark.parametrize("write_decoded", [True, False])
def test_the_jobs_tables_have_the_registry_schemas(spark, tmp_path, monkeypatch, write_decoded):
    """The registry cannot drift: every DataFrame the job hands to the sinks has exactly the registry's
    columns and types (input-shaped tables may carry a dump's extra columns after them). Without the decoded
    table the job caches the log compacted (``codec.spark.compact``): the quarantine keeps its columns. The job tells
    the audit its record count: on this small history the pending rule runs without the hot-block prefilter."""
    import shutil

    from offsets_audit.audit import offsets_spark
    from offsets_audit.config import load_settings
    from offsets_audit.job import run_job
    from replay_support import HISTORIES

    seen: dict = {}
    real_write_run = sinks.write_run

    def recording_write_run(spark_, output_path, run_id, fmt, frames, **kwargs):
        seen.update({name: (None if df is None else df.schema) for name, df in frames.items()})
        return real_write_run(spark_, output_path, run_id, fmt, frames, **kwargs)

    monkeypatch.setattr(sinks, "write_run", recording_write_run)
    monkeypatch.setattr(offsets_spark, "_judged", lambda *args: pytest.fail("the prefilter ran on a small log"))
    logs = tmp_path / "logs" / "__consumer_offsets-0"
    logs.mkdir(parents=True)
    shutil.copy(HISTORIES / "history-assignment-batching-00000000000000000000.log", logs / "00000000000000000000.log")
    config = load_settings(overrides={"run_id": "drift", "source": {"kind": "segments", "path": str(logs.parent)},
                                    "output": {"path": str(tmp_path / "out"), "write_decoded": write_decoded,
                                               "html_report": False}})
    run_job(spark, config, progress=False)

    expected = set(tables.TABLES) - (set() if write_decoded else {"decoded"})
    assert set(seen) == expected, "a table the job writes is missing from offsets_audit.tables"
    for name, schema in seen.items():
        assert schema is not None, f"{name}: the job had no DataFrame for it on this history"
        known = _types(tables.schema(name))
        got = _types(schema)
        if name in tables.OPEN_TABLES:
            got = got[:len(known)]
        assert got == known, f"{name}: the job's schema differs from offsets_audit.tables"
