"""Per-table fingerprints for comparing two runs' outputs: row count and an order-independent content hash."""

from __future__ import annotations

from pathlib import Path

#: Folders beside a run's tables that are not tables.
NOT_TABLES = ("summary", "report")


def fingerprints(spark, output: Path, run_id: str | None, fmt: str = "parquet") -> dict[str, tuple[int, str]]:
    """{table: (rows, content hash)} of every table under ``output``: a run's rows (``sinks.read_table``, with the
    table's schema) when ``run_id`` is given, else each folder read as Parquet. The hash is the sum of Spark's
    ``xxhash64`` over every column of every row, so row order does not matter; the columns a run measures of
    itself are left out (``tables.without_measured``). One Spark job for all tables."""
    from pyspark.sql import functions as F

    from offsets_audit import sinks, tables

    frames = {}
    for folder in sorted(p for p in Path(output).iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        if folder.name in NOT_TABLES:
            continue
        frames[folder.name] = tables.without_measured(
            sinks.read_table(spark, str(output), folder.name, run_id, fmt) if run_id
            else spark.read.parquet(str(folder)), folder.name)
    figures = None
    for name, df in frames.items():
        one = df.agg(F.lit(name).alias("table"), F.count(F.lit(1)).alias("n"),
                     F.sum(F.xxhash64(*[F.col(f"`{c}`") for c in df.columns]).cast("decimal(38,0)")).alias("h"))
        figures = one if figures is None else figures.unionByName(one)
    return {row["table"]: (row["n"], str(row["h"] or 0)) for row in (figures.collect() if figures else [])}


def different(left: dict, right: dict) -> dict:
    """The tables whose fingerprints differ (or that one side lacks): {table: (left's, right's)}. Fingerprints that
    came through JSON (lists) compare equal to those taken here (tuples)."""
    def value(side: dict, name: str):
        found = side.get(name)
        return tuple(found) if isinstance(found, (list, tuple)) else found

    return {name: (value(left, name), value(right, name)) for name in sorted(set(left) | set(right))
            if value(left, name) != value(right, name)}
