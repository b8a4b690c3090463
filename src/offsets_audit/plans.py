"""Logical plans kept small: a shared leaf every stage may use (it imports no stage)."""
from __future__ import annotations


def cached_leaf(df):
    """``df``, which must be persisted, as a DataFrame whose logical plan is its cache alone (Spark's
    ``InMemoryRelation``), not the lineage that computed it.

    Every DataFrame operation analyses the whole logical plan again on the driver. The audit builds a few
    hundred operations over the replay's tables, and each of those tables carries the read, the decode and the
    replay's windows in its plan: building the audit's plans took 7-9 s of driver time on a 46 k-record
    history (up to ~28 s with the machine busy), against ~2.5 s over leaves. The leaf still holds the
    cache's physical plan, so blocks lost with an executor are recomputed from the lineage as before (unlike
    ``localCheckpoint``); unpersisting ``df`` (the caller keeps that duty) frees the leaf's data too. Off the
    classic JVM API (Spark Connect) ``df`` comes back unchanged."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None or not df.is_cached:
        return df
    from pyspark.sql import DataFrame

    from py4j.protocol import Py4JError

    spark = df.sparkSession
    try:
        plan = jdf.queryExecution().withCachedData()
        if plan.getClass().getSimpleName() != "InMemoryRelation":
            return df  # not served whole from the cache (never seen): keep the lineage
        leaf = DataFrame(spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, plan), spark)
    except (Py4JError, TypeError):  # py4j: a missing class is a JavaPackage, which is not callable
        return df  # a Spark without the classic Dataset class (before 4.0): plan over the lineage, as before
    leaf.is_cached = True  # its data is df's cache: persisting it again would cache a second copy
    return leaf
