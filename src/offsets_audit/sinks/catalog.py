"""Tables by name: a run's tables as managed tables ``<catalog>.<schema>.<table>`` of Spark's catalog.

The contract of the tables written under a folder, kept in a catalog (Unity Catalog on Databricks, the session
catalog ``spark_catalog`` elsewhere), through DataFrame and SQL calls only, so a Spark Connect session writes
them as a classic one does:

* Every table of ``offsets_audit.tables`` is written on every run, with its schema, even with no rows. A table
  is created on first use with its column and table comments (``tables.comments``), partitioned by ``run_id``.
* A rerun of a run id replaces that run's rows, and only them, in one write per table, also when it has none:
  on Delta an overwrite of the rows ``run_id = <id>`` (what ``replaceWhere`` does, through
  ``DataFrameWriterV2.overwrite``); on Parquet tables an ``INSERT OVERWRITE`` of the static partition
  ``run_id = <id>``, which Spark empties even when nothing is inserted (its dynamic partition overwrite would
  leave an empty rerun's old rows behind).
* The run manifest is a table too, ``<catalog>.<schema>.runs``: a run's row is removed when it starts writing
  and written once every table holds its rows, so a run without one was killed or failed and is incomplete.

New tables are Delta where the session has it (Databricks, or ``spark.sql.catalog.spark_catalog`` set to Delta's
catalog) and Parquet otherwise; an existing table keeps the format it has. A column a newer version of a stage
adds is added to an existing table; one it dropped is written as nulls.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
import uuid
from dataclasses import dataclass
from typing import Literal

from offsets_audit.errors import UserError
from offsets_audit.plans import quoted, side_by_side, sql_type

__all__ = ["RUNS_TABLE", "Namespace", "catalog_run_manifest", "complete_catalog_runs", "local_session_conf",
           "namespace_location",
           "read_catalog_table", "remove_catalog_run", "table_format", "write_catalog_run", "write_catalog_table"]

#: The run manifest's table, beside the run's tables.
RUNS_TABLE = "runs"
RUNS_DDL = "format string, tables map<string,string>, completed_at timestamp"
RUNS_COMMENT = ("offsets-audit's run manifest: one row per complete run, written after every table of the run "
                "holds its rows. A run id with rows in the tables but none here was killed or failed while "
                "writing; rerun it with the same run id.")
RUNS_COLUMNS = {
    "format": "How the run's tables are stored: delta or parquet.",
    "tables": "Each table the run wrote, by name (<catalog>.<schema>.<table>).",
    "completed_at": "When the last table of the run was written (UTC).",
}
RUN_ID_COMMENT = "The run that wrote the row; a rerun of a run id replaces that run's rows."

TableFormat = Literal["delta", "parquet"]

_NAME_PART = re.compile(r"^[^.`\s]+$")


@dataclass(frozen=True)
class Namespace:
    """A ``<catalog>.<schema>`` that holds a run's tables (``output.catalog``)."""

    catalog: str
    schema: str

    @classmethod
    def parse(cls, text: str) -> Namespace:
        """``main.kafka_audit`` -> Namespace("main", "kafka_audit"); anything else is the user's mistake."""
        parts = str(text).strip().split(".")
        if len(parts) != 2 or not all(_NAME_PART.match(part) for part in parts):
            raise UserError(f"output.catalog {text!r} is not <catalog>.<schema>",
                            fix="name a catalog and a schema, e.g. --output-catalog main.kafka_audit "
                                "(spark_catalog.<schema> outside Databricks)")
        return cls(*parts)

    def __str__(self) -> str:
        return f"{self.catalog}.{self.schema}"

    @property
    def sql(self) -> str:
        return f"{quoted(self.catalog)}.{quoted(self.schema)}"

    def table(self, name: str) -> str:
        """The quoted three-part name of table ``name``."""
        return f"{self.sql}.{quoted(name)}"

    def display(self, name: str) -> str:
        """``<catalog>.<schema>.<table>`` as a person writes it in SQL."""
        return f"{self}.{name}"


def _namespace(namespace: Namespace | str) -> Namespace:
    return namespace if isinstance(namespace, Namespace) else Namespace.parse(namespace)


