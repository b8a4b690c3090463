"""Delta tables: Spark's ``delta`` format where the Delta jars are on the classpath, else the ``deltalake`` package.

Either way the result is a real Delta table partitioned by ``run_id``, and a rerun of a run id replaces
exactly that run's rows in one commit (``replaceWhere`` in Spark, an overwrite with a predicate in delta-rs),
also when the rerun has no rows: the table then exists with its schema and no rows for the run.

Without the jars, Spark's executors first write the rows as Parquet files into a staging folder; the
driver then streams those files into delta-rs batch by batch (bounded memory), cast to the table's schema
(timestamps as UTC ``timestamp``, as Spark's Delta writer stores them), and commits once.
"""

from __future__ import annotations

import uuid

from pyspark.sql import functions as F

from offsets_audit.errors import UserError
from offsets_audit.sinks.files import FileSystem
from offsets_audit.spark_api import has_data_source, read_refusal

_STAGING = "_staging-"


#: What Delta answers when its jars are on the classpath but the session was built without its extension.
_UNCONFIGURED = "DELTA_CONFIGURE_SPARK_SESSION_WITH_EXTENSION_AND_CATALOG"
#: Spark settings a session needs for Delta's Spark writer (Databricks sets them itself).
DELTA_SESSION_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
_noted: set[int] = set()


def spark_has_delta(spark) -> bool:
    """True when Spark's own Delta writer can be used: Databricks (classic or Spark Connect), or the Delta jars
    handed to the session (``--packages io.delta:delta-spark_<spark>_2.13:<delta>``, ``spark.jars``) with Delta's
    extension and catalog set (``DELTA_SESSION_CONF``). Jars without the extension: the ``deltalake`` package
    writes instead, with a note naming the two settings."""
    import sys

    if not has_data_source(spark, "delta"):
        return False
    refusal = read_refusal(spark, "delta", f"/offsets-audit-probe-{uuid.uuid5(uuid.NAMESPACE_URL, 'delta')}")
    if refusal is None or _UNCONFIGURED not in refusal:
        return True
    if id(spark) not in _noted:
        _noted.add(id(spark))
        settings = " ".join(f"--conf {key}={value}" for key, value in DELTA_SESSION_CONF.items())
        print("offsets-audit: note: Delta's jars are on the classpath but the session lacks Delta's extension; "
              f"writing Delta tables through the deltalake package (for Spark's own Delta writer: {settings})",
              file=sys.stderr)
    return False


def _sql_string(value: str) -> str:
    """A string literal for Spark SQL (backslash escapes)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _datafusion_string(value: str) -> str:
    """A string literal for delta-rs predicates (DataFusion SQL: a quote is doubled)."""
    return "'" + value.replace("'", "''") + "'"


def _needs_jars(path: str) -> None:
    if "://" in path and not path.startswith("file://"):
        raise UserError(f"cannot use the Delta table {path} without the Delta jars",
                        fix="hand Spark the Delta jars (--packages io.delta:delta-spark_4.2_2.13:4.4.0 on Spark 4.2), "
                            "or use output.format: parquet")


def write_delta_table(df, output_path: str, table: str, run_id: str) -> str:
    from offsets_audit.sinks.paths import table_path

    path = table_path(output_path, table)
    tagged = df.drop("run_id").withColumn("run_id", F.lit(run_id))
    if spark_has_delta(df.sparkSession):
        (tagged.write.format("delta").mode("overwrite")
               .option("replaceWhere", f"run_id = {_sql_string(run_id)}")
               .option("partitionOverwriteMode", "static")  # the predicate says what is replaced, not the rows
               .option("mergeSchema", "true")
               .partitionBy("run_id").save(path))
        return path
    _needs_jars(path)
    return _write_with_deltalake(tagged, table, path, run_id)


def _arrow_schema(table: str, staged):
    """The table's Arrow schema (registry columns, then any extra input columns the staged files carry)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from offsets_audit import tables

    if table not in tables.TABLES:
        return staged
    known = to_arrow_schema(tables.schema(table, with_run_id=True), timezone="UTC")
    extra = [f for f in staged if f.name not in set(known.names)]
    return pa.schema(list(known) + extra)


def _remove_staging_leftovers(fs: FileSystem, path: str, run_id: str) -> None:
    from offsets_audit.sinks.paths import escape_partition_value

    escaped = escape_partition_value(run_id)
    for name in fs.list_names(path):
        if name.startswith(_STAGING) and name[len(_STAGING):].partition("-")[2] == escaped:
            fs.delete(f"{path}/{name}")


def _write_with_deltalake(tagged, table: str, path: str, run_id: str) -> str:
    import pyarrow.dataset as ds
    from deltalake import DeltaTable, write_deltalake

    from offsets_audit.sinks.paths import escape_partition_value

    fs = FileSystem(tagged.sparkSession, path)
    _remove_staging_leftovers(fs, path, run_id)
    staging = f"{path}/{_STAGING}{uuid.uuid4().hex}-{escape_partition_value(run_id)}"
    tagged.write.mode("error").parquet(staging)
    try:
        staged = ds.dataset(staging, format="parquet").schema
        dataset = ds.dataset(staging, format="parquet", schema=_arrow_schema(table, staged))
        reader = dataset.scanner(batch_size=64_000).to_reader()
        exists = DeltaTable.is_deltatable(path)
        write_deltalake(
            path, reader, mode="overwrite", partition_by=["run_id"],
            predicate=f"run_id = {_datafusion_string(run_id)}" if exists else None,
            schema_mode="merge" if exists else None,
        )
    finally:
        fs.delete(staging)
    return path


def remove_delta_run(spark, output_path: str, table: str, run_id: str) -> None:
    from offsets_audit.sinks.paths import table_path

    path = table_path(output_path, table)
    if spark_has_delta(spark):
        existing = _spark_delta_table(spark, path)
        if existing is not None:
            # An empty overwrite of the run's rows: one commit removing them, through the same writer as
            # write_delta_table (no SQL DELETE, which needs Delta's session extension configured).
            (existing.limit(0).write.format("delta").mode("overwrite")
             .option("replaceWhere", f"run_id = {_sql_string(run_id)}")
             .option("partitionOverwriteMode", "static").save(path))
        return
    _needs_jars(path)
    from deltalake import DeltaTable

    if DeltaTable.is_deltatable(path):
        DeltaTable(path).delete(f"run_id = {_datafusion_string(run_id)}")


def _spark_delta_table(spark, path: str):
    """The Delta table at ``path`` read through Spark, None when there is none."""
    try:
        df = spark.read.format("delta").load(path)
        df.schema  # noqa: B018 - analysis is where a missing table shows on Spark Connect
        return df
    except Exception:  # noqa: BLE001 - not a Delta table (or no folder at all)
        return None


def read_delta_run(spark, output_path: str, table: str, run_id: str):
    from offsets_audit import tables
    from offsets_audit.sinks.paths import table_path

    path = table_path(output_path, table)
    known = table in tables.TABLES
    if spark_has_delta(spark):
        df = _spark_delta_table(spark, path)
        if df is None:
            return None
        df = df.filter(F.col("run_id") == run_id).drop("run_id")
        return tables.conform(df, table) if known else df
    _needs_jars(path)
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(path):
        return None
    files = DeltaTable(path).file_uris(file_pruning_predicate=[("run_id", "=", run_id)])
    if not files:
        return tables.empty(spark, table) if known else None
    reader = spark.read.schema(tables.schema(table)) if known else spark.read
    return reader.parquet(*files)
