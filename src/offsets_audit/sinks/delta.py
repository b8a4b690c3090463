"""Delta tables: Spark's ``delta`` format where the Delta jars are on the classpath, else the ``deltalake`` package.

Either way the result is a real Delta table partitioned by ``run_id``, and a rerun of a run id replaces
exactly that run's rows (``replaceWhere`` in Spark, an overwrite with a predicate in delta-rs).

Without the jars, Spark's executors first write the rows as Parquet files into a staging folder; the
driver then streams those files into delta-rs batch by batch (bounded memory) and commits once.
"""

from __future__ import annotations

import shutil
import uuid

from pyspark.sql import functions as F

from offsets_audit.errors import UserError


def spark_has_delta(spark) -> bool:
    """True when Spark can resolve the ``delta`` data source (Databricks, or ``--packages io.delta:...``).

    A Spark Connect session (Databricks shared and serverless compute) has no JVM gateway to ask; there the
    server is Databricks Runtime, which always has Delta."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return True
    try:
        jvm = spark.sparkContext._jvm
        jvm.java.lang.Class.forName("io.delta.sql.DeltaSparkSessionExtension")
        return True
    except Exception:
        return False


def write_delta_table(df, output_path: str, table: str, run_id: str) -> str:
    from offsets_audit.sinks.paths import table_path

    path = table_path(output_path, table)
    tagged = df.withColumn("run_id", F.lit(run_id))
    if spark_has_delta(df.sparkSession):
        (tagged.write.format("delta").mode("overwrite")
               .option("replaceWhere", f"run_id = '{run_id}'")
               .option("mergeSchema", "true")
               .partitionBy("run_id").save(path))
        return path
    if "://" in path and not path.startswith("file://"):
        raise UserError(f"cannot write Delta table {path} without the Delta jars",
                        fix="add --packages io.delta:delta-spark_2.13:<version>, or use output.format: parquet")
    return _write_with_deltalake(tagged, path, run_id)


def _write_with_deltalake(tagged, path: str, run_id: str) -> str:
    import pyarrow.dataset as ds
    from deltalake import DeltaTable, write_deltalake

    staging = f"{path}/_staging_{uuid.uuid4().hex}"
    tagged.write.mode("overwrite").parquet(staging)
    try:
        dataset = ds.dataset(staging, format="parquet")
        reader = dataset.scanner(batch_size=64_000).to_reader()
        exists = DeltaTable.is_deltatable(path)
        write_deltalake(
            path, reader, mode="overwrite", partition_by=["run_id"],
            predicate=f"run_id = '{run_id}'" if exists else None,
            schema_mode="merge" if exists else None,
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path
