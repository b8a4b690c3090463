"""The second half of ``test_catalog_delta.py``, in a process of its own (a Delta session needs Delta's jars and
catalog when its JVM starts, which the suite's session has not): after a run by name was killed, judge what
the kill left, rerun it, run the same input by path, and compare every table row for row.

    python tests/catalog_delta_check.py CONFIG INPUT NAMESPACE FILES PATH_OUTPUT RUN_ID

Prints one JSON object (what the test asserts on) as its last line.
"""

from __future__ import annotations

import json
import sys


def fingerprint(df) -> tuple[int, str]:
    """Rows and an order-independent content hash (the sum of ``xxhash64`` over every column of every row)."""
    from pyspark.sql import functions as F

    row = df.agg(F.count(F.lit(1)).alias("n"),
                 F.sum(F.xxhash64(*[F.col(f"`{c}`") for c in df.columns]).cast("decimal(38,0)")).alias("h")).first()
    return row["n"], str(row["h"] or 0)


def main(config: str, source: str, namespace: str, files: str, path_output: str, run_id: str) -> dict:
    from offsets_audit import tables
    from offsets_audit.cli import main as cli_main
    from offsets_audit.config import load_settings
    from offsets_audit.sinks import Output
    from offsets_audit.sinks.catalog import RUNS_TABLE, Namespace
    from offsets_audit.spark_session import get_spark

    spark = get_spark("offsets-audit-catalog-check", extra_conf=load_settings(config).spark.conf_text())
    by_name, by_path = Output(path=files, catalog=namespace), Output(path=path_output, format="parquet")
    ns = Namespace.parse(namespace)
    names = [name for name in tables.TABLES if name != "decoded"]
    result: dict = {"killed_run_complete": by_name.run_manifest(spark, run_id) is not None}
    if result["killed_run_complete"]:
        result["killed_run_tables"] = {name: fingerprint(tables.without_measured(by_name.read_table(spark, name, run_id),
                                                                                name)) for name in names}

    common = ["run", "--config", config, "--input", source, "--input-format", "segments", "--run-id", run_id]
    result["rerun_exit"] = cli_main([*common, "--output-catalog", namespace, "--output", files])
    result["path_exit"] = cli_main([*common, "--output", path_output, "--output-format", "parquet"])

    result["tables"] = {}
    for name in names:
        whole = spark.table(ns.table(name))  # the catalog table as any reader sees it
        run_ids = sorted(r["run_id"] for r in whole.select("run_id").distinct().collect())
        # two runs agree on everything but what each measured of its own re-runs
        mine = tables.without_measured(tables.conform(whole.drop("run_id"), name), name)
        theirs = tables.without_measured(by_path.read_table(spark, name, run_id), name)
        result["tables"][name] = {
            "run_ids": run_ids, "by_name": fingerprint(mine), "by_path": fingerprint(theirs),
            "differences": mine.exceptAll(theirs).count() + theirs.exceptAll(mine).count(),
            "provider": next(r["data_type"] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {ns.table(name)}").collect()
                             if r["col_name"] == "Provider"),
            "commented": all(r["comment"] for r in spark.sql(f"DESCRIBE TABLE {ns.table(name)}").collect()
                             if r["col_name"] in tables.schema(name).fieldNames()),
        }
    result["manifest"] = by_name.run_manifest(spark, run_id)
    result["runs_rows"] = spark.table(ns.table(RUNS_TABLE)).count()
    return result


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:7]), default=str))
