"""Parquet tables partitioned by ``run_id``; a rerun overwrites only its own partition.

Uses Spark's dynamic partition overwrite, so the write runs on the executors and the replacement of a
run's rows is one atomic directory swap per partition, not a delete-then-append done by hand.
"""

from __future__ import annotations

from pyspark.sql import functions as F


def write_parquet_table(df, output_path: str, table: str, run_id: str) -> str:
    from offsets_audit.sinks.paths import table_path

    path = table_path(output_path, table)
    (df.withColumn("run_id", F.lit(run_id))
       .write.mode("overwrite")
       .option("partitionOverwriteMode", "dynamic")
       .partitionBy("run_id")
       .parquet(path))
    return path