def _sql_string(value: str) -> str:
    """A string literal for Spark SQL (backslash escapes)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def table_format(spark, namespace: Namespace | str) -> TableFormat:
    """The format new tables of ``namespace`` get: Delta where the session writes Delta tables by default
    (Databricks sets ``spark.sql.sources.default`` to ``delta``) or where the catalog is Delta's
    (``spark.sql.catalog.<catalog>`` set to ``DeltaCatalog``, as ``configure_spark_with_delta_pip`` does for
    ``spark_catalog``), Parquet otherwise. Read from the session's settings, which a Connect client reaches too."""
    ns = _namespace(namespace)
    if (_conf(spark, "spark.sql.sources.default") or "").lower() == "delta":
        return "delta"
    implementation = _conf(spark, f"spark.sql.catalog.{ns.catalog}") or ""
    return "delta" if implementation.endswith(".DeltaCatalog") else "parquet"


def _conf(spark, key: str) -> str | None:
    try:
        return spark.conf.get(key, None)
    except Exception:  # a Connect server may refuse to show some settings
        return None


def local_session_conf(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` for a local session the job builds to keep tables by name: its session catalog in Spark's Hive
    metastore (``metastore_db`` and ``spark-warehouse`` in the working folder unless ``conf`` says otherwise), so
    that the next run, ``check`` and the notebook find the tables; Spark's in-memory catalog forgets them when
    the process ends. A catalog implementation ``conf`` names is kept."""
    return {"spark.sql.catalogImplementation": "hive", **conf}


def _ensure_schema(spark, ns: Namespace) -> None:
    if not spark.catalog.databaseExists(str(ns)):
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {ns.sql}")


def namespace_location(spark, namespace: Namespace | str) -> str:
    """The folder where the catalog keeps ``namespace``'s tables (its schema's location, from ``DESCRIBE SCHEMA
    EXTENDED``; the schema is created when missing), "" when the catalog does not say. The run leases it so that
    two runs never write one namespace's tables at once: they would share each table's committer folders."""
    ns = _namespace(namespace)
    _ensure_schema(spark, ns)
    for row in spark.sql(f"DESCRIBE SCHEMA EXTENDED {ns.sql}").collect():
        if str(row[0] or "").strip().lower() == "location":
            return str(row[1] or "").strip()
    return ""


def _table_exists(spark, ns: Namespace, name: str) -> bool:
    return bool(spark.catalog.tableExists(ns.display(name)))


def _describe(spark, ns: Namespace, name: str) -> tuple[dict[str, str], str, TableFormat]:
    """``({column: comment}, table comment, format)`` of an existing table, in one ``DESCRIBE TABLE EXTENDED``."""
    columns: dict[str, str] = {}
    provider = table_comment = ""
    in_columns = True
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {ns.table(name)}").collect():
        column = row["col_name"] or ""
        if not column or column.startswith("#"):
            in_columns = False  # partition columns and table details follow; each column was listed above
        elif in_columns:
            columns[column] = row["comment"] or ""
        elif column == "Provider":
            provider = str(row["data_type"]).strip().lower()
        elif column == "Comment":
            table_comment = str(row["data_type"] or "")
    return columns, table_comment, "delta" if provider == "delta" else "parquet"


def _comments(name: str) -> tuple[str, dict[str, str]]:
    from offsets_audit import tables

    if name == RUNS_TABLE:
        return RUNS_COMMENT, {**RUNS_COLUMNS, "run_id": RUN_ID_COMMENT}
    table_comment, columns = tables.comments(name)
    return table_comment, {**columns, "run_id": RUN_ID_COMMENT}


def _column_sql(field, comments: dict[str, str]) -> str:
    comment = comments.get(field.name)
    return f"{quoted(field.name)} {sql_type(field.dataType)}" + (f" COMMENT {_sql_string(comment)}" if comment else "")


def _create_table(spark, ns: Namespace, name: str, schema, fmt: TableFormat) -> None:
    """``CREATE TABLE IF NOT EXISTS`` with the rows' columns, ``run_id`` last and the partition column."""
    table_comment, comments = _comments(name)
    columns = [_column_sql(f, comments) for f in schema.fields if f.name != "run_id"]
    columns.append(f"`run_id` string COMMENT {_sql_string(comments['run_id'])}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {ns.table(name)} ({', '.join(columns)}) USING {fmt} "
              f"PARTITIONED BY (`run_id`)" + (f" COMMENT {_sql_string(table_comment)}" if table_comment else ""))


def _align_table(spark, ns: Namespace, name: str, schema) -> TableFormat:
    """An existing table brought to the rows' columns: the columns it lacks added, comments that differ from
    ``tables.comments`` set (catalog calls only when something changed); returns the table's format."""
    table_comment, comments = _comments(name)
    described, described_comment, fmt = _describe(spark, ns, name)
    if table_comment and described_comment != table_comment:
        spark.sql(f"COMMENT ON TABLE {ns.table(name)} IS {_sql_string(table_comment)}")
    missing = [f for f in schema.fields if f.name not in described and f.name != "run_id"]
    if missing:
        spark.sql(f"ALTER TABLE {ns.table(name)} ADD COLUMNS ({', '.join(_column_sql(f, comments) for f in missing)})")
    for column, comment in comments.items():
        if column in described and comment and described[column] != comment:
            spark.sql(f"ALTER TABLE {ns.table(name)} ALTER COLUMN {quoted(column)} COMMENT {_sql_string(comment)}")
    return fmt


def write_catalog_table(df, namespace: Namespace | str, name: str, run_id: str) -> str:
    """Replace run ``run_id``'s rows of table ``name`` with ``df``'s (none when ``df`` is empty), creating
    the table first if it is new; returns the table's name. A table of ``offsets_audit.tables`` is written
    with exactly its schema (``tables.conform``)."""
    return _write_table(df, _namespace(namespace), name, run_id)[0]


def _write_table(df, ns: Namespace, name: str, run_id: str) -> tuple[str, TableFormat]:
    from pyspark.sql import functions as F

    from offsets_audit import tables

    spark = df.sparkSession
    if name in tables.TABLES:
        df = tables.conform(df, name)
    df = df.drop("run_id")
    if _table_exists(spark, ns, name):
        fmt = _align_table(spark, ns, name, df.schema)
    else:
        fmt = table_format(spark, ns)
        _create_table(spark, ns, name, df.schema, fmt)
    data_columns = [f for f in spark.table(ns.table(name)).schema.fields if f.name != "run_id"]
    present = set(df.columns)
    rows = df.select(*[(F.col(quoted(f.name)) if f.name in present else F.lit(None)).cast(f.dataType).alias(f.name)
                       for f in data_columns])
    if fmt == "delta":
        (rows.withColumn("run_id", F.lit(run_id))
             .writeTo(ns.table(name)).overwrite(F.col("run_id") == F.lit(run_id)))
    else:
        view = f"offsets_audit_{uuid.uuid4().hex}"
        rows.createOrReplaceTempView(view)
        try:
            spark.sql(f"INSERT OVERWRITE TABLE {ns.table(name)} PARTITION (`run_id` = {_sql_string(run_id)}) "
                      f"SELECT {', '.join(quoted(f.name) for f in data_columns)} FROM {quoted(view)}")
        finally:
            spark.catalog.dropTempView(view)
    return ns.display(name), fmt


def remove_catalog_run(spark, namespace: Namespace | str, name: str, run_id: str) -> None:
    """Remove run ``run_id``'s rows from table ``name`` if it exists (a table this run no longer writes)."""
    ns = _namespace(namespace)
    if _table_exists(spark, ns, name):
        write_catalog_table(spark.table(ns.table(name)).limit(0), ns, name, run_id)


def read_catalog_table(spark, namespace: Namespace | str, name: str, run_id: str):
    """Run ``run_id``'s rows of table ``name`` (without ``run_id``), with the table's known schema; None when the
    table does not exist."""
    from pyspark.sql import functions as F

    from offsets_audit import tables

    ns = _namespace(namespace)
    if not _table_exists(spark, ns, name):
        return None
    df = spark.table(ns.table(name)).filter(F.col("run_id") == F.lit(run_id)).drop("run_id")
    return tables.conform(df, name) if name in tables.TABLES else df


def _runs_frame(spark, rows: list):
    from pyspark.sql.types import StructType

    return spark.createDataFrame(rows, StructType.fromDDL(RUNS_DDL))


def begin_catalog_run(spark, ns: Namespace, run_id: str) -> None:
    """Mark run ``run_id`` incomplete (its manifest row removed) before its first table is replaced."""
    write_catalog_table(_runs_frame(spark, []), ns, RUNS_TABLE, run_id)


def complete_catalog_run(spark, ns: Namespace, run_id: str, fmt: str, names: dict[str, str]) -> None:
    """Mark run ``run_id`` complete: every table in ``names`` holds its rows."""
    completed_at = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    write_catalog_table(_runs_frame(spark, [(fmt, dict(names), completed_at)]), ns, RUNS_TABLE, run_id)


def _manifests(spark, ns: Namespace, run_id: str | None = None) -> list[dict]:
    """The manifest rows as the path sink's manifests read (``completed_at`` as ISO 8601 text with its offset)."""
    from pyspark.sql import functions as F

    runs = spark.table(ns.table(RUNS_TABLE))
    if run_id is not None:
        runs = runs.filter(F.col("run_id") == F.lit(run_id))
    rows = runs.select("run_id", "format", "tables", F.date_format("completed_at", "yyyy-MM-dd'T'HH:mm:ssXXX")
                       .alias("completed_at")).collect()
    return [{"run_id": r["run_id"], "format": r["format"], "tables": dict(r["tables"] or {}),
             "completed_at": r["completed_at"]} for r in rows]


def catalog_run_manifest(spark, namespace: Namespace | str, run_id: str) -> dict | None:
    """The manifest of a complete run (``{run_id, format, tables, completed_at}``), None when the run is
    incomplete or unknown."""
    ns = _namespace(namespace)
    if not _table_exists(spark, ns, RUNS_TABLE):
        return None
    manifests = _manifests(spark, ns, run_id)
    return manifests[0] if manifests else None


def complete_catalog_runs(spark, namespace: Namespace | str) -> list[dict]:
    """Manifests of the complete runs of ``namespace``, oldest first."""
    ns = _namespace(namespace)
    if not _table_exists(spark, ns, RUNS_TABLE):
        return []
    return sorted(_manifests(spark, ns), key=lambda m: (m["completed_at"] or "", m["run_id"] or ""))


#: The table formats a run wrote without its manifest row yet (``write_catalog_run(..., manifest=False)``), by
#: (namespace, run id), for ``complete_written_run``.
_WRITTEN_FORMATS: dict[tuple[str, str], str] = {}


def complete_written_run(spark, namespace: Namespace | str, run_id: str, names: dict[str, str]) -> None:
    """The manifest row of a run ``write_catalog_run`` wrote with ``manifest=False``."""
    ns = _namespace(namespace)
    fmt = _WRITTEN_FORMATS.pop((str(ns), run_id), "delta")
    complete_catalog_run(spark, ns, run_id, fmt, names)


def write_catalog_run(spark, namespace: Namespace | str, run_id: str, frames: dict, *,
                      timings: dict | None = None, manifest: bool = True) -> dict[str, str]:
    """Write every table of a run and (unless ``manifest`` is false: ``complete_written_run`` writes it after the
    run's other files) its manifest row; returns ``{table: <catalog>.<schema>.<table>}``.

    ``frames`` as for ``sinks.write_run``: a table name to its DataFrame, or to None for a table the run has no
    rows for (written empty with its schema); a table of ``offsets_audit.tables`` missing from ``frames`` loses
    the rows an earlier run with this id left there."""
    from offsets_audit import tables

    ns = _namespace(namespace)
    _ensure_schema(spark, ns)
    begin_catalog_run(spark, ns, run_id)
    names = list(tables.TABLES) + [n for n in frames if n not in tables.TABLES]
    for name in names:
        if name not in frames:
            remove_catalog_run(spark, ns, name, run_id)
    # Side by side: every table is written (or has failed) before the manifest row.
    written = side_by_side({name: functools.partial(_write_table, tables.empty(spark, name)
                                                    if frames[name] is None else frames[name], ns, name, run_id)
                            for name in names if name in frames})
    written_names = {name: full_name for name, ((full_name, _), _) in written.items()}
    if timings is not None:
        timings.update({f"write:{name}": round(seconds, 3) for name, (_, seconds) in written.items()})
    formats = "+".join(sorted({fmt for (_, fmt), _ in written.values()}))
    if manifest:
        complete_catalog_run(spark, ns, run_id, formats, written_names)
    else:
        _WRITTEN_FORMATS[(str(ns), run_id)] = formats
    return written_names
