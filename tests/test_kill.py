"""A fixed-seed slice of bench/kill.py: `offsets-audit run` killed with SIGKILL inside its write stage, in
Parquet and in Delta, written by the deltalake package and (``make test-full``) by Delta's own Spark writer (its
jars resolved by Maven); the killed run never looks complete with wrong tables, and a plain rerun leaves
tables equal to an uninterrupted run's (row counts and content hashes per table). The uninterrupted run and
the rerun go through the CLI's ``main`` in the test session; bench/kill.py runs them as their own processes."""

from __future__ import annotations

import random

import pytest
from script_modules import load_script

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _bench():
    return load_script("bench/kill.py", "kill_bench")


@pytest.mark.parametrize("fmt", ["parquet", pytest.param("delta", marks=pytest.mark.full), pytest.param("delta-spark", marks=pytest.mark.full)])
def test_a_run_killed_in_its_write_stage_reruns_to_a_clean_runs_tables(spark, tmp_path, fmt):
    if fmt == "delta-spark":
        import kafka_jars

        try:
            kafka_jars.spark_connector_jars()
        except kafka_jars.JarsUnavailable as error:
            pytest.skip(f"Delta's Spark jars unavailable: {error}")
    bench = _bench()
    bench.make_history(tmp_path, seed=17)
    lines = []
    # The reference and the rerun in this session (warm); the killed run is its own process, killed whole. With
    # delta-spark the rerun is its own process too, with Delta's jars.
    counts = bench.campaign(spark, tmp_path, fmt, kills=1, rng=random.Random(17), report=lines.append,
                            first_in_write=True, in_process=True)
    print("\n".join(lines))
    assert counts["kills"] == 1
    assert counts["complete_but_wrong"] == 0, lines
    assert counts["rerun_equal"] == 1 and counts["rerun_different"] == 0, lines
