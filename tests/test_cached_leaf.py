"""``plans.cached_leaf``: a persisted frame planned as its cache alone, same rows, same cache."""
from __future__ import annotations

from chispa import assert_df_equality

from offsets_audit.plans import cached_leaf


def _frame(spark):
    from pyspark.sql import functions as F

    base = spark.range(0, 2_000).withColumn("k", F.col("id") % 7)
    # A plan with some lineage: a window and an aggregate, as the replay's tables have.
    from pyspark.sql import Window

    ranked = base.withColumn("r", F.row_number().over(Window.partitionBy("k").orderBy(F.col("id").desc())))
    return ranked.groupBy("k").agg(F.max("r").alias("n"), F.sum("id").alias("s"))


def _leaf_kind(df) -> str:
    return df._jdf.queryExecution().analyzed().getClass().getSimpleName()


def test_a_persisted_frame_becomes_a_leaf_over_its_cache_with_the_same_rows(spark):
    df = _frame(spark).persist()
    try:
        df.count()
        leaf = cached_leaf(df)
        assert _leaf_kind(leaf) == "InMemoryRelation"
        assert leaf.is_cached  # persisting it again would cache a second copy
        assert_df_equality(leaf, _frame(spark), ignore_row_order=True)
        # Plans built on the leaf see a leaf, whatever they add (a self-join included).
        joined = leaf.join(leaf.select("k", (leaf["n"] * 2).alias("n2")), "k")
        assert joined.count() == 7
    finally:
        df.unpersist()
    assert spark._jsparkSession.sharedState().cacheManager().isEmpty()


def test_a_leaf_taken_before_the_cache_is_computed_shares_that_cache(spark):
    df = _frame(spark).persist()
    try:
        leaf = cached_leaf(df)
        assert leaf.count() == 7
        cache = spark._jsparkSession.sharedState().cacheManager()
        assert cache.lookupCachedData(df._jdf).isDefined()
        # Reading the original now uses the blocks the leaf computed.
        assert_df_equality(df, leaf, ignore_row_order=True)
    finally:
        df.unpersist()


def test_a_frame_that_is_not_persisted_comes_back_unchanged(spark):
    df = _frame(spark)
    assert cached_leaf(df) is df
