"""A session that runs the job again and again (a notebook, the test suite) holds bounded driver memory: every run
frees what it persisted, and what Spark keeps of a run until its cleaner drops it (the broadcast hash relations of
its joins, which on a local session sit in the driver's own block store) is small."""

from __future__ import annotations

import shutil

import pytest

pytestmark = pytest.mark.spark


def _storage_bytes(spark) -> int:
    """Bytes the driver's block store holds: cached tables and, on a local session, the tasks' broadcast copies."""
    return spark._jvm.org.apache.spark.SparkEnv.get().memoryManager().storageMemoryUsed()


def test_a_broadcast_of_a_few_rows_holds_a_few_rows_worth_of_heap(spark):
    """A broadcast hash relation keyed by a string, read by a task, takes one Tungsten page in the block store: the
    session's page is small, so a run's dozens of them are not a GB that outlives the run."""
    from pyspark.sql import functions as F

    small = spark.createDataFrame([(f"g-{i}", i) for i in range(20)], "group_id string, n int")
    big = spark.range(200).select(F.format_string("g-%d", F.col("id") % 40).alias("group_id"))
    before = _storage_bytes(spark)
    assert big.join(F.broadcast(small), "group_id").count() == 100
    assert _storage_bytes(spark) - before < 4 * 2 ** 20


@pytest.mark.full
def test_a_run_frees_what_it_persisted(spark, tmp_path):
    """A run of the job leaves the session's persisted RDDs and cached tables as it found them (a whole run: in the
    long suite; the broadcast test above guards the heap in the default one)."""
    from offsets_audit.config import load_settings
    from offsets_audit.job import run_job
    from replay_support import HISTORIES

    jsc = spark.sparkContext._jsc
    cache = spark._jsparkSession.sharedState().cacheManager()
    persisted, empty = jsc.getPersistentRDDs().size(), cache.isEmpty()
    logs = tmp_path / "logs" / "__consumer_offsets-0"
    logs.mkdir(parents=True)
    shutil.copy(HISTORIES / "history-assignment-batching-00000000000000000000.log", logs / "00000000000000000000.log")
    settings = load_settings(overrides={"run_id": "again", "source": {"kind": "segments", "path": str(logs.parent)},
                                        "output": {"path": str(tmp_path / "out")}})
    run_job(spark, settings, progress=False)
    assert (jsc.getPersistentRDDs().size(), cache.isEmpty()) == (persisted, empty)
