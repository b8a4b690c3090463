"""The bar of the coordinator-load audit, through the whole job on a simulated cluster.

One big consumer group that rebalances every second or two (interval 0) shares its ``__consumer_offsets`` partition
with small groups (``simulate --hog-members``). The job must name that group and that partition in
``coordinator_partition_hogged`` and at the top of ``coordinator_load``, no other group, and its what-if must give
fewer assignor runs at a larger interval, the replay at its own interval giving back every recorded computation.

The simulated groups are about a hundred times smaller than the ones the rule's default (3 s of a minute) is
meant for, so the test lowers ``min_busy_ms`` to 2 ms: the small groups' minutes stay far below even that.
"""
from __future__ import annotations

import json

import pytest

from offsets_audit import sinks
from offsets_audit.config import load_settings
from offsets_audit.job import run_job
from offsets_audit.simulate import simulate

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def hogged(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("hog")
    sim = simulate(str(root / "history"), groups=6, hours=0.1, seed=7, partitions=3, formats=("segments",),
                   hog_members=30, hog_partitions=300, hog_churn_mean_ms=1500)
    states = json.loads((root / "history" / "model_state.json").read_text())["groups"]
    hog = next(g for g in states if g.startswith("bulk-orders"))
    settings = load_settings(overrides={
        "run_id": "hog", "source": {"kind": "segments", "path": str(root / "history" / "segments")},
        "output": {"path": str(root / "out"), "html_report": False},
        "broker": {"group_overrides": sim["group_overrides"], "group_overrides_complete": True},
        "topic_metadata": {"source": "file", "path": sim["topics_path"]},
        "rules": {"coordinator_partition_hogged": {"min_busy_ms": 2}},
    })
    run_job(spark, settings, progress=False)

    def rows(table):
        return [r.asDict(recursive=True) for r in
                sinks.read_table(spark, str(root / "out"), table, "hog", "parquet").collect()]

    return hog, states, rows("findings"), rows("coordinator_load"), rows("assignment_interval_whatif")


def test_the_big_group_and_its_partition_are_named_in_the_finding(hogged):
    hog, states, findings, _, _ = hogged
    hogged_findings = [f for f in findings if f["rule"] == "coordinator_partition_hogged"]
    assert [f["group_id"] for f in hogged_findings] == [hog]
    details = json.loads(hogged_findings[0]["details"])
    partition = states[hog]["partition"]
    assert details["partition"] == partition
    assert set(details["neighbours"]) == {g for g, s in states.items() if s["partition"] == partition and g != hog}
    assert details["minute_count"] >= 3 and f"__consumer_offsets-{partition}" in hogged_findings[0]["message"]


def test_coordinator_load_puts_the_big_group_on_top_of_its_partition(hogged):
    hog, states, _, load, _ = hogged
    mine = [m for m in load if m["partition"] == states[hog]["partition"]]
    assert mine and all(m["timed_runs"] == m["assignor_runs"] for m in mine)
    busiest = max(mine, key=lambda m: m["estimated_ms"])
    assert busiest["top_groups"][0]["group_id"] == hog and busiest["top_groups"][0]["share"] > 0.5
    assert busiest["estimated_ms_low"] <= busiest["estimated_ms"] <= busiest["estimated_ms_high"]
    others = [m for m in load if m["partition"] != states[hog]["partition"]]
    assert all(g["group_id"] != hog for m in others for g in m["top_groups"])


def test_the_what_if_gives_the_big_group_fewer_runs_at_a_larger_interval(hogged):
    hog, _, _, _, whatif = hogged
    rows = {r["interval_ms"]: r for r in whatif if r["level"] == "group" and r["group_id"] == hog}
    assert rows[0]["candidate"] == "recorded" and rows[0]["replay_matches_log"]
    assert rows[0]["runs"] == rows[0]["recorded_runs"] > 100
    assert rows[5000]["runs"] < rows[1000]["runs"] < rows[0]["runs"]
    assert rows[0]["estimated_ms_per_run"] > 0 and rows[5000]["coordinator_ms"] < rows[0]["coordinator_ms"]
    assert sum(1 for r in rows.values() if r["recommended"]) == 1
    cluster = [r for r in whatif if r["level"] == "cluster"]
    assert {r["candidate"] for r in cluster} == {"candidate", "recommended"}
    assert all(r["recorded_interval_ms"] is not None for r in whatif if r["level"] == "group")
