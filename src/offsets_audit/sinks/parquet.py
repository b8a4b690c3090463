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


def _swap_in(fs: FileSystem, output_path: str, table: str, run_id: str, staging: str) -> None:
    """Makes a fully written staging folder the run's partition of ``table``.

    A partition the run wrote before is renamed aside first and deleted only once the new one is in place, so a
    rerun never leaves the run without a partition; a crash in between leaves folders ``_leftovers`` finds.
    """
    from offsets_audit.sinks.paths import partition_path, table_path

    partition = partition_path(output_path, table, run_id)
    replaced = None
    if fs.exists(partition):
        replaced = f"{table_path(output_path, table)}/{_aside(_REPLACED, run_id)}"
        fs.rename(partition, replaced)
    fs.rename(staging, partition)
    if replaced:
        fs.delete(replaced)


#: Spark's setting for the Parquet type of its timestamps, and the type the tables' timestamps are written as.
OUTPUT_TIMESTAMP_TYPE = ("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")


def _has_timestamps(table: str) -> bool:
    """Whether ``table``'s rows may hold a timestamp column (a table of ``offsets_audit.tables`` with one, or a
    table of no known schema)."""
    from pyspark.sql.types import TimestampType

    from offsets_audit import tables

    return table not in tables.TABLES or any(isinstance(f.dataType, TimestampType) for f in tables.schema(table))


def timestamps_as_micros(spark) -> None:
    """Make Spark's Parquet writer store timestamps as the tables' other writer (pyarrow, ``write_parquet_run``)
    does: INT64 microseconds adjusted to UTC. Spark's default, INT96, holds the same instants, but pyarrow and
    pandas read it without its time zone, so one run's table would read differently by where it ran (the
    one-action writer serves local sessions only). Set on the session, not restored: tables are written side by
    side from several threads. A session that refuses the setting writes INT96."""
    key, value = OUTPUT_TIMESTAMP_TYPE
    try:
        spark.conf.set(key, value)
    except Exception:  # noqa: BLE001 - a restricted server: the same instants, in Spark's default type
        pass


def write_parquet_table(df, output_path: str, table: str, run_id: str) -> str:
    from offsets_audit.sinks.paths import table_path

    path = table_path(output_path, table)
    if _has_timestamps(table):
        timestamps_as_micros(df.sparkSession)
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
    _swap_in(fs, output_path, table, run_id, staging)
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


#: What the one-action writer's tasks report: a file they wrote and its rows.
_WRITTEN_DDL = "table string, file string, rows long"


def _file_writer(table: str, folder: str):
    """The ``mapInArrow`` body writing one task's rows of ``table`` as one Parquet file in ``folder`` (none for a
    task without rows), streamed batch by batch; yields the file's ``_WRITTEN_DDL`` row."""

    def write(batches):
        import uuid as _uuid

        import pyarrow as pa
        import pyarrow.parquet as pq

        writer, path, rows = None, None, 0
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                if writer is None:
                    path = f"{folder}/part-{_uuid.uuid4().hex}.snappy.parquet"
                    writer = pq.ParquetWriter(path, batch.schema, compression="snappy")
                writer.write_batch(batch)
                rows += batch.num_rows
        finally:
            if writer is not None:
                writer.close()
        if path is not None:
            yield pa.RecordBatch.from_pydict({"table": [table], "file": [path], "rows": [rows]},
                                             schema=pa.schema([("table", pa.string()), ("file", pa.string()),
                                                               ("rows", pa.int64())]))

    return write


def _written_schema(table: str, df):
    """The columns ``df`` (table ``table``'s rows) is written with, run_id aside: a known table's own schema
    (``tables.conform`` gave ``df`` exactly its columns and types; every column nullable, as Spark's writer stores
    them) without asking the session, which on Spark Connect is a round trip analysing ``df``'s plan; else
    ``df``'s."""
    from offsets_audit import tables

    if table in tables.TABLES and (table not in tables.OPEN_TABLES or df is None):
        return tables.schema(table)
    return df.drop("run_id").schema


def _copied_run(output_path: str, table: str, from_run: str, staging: str, schema) -> bool:
    """Copy run ``from_run``'s files of ``table`` into ``staging`` when they are a complete partition (``_SUCCESS``)
    of Parquet files holding exactly the columns ``schema`` (an Arrow schema) names, with its types: the rows
    ``from_run`` wrote, which writing them again would give, without reading them. ``run_id`` is the partition's
    name, never a column of its files, so the files serve any run id. False, with nothing copied, otherwise."""
    import os
    import shutil

    source = _local_partition(output_path, table, from_run)
    files = _files_holding(source, schema)
    if files is None:
        return False
    for name in files:
        shutil.copyfile(os.path.join(source, name), os.path.join(staging, name))
    return True


def _local_partition(output_path: str, table: str, run_id: str) -> str:
    """The folder of run ``run_id``'s partition of ``table`` under a local ``output_path``, as an absolute path."""
    import os

    from offsets_audit.sinks.files import local_path
    from offsets_audit.sinks.paths import partition_path

    return os.path.abspath(local_path(partition_path(output_path, table, run_id)))


def _partition_files(folder: str) -> list[str] | None:
    """The Parquet files of ``folder`` when it is a complete partition (``_SUCCESS``) holding Parquet files and
    nothing else but hidden files; None otherwise."""
    import os

    if not os.path.isdir(folder):
        return None
    names = sorted(os.listdir(folder))
    files = [n for n in names if not n.startswith(("_", "."))]
    if "_SUCCESS" not in names or not files or not all(n.endswith(".parquet") for n in files):
        return None
    return files


