"""Parquet tables partitioned by ``run_id``; a rerun replaces its own partition whole, empty or not.

The executors write the run's rows (or, with none, one empty file carrying the schema) into a staging
folder beside the partitions (``_staging-...``, which Spark's readers skip); the driver then swaps it onto
``run_id=<id>`` with two renames. Rows of other runs are never touched. A run killed mid-write leaves at
most a staging or replaced folder, which the next write of that run id removes; Spark's dynamic
partition overwrite cannot replace a partition with nothing.
"""

from __future__ import annotations

import uuid

from pyspark.sql import functions as F

from offsets_audit.sinks.files import FileSystem

_STAGING = "_staging-"
_REPLACED = "_replaced-"


def _aside(prefix: str, run_id: str) -> str:
    from offsets_audit.sinks.paths import escape_partition_value

    return f"{prefix}{uuid.uuid4().hex}-{escape_partition_value(run_id)}"


def _leftovers(fs: FileSystem, path: str, run_id: str) -> list[str]:
    """Staging and replaced folders an interrupted write of ``run_id`` left in the table folder."""
    from offsets_audit.sinks.paths import escape_partition_value

    escaped = escape_partition_value(run_id)
    out = []
    for name in fs.list_names(path):
        for prefix in (_STAGING, _REPLACED):
            if name.startswith(prefix) and name[len(prefix):].partition("-")[2] == escaped:
                out.append(f"{path}/{name}")
    return out


def write_parquet_table(df, output_path: str, table: str, run_id: str) -> str:
    from offsets_audit.sinks.paths import partition_path, table_path

    path = table_path(output_path, table)
    fs = FileSystem(df.sparkSession, path)
    if not fs.usable:
        # Spark Connect on a remote store: no file system client here; Spark's dynamic partition
        # overwrite still replaces the run's rows when it has some.
        (df.withColumn("run_id", F.lit(run_id)).write.mode("overwrite")
           .option("partitionOverwriteMode", "dynamic").partitionBy("run_id").parquet(path))
        return path
    for leftover in _leftovers(fs, path, run_id):
        fs.delete(leftover)
    staging = f"{path}/{_aside(_STAGING, run_id)}"
    df.drop("run_id").write.mode("error").parquet(staging)
    partition = partition_path(output_path, table, run_id)
    replaced = None
    if fs.exists(partition):
        replaced = f"{path}/{_aside(_REPLACED, run_id)}"
        fs.rename(partition, replaced)
    fs.rename(staging, partition)
    if replaced:
        fs.delete(replaced)
    return path


def discard_staged(spark, output_path: str, table: str, run_id: str) -> None:
    """Remove what a failed write of ``run_id`` staged in ``table`` (its ``_staging-`` folders; a ``_replaced-``
    folder still holds the run's previous rows and is left to the next write of the run, which removes it)."""
    from offsets_audit.sinks.paths import table_path

    fs = FileSystem(spark, output_path)
    if not fs.usable:
        return
    for leftover in _leftovers(fs, table_path(output_path, table), run_id):
        if leftover.rsplit("/", 1)[-1].startswith(_STAGING):
            fs.delete(leftover)


def remove_parquet_run(spark, output_path: str, table: str, run_id: str) -> None:
    from offsets_audit.sinks.paths import partition_path, table_path

    fs = FileSystem(spark, output_path)
    if not fs.usable:
        return
    for leftover in _leftovers(fs, table_path(output_path, table), run_id):
        fs.delete(leftover)
    fs.delete(partition_path(output_path, table, run_id))


def read_parquet_run(spark, output_path: str, table: str, run_id: str):
    from offsets_audit import tables
    from offsets_audit.sinks.paths import partition_path, table_path

    fs = FileSystem(spark, output_path)
    partition = partition_path(output_path, table, run_id)
    known = table in tables.TABLES
    if fs.usable:
        if not fs.exists(table_path(output_path, table)):
            return None
        if not fs.exists(partition):
            return tables.empty(spark, table) if known else None
        reader = spark.read.schema(tables.schema(table)) if known else spark.read
        return reader.parquet(partition)
    reader = spark.read.schema(tables.schema(table, with_run_id=True)) if known else spark.read
    return reader.parquet(table_path(output_path, table)).filter(F.col("run_id") == run_id).drop("run_id")
