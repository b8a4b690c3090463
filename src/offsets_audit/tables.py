"""Every table a run writes, by name, with its schema: the one place sinks and readers take schemas from.

A run writes each of these tables whether it has rows or not (``sinks.write_table``), and every reader
(``check``, the HTML report, the notebooks, reruns) reads them with the schema given here instead of
letting Spark infer one from files, which fails on a table with no rows.

The schemas are assembled from the constants the stages themselves use to build their DataFrames, not
retyped, so a stage that changes a table changes it here too; ``tests/test_tables.py`` runs the job and
checks that the tables it produces have exactly these schemas.

Tables are partitioned by ``run_id`` on disk; the schemas here are the rows' columns without it
(``schema(name, with_run_id=True)`` adds it, as a reader of the whole table sees it).
"""

from __future__ import annotations

from functools import cache

from offsets_audit.assignors.rerun import ASSIGNOR_AUDIT_DDL
from offsets_audit.audit.spark import AuditTables
from offsets_audit.codec.spark import DECODED_COLUMNS
from offsets_audit.replay.spark import ReplayTables

RUN_ID_COLUMN = "run_id"

def _fields(ddl: str) -> list[tuple[str, str]]:
    """``[(name, type)]`` of a flat DDL string; types may hold commas inside ``<...>``."""
    fields, depth, start = [], 0, 0
    for i, ch in enumerate(ddl + ","):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            name, _, type_ = ddl[start:i].strip().partition(" ")
            fields.append((name, type_.strip()))
            start = i + 1
    return fields


def _ddl(fields) -> str:
    return ", ".join(f"{name} {type_}" for name, type_ in fields)


def _records_ddl() -> str:
    """``decoded`` and ``quarantine``: the sources' row (``sources.schema.SOURCE_SCHEMA``) plus the codec's
    decoded columns (``codec.spark.DECODED_COLUMNS``)."""
    from offsets_audit.sources.schema import SOURCE_SCHEMA

    fields = [(f.name, f.dataType.simpleString()) for f in SOURCE_SCHEMA.fields]
    fields += [(name, ddl) for name, (_, ddl) in DECODED_COLUMNS.items()]
    return _ddl(fields)


#: table name -> DDL of its rows, in the order the job writes them: the stage contracts' written fields
#: (``replay.spark.ReplayTables``, ``audit.spark.AuditTables``, each DDL beside its field), the assignor
#: audit's rows, and the input-shaped tables.
TABLES: dict[str, str] = {
    **ReplayTables.ddls(),
    "assignor_audit": ASSIGNOR_AUDIT_DDL,
    **AuditTables.ddls(),
    "quarantine": _records_ddl(),
    "decoded": _records_ddl(),
}

#: Tables whose rows are the input's rows: a Parquet dump's extra columns are kept after the known ones.
OPEN_TABLES = frozenset({"quarantine", "decoded"})

#: Columns that hold what this run measured of its own assignor re-runs (their time, and what follows from it:
#: shares of a minute, budgets met, the recommended interval, the order of the busiest groups). Two runs of one
#: input agree on every other column; these differ by the machine's speed at the time, so a comparison of two
#: runs' tables (a rerun after a kill, a run on another session) leaves them out (``without_measured``).
MEASURED_COLUMNS: dict[str, frozenset[str]] = {
    "coordinator_load": frozenset({"estimated_ms", "estimated_ms_low", "estimated_ms_high", "share_of_minute",
                                   "max_run_ms", "top_groups"}),
    "assignment_interval_whatif": frozenset({"estimated_ms_per_run", "coordinator_ms", "peak_minute_share",
                                             "meets_budget", "recommended"}),
}

#: Rows that exist or hold what they hold because of those measurements: the what-if's cluster row of every
#: group at its recommended interval (which interval each group is at follows from measured times), and the
#: findings of ``coordinator_partition_hogged`` (judged on measured shares; an incremental run's are
#: provisional). ``without_measured`` leaves them out: table name -> (column, values that mark such a row).
MEASURED_ROWS: dict[str, tuple[str, tuple[str, ...]]] = {
    "assignment_interval_whatif": ("candidate", ("recommended",)),
    "findings": ("rule", ("coordinator_partition_hogged",)),
    "provisional_findings": ("rule", ("coordinator_partition_hogged",)),
}


def ddl(name: str) -> str:
    """The DDL of table ``name``'s rows; a name that is not a table is a programming error."""
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a table of offsets-audit; tables: {', '.join(TABLES)}") from None