def _files_holding(folder: str, schema) -> list[str] | None:
    """The Parquet files of ``folder``, a complete partition (``_partition_files``) under a local path, when every one
    holds exactly the columns ``schema`` (an Arrow schema) names, with its types; None otherwise."""
    import os

    import pyarrow.parquet as pq

    files = _partition_files(folder)
    if files is None:
        return None
    wanted = [(field.name, field.type) for field in schema]
    if any([(field.name, field.type) for field in pq.read_schema(os.path.join(folder, n))] != wanted for n in files):
        return None
    return files


def read_parquet_run_as(spark, output_path: str, table: str, run_id: str, schema):
    """Run ``run_id``'s rows of ``table`` read with ``schema`` (a Spark schema), when its files under a local path
    hold exactly those columns and types (``_files_holding``): what reading them with the schema Spark infers from
    the files gives, without the Spark job that inference runs. None otherwise."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from offsets_audit.sinks.files import is_local
    from offsets_audit.sinks.paths import partition_path

    if not is_local(output_path):
        return None
    if _files_holding(_local_partition(output_path, table, run_id), to_arrow_schema(schema, timezone="UTC")) is None:
        return None
    return spark.read.schema(schema).parquet(partition_path(output_path, table, run_id))


def parquet_run_values(output_path: str, table: str, run_id: str, column: str) -> list | None:
    """The values of ``column`` in run ``run_id``'s rows of ``table``, read from its files on the driver (pyarrow, no
    Spark job): a complete partition (``_SUCCESS``) under a local path whose Parquet files all hold the column. None
    otherwise."""
    rows = parquet_run_rows(output_path, table, run_id, [column])
    return None if rows is None else [row[column] for row in rows]


def parquet_run_rows(output_path: str, table: str, run_id: str, columns: list[str]) -> list[dict] | None:
    """Run ``run_id``'s rows of ``table`` as ``{column: value}`` (``columns``, structs as dicts), read from its files on
    the driver (pyarrow, no Spark job): a complete partition (``_SUCCESS``) under a local path whose Parquet files
    all hold the columns. None otherwise. A small table's rows only: they are held in the driver's memory."""
    import os

    import pyarrow.parquet as pq

    from offsets_audit.sinks.files import is_local

    if not is_local(output_path):
        return None
    folder = _local_partition(output_path, table, run_id)
    files = _partition_files(folder)
    if files is None:
        return None
    rows: list[dict] = []
    for name in files:
        path = os.path.join(folder, name)
        if not set(columns) <= set(pq.read_schema(path).names):
            return None
        rows += pq.read_table(path, columns=columns).to_pylist()
    return rows


def write_parquet_run(spark, output_path: str, run_id: str, frames: dict,
                      carried: dict[str, str] | None = None) -> dict | None:
    """Run ``run_id``'s rows of every table in ``frames`` (``{table: DataFrame}``, each as ``write_parquet_table``
    takes it) in one Spark action, each table aside and swapped in as ``write_parquet_table`` does; ``{table:
    path}``, or None (nothing done) where the executors may not share the driver's file system: off a local session,
    or for an output path that is not local.

    One write per table was one query each, with a commit protocol of its own, for tables of a few rows on most runs.
    Here each table's partitions are written by its own tasks as Parquet files (pyarrow, snappy, one file a task),
    all the tables' tasks in one job; a table no task wrote a row of gets one empty file with its schema, as Spark
    writes one. Spark reads the files with the table's schema (``read_parquet_run``).

    ``carried`` (``{table: run id}``): tables whose rows are those an earlier run wrote (a run with nothing new takes
    them whole from the last run); their files are copied from that run's partition (``_copied_run``) instead of
    written again, each that cannot be copied written from its frame as any other. A known table whose frame is None
    has no rows: its one empty file is written here, with no Spark work."""
    import os

    from pyspark.sql.pandas.types import to_arrow_schema

    from offsets_audit.plans import session_cores
    from offsets_audit.sinks.files import is_local, local_path
    from offsets_audit.sinks.paths import table_path

    if not frames or session_cores(spark) is None or not is_local(output_path):
        return None
    fs = FileSystem(spark, output_path)
    staged: dict[str, str] = {}
    for table in frames:
        path = table_path(output_path, table)
        for leftover in _leftovers(fs, path, run_id):
            fs.delete(leftover)
        staging = os.path.abspath(local_path(f"{path}/{_aside(_STAGING, run_id)}"))
        os.makedirs(staging)
        staged[table] = staging
    copied = {table for table, from_run in (carried or {}).items()
              if frames.get(table) is not None and from_run != run_id
              and _copied_run(output_path, table, from_run, staged[table],
                              to_arrow_schema(_written_schema(table, frames[table]), timezone="UTC"))}
    parts = [df.drop("run_id").mapInArrow(_file_writer(table, staged[table]), _WRITTEN_DDL)
             for table, df in frames.items() if table not in copied and df is not None]
    with_files = set(copied)
    if parts:
        written = parts[0]
        for part in parts[1:]:
            written = written.unionByName(part)
        with_files.update(row["table"] for row in written.collect())
    for table, df in frames.items():
        if table not in with_files:  # no rows: one empty file carries the schema
            import pyarrow.parquet as pq

            schema = to_arrow_schema(_written_schema(table, df), timezone="UTC")
            pq.write_table(schema.empty_table(), f"{staged[table]}/part-00000-empty.snappy.parquet",
                           compression="snappy")
        open(f"{staged[table]}/_SUCCESS", "wb").close()
    paths = {}
    for table, staging in staged.items():
        _swap_in(fs, output_path, table, run_id, staging)
        paths[table] = table_path(output_path, table)
    return paths
