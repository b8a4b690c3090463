"""The half of ``test_catalog_connect.py`` that runs on a Spark Connect session, in a process of its own (a Connect
client and the suite's classic session do not share a process): a local Connect server (``remote("local[2]")``),
the tables of a run written by name and read back, a rerun, an empty rerun, a run killed after it began writing.

    python tests/catalog_connect_check.py WORK_FOLDER

Prints one JSON object (what the test asserts on) as its last line.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import uuid
from pathlib import Path


def fingerprint(df) -> tuple[int, str]:
    """Rows and an order-independent content hash (the sum of ``xxhash64`` over every column of every row)."""
    from pyspark.sql import functions as F

    row = df.agg(F.count(F.lit(1)).alias("n"),
                 F.sum(F.xxhash64(*[F.col(f"`{c}`") for c in df.columns]).cast("decimal(38,0)")).alias("h")).first()
    return row["n"], str(row["h"] or 0)


def frames(spark, ids: list[int]) -> dict:
    """A run's tables: findings and rebalances (nested columns) with a row per id, every other table empty."""
    from offsets_audit import tables

    findings = [{"id": f"f{i}", "group_id": f"group-{i}", "group_type": "consumer", "rule": "partition_owned_twice",
                 "severity": "error", "time": dt.datetime(2026, 11, 22, 3, i, tzinfo=dt.timezone.utc),
                 "message": "m", "evidence": [f"0:{i}"], "details": "{}", "data_gap": False,
                 "data_gap_quarantined": 0} for i in ids]
    rebalances = [{"group_id": f"group-{i}", "group_type": "consumer", "group_epoch": i, "complete": True,
                   "causes": ["member_joined"], "cause_members": [{"member_id": f"m{i}", "causes": ["member_joined"]}]}
                  for i in ids]
    out: dict = {name: None for name in tables.TABLES if name != "decoded"}
    out["findings"] = spark.createDataFrame(findings, tables.schema("findings"))
    out["rebalances"] = spark.createDataFrame(rebalances, tables.schema("rebalances"))
    return out


def main(work: Path) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from offsets_audit import tables
    from offsets_audit.sinks import Output
    from offsets_audit.sinks.catalog import Namespace, begin_catalog_run

    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    ns = Namespace("spark_catalog", f"audit_{uuid.uuid4().hex[:8]}")
    spark.sql(f"CREATE SCHEMA {ns.sql} LOCATION '{work / 'warehouse'}'")
    by_name = Output(path=str(work / "files"), catalog=str(ns))
    result: dict = {"session": type(spark).__module__}

    written = frames(spark, [1, 2])
    names = by_name.write_run(spark, "r1", written)
    # What was written, as the table's schema has it: the path sink writes the same (tables.conform).
    result["equal_to_input"] = {name: fingerprint(by_name.read_table(spark, name, "r1")) == fingerprint(
        tables.empty(spark, name) if written[name] is None else tables.conform(written[name], name)) for name in names}
    by_name.write_run(spark, "r2", frames(spark, [7]))
    by_name.write_run(spark, "r1", frames(spark, [3]))
    result["after_rerun"] = sorted((r["run_id"], r["id"]) for r in spark.table(ns.table("findings")).collect())
    by_name.write_run(spark, "r1", frames(spark, []))
    result["after_empty_rerun"] = {name: by_name.read_table(spark, name, "r1").count() for name in names}
    result["complete_runs"] = [m["run_id"] for m in by_name.complete_runs(spark)]
    begin_catalog_run(spark, ns, "r2")  # as a rerun of r2 killed after it began writing leaves it
    result["after_begin"] = [m["run_id"] for m in by_name.complete_runs(spark)]
    spark.sql(f"DROP SCHEMA {ns.sql} CASCADE")
    return result


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
