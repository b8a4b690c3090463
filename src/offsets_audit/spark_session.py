"""One way to get a SparkSession, shared by the CLI, the jobs and the tests.

On a cluster (spark-submit, Databricks) the active session is reused untouched. Locally we build one
with the project's Python as ``PYSPARK_PYTHON`` so workers import the same environment, and register the
package's Python Data Sources (``kafka-segments``, ``kafka-python``).
"""

from __future__ import annotations

import os
import sys


def local_conf(master: str = "local[2]", shuffle_partitions: int = 4) -> dict[str, str]:
    return {
        "spark.master": master,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.driver.memory": "4g",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.python.worker.reuse": "true",
    }


def get_spark(app_name: str = "offsets-audit", master: str | None = None, extra_conf: dict | None = None):
    """Return the active SparkSession, or build a local one when none is running."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        register_data_sources(active)
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    conf = local_conf(master or os.environ.get("OFFSETS_AUDIT_MASTER", "local[2]"))
    conf.update(extra_conf or {})
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_data_sources(spark)
    return spark


def register_data_sources(spark) -> None:
    """Register the package's Python Data Sources once per session."""
    from offsets_audit.sources import register

    register(spark)
