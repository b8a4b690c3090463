"""``plans.side_by_side``: a stage's small jobs a few at once, every one run, the first failure (in order) raised."""
from __future__ import annotations

import threading
import time

import pytest

from offsets_audit.plans import side_by_side


def test_results_come_back_by_name_in_the_order_given_with_their_wall_times():
    got = side_by_side({"b": lambda: (time.sleep(0.05), 2)[1], "a": lambda: 1, "c": lambda: 3})
    assert list(got) == ["b", "a", "c"]
    assert {name: result for name, (result, _) in got.items()} == {"b": 2, "a": 1, "c": 3}
    assert got["b"][1] >= 0.05


def test_they_run_at_once_up_to_the_worker_count():
    together = threading.Barrier(3, timeout=30)  # passes only with three running at once
    running, peak, lock = [0], [0], threading.Lock()

    def job():
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        together.wait()
        with lock:
            running[0] -= 1

    side_by_side({str(i): job for i in range(6)}, workers=3)
    assert peak[0] == 3


def test_every_job_runs_and_the_first_failure_in_order_is_raised():
    ran = []

    def fail(message):
        def run():
            time.sleep(0.02 if message == "first" else 0)
            ran.append(message)
            raise ValueError(message)
        return run

    with pytest.raises(ValueError, match="first"):
        side_by_side({"x": fail("first"), "y": fail("second"), "z": lambda: ran.append("ok")})
    assert sorted(ran) == ["first", "ok", "second"]



@pytest.mark.spark
def test_materialize_builds_every_cache_in_one_action_and_takes_the_greatest_value(spark):
    """``plans.materialize``: one Spark query builds the caches of all the frames (each persisted by the caller), and
    the greatest value of ``latest`` comes back from that same query."""
    from offsets_audit.plans import materialize

    def cached_rdds() -> int:  # RDDs with cached blocks, as the storage tab counts them
        return len(spark.sparkContext._jsc.sc().getRDDStorageInfo())

    frames = [spark.range(5).persist(), spark.range(3).selectExpr("id * 2 AS x").persist()]
    try:
        before = cached_rdds()
        assert materialize(frames, latest=spark.range(7).selectExpr("id * 10 AS t")) == 60
        assert cached_rdds() == before + 2
        assert materialize(frames) is None and materialize([]) is None
    finally:
        for df in frames:
            df.unpersist()


def test_a_small_log_on_a_local_session_runs_without_adaptive_execution_until_restored(spark):
    from offsets_audit.plans import ADAPTIVE_MIN_RECORDS, plain_execution_for_a_small_log

    key = "spark.sql.adaptive.enabled"
    before = spark.conf.get(key)
    restore = plain_execution_for_a_small_log(spark, 1_000, {})
    try:
        assert restore is not None and spark.conf.get(key) == "false"
        assert "AdaptiveSparkPlan" not in spark.range(10).groupBy("id").count()._jdf.queryExecution() \
            .executedPlan().toString()
    finally:
        restore()
    assert spark.conf.get(key) == before
    # a large log, a setting the user made, or a setting already off: nothing changes
    assert plain_execution_for_a_small_log(spark, ADAPTIVE_MIN_RECORDS, {}) is None
    assert plain_execution_for_a_small_log(spark, 1_000, {key: "true"}) is None
    assert spark.conf.get(key) == before