_ATOMIC_TYPES = {
    "string": "StringType", "int": "IntegerType", "integer": "IntegerType", "bigint": "LongType",
    "long": "LongType", "smallint": "ShortType", "short": "ShortType", "boolean": "BooleanType",
    "double": "DoubleType", "float": "FloatType", "timestamp": "TimestampType", "binary": "BinaryType",
}


def _data_type(text: str):
    """A Spark DataType from a DDL type, parsed here so a schema needs no running SparkSession."""
    from pyspark.sql import types as T

    text = text.strip()
    lowered = text.lower()
    if lowered.startswith("array<") and lowered.endswith(">"):
        return T.ArrayType(_data_type(text[len("array<"):-1]), True)
    if lowered.startswith("map<") and lowered.endswith(">"):
        key, value = _split_map(text[len("map<"):-1])
        return T.MapType(_data_type(key), _data_type(value), True)
    if lowered.startswith("struct<") and lowered.endswith(">"):
        inner = text[len("struct<"):-1].replace(":", " ")
        return T.StructType([T.StructField(n, _data_type(t), True) for n, t in _fields(inner)])
    try:
        return getattr(T, _ATOMIC_TYPES[lowered])()
    except KeyError:
        raise ValueError(f"type {text!r} is not known to offsets_audit.tables; add it to _ATOMIC_TYPES") from None


def _split_map(inner: str) -> tuple[str, str]:
    depth = 0
    for i, ch in enumerate(inner):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            return inner[:i], inner[i + 1:]
    raise ValueError(f"map<{inner}> has no value type")


@cache
def _schema(name: str, with_run_id: bool):
    from pyspark.sql.types import StringType, StructField, StructType

    fields = [StructField(n, _data_type(t), True) for n, t in _fields(ddl(name))]
    if with_run_id:
        fields.append(StructField(RUN_ID_COLUMN, StringType(), True))
    return StructType(fields)


def schema(name: str, *, with_run_id: bool = False):
    """Table ``name``'s Spark ``StructType`` (every column nullable, as Parquet stores them)."""
    return _schema(name, with_run_id)


def conform(df, name: str):
    """``df`` with exactly table ``name``'s columns, in order and cast to its types (missing ones as nulls).

    For the input-shaped tables (``OPEN_TABLES``) columns beyond the known ones are kept after them, so
    nothing a user's dump carried is dropped.
    """
    from offsets_audit.plans import cast_to

    known = schema(name)
    extra = [c for c in df.columns if c not in set(known.fieldNames()) | {RUN_ID_COLUMN}] if name in OPEN_TABLES else []
    return cast_to(df, known, extra)


def without_measured(df, name: str):
    """``df`` (rows of table ``name``) without its ``MEASURED_COLUMNS`` and ``MEASURED_ROWS``: what two runs of one
    input must agree on."""
    from pyspark.sql import functions as F

    if name in MEASURED_ROWS and MEASURED_ROWS[name][0] in df.columns:
        column, values = MEASURED_ROWS[name]
        df = df.filter(F.col(column).isNull() | ~F.col(column).isin(*values))
    measured = [c for c in df.columns if c in MEASURED_COLUMNS.get(name, ())]
    return df.drop(*measured) if measured else df


@cache
def _described() -> dict:
    import yaml
    from importlib import resources

    return yaml.safe_load((resources.files("offsets_audit") / "tables.yaml").read_text(encoding="utf-8"))


def comments(name: str) -> tuple[str, dict[str, str]]:
    """Table ``name``'s comment and its columns' (``tables.yaml``): what each means, as a catalog shows it. A table
    an incremental run adds (``provisional_findings``...) takes the columns of the table it is ``like``."""
    entry = _described().get(name) or {}
    columns = entry.get("columns")
    if columns is None and "like" in entry:
        columns = (_described().get(entry["like"]) or {}).get("columns")
    return str(entry.get("comment") or ""), {str(k): str(v) for k, v in (columns or {}).items()}


def like(name: str) -> str | None:
    """The table whose columns table ``name`` has (``tables.yaml``'s ``like``: a table an incremental run adds,
    ``provisional_findings``...); None for any other."""
    entry = _described().get(name) or {}
    return entry.get("like")


def empty(spark, name: str):
    """An empty DataFrame with table ``name``'s schema."""
    return spark.createDataFrame([], schema(name))
