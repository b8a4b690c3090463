"""Rebalance latency (KIP-1263 batching delay and convergence), by value."""
from __future__ import annotations

from audit_events import History, stable_group
from offsets_audit.audit import audit_group, summarize_latency
from offsets_audit.audit.latency import percentile


def test_batched_bumps_share_one_assignment_and_converge_together():
    h = stable_group(History(), members=("a",), partitions=4)
    t0 = h.now
    h.after(100).joined("b")
    h.bump(2, 3)
    h.after(100).joined("c")
    h.bump(3, 4)
    h.after(800).target(4)                         # one assignment answers both bumps
    h.owns("a", {"T1": {"0": 2}}, pending={"T1": {"1": 2, "2": 2, "3": 2}})
    h.epoch("a", 2, 2, state="UNREVOKED_PARTITIONS")
    h.epoch("b", 4, 0, state="UNRELEASED_PARTITIONS")
    h.epoch("c", 4, 0, state="UNRELEASED_PARTITIONS")
    h.after(50).epoch("a", 4, 2)
    h.owns("a", {"T1": {"0": 2}})
    h.after(50).epoch("b", 4, 4)
    h.owns("b", {"T1": {"1": 4, "2": 4}})
    h.after(50).epoch("c", 4, 4)
    h.owns("c", {"T1": {"3": 4}})
    _, rows = audit_group(h.events)
    by_epoch = {r["group_epoch"]: r for r in rows}
    assert sorted(by_epoch) == [2, 3, 4]
    r3, r4 = by_epoch[3], by_epoch[4]
    assert r3["time_to_assignment_ms"] == 900 and r4["time_to_assignment_ms"] == 800
    assert r3["bumps_in_batch"] == r4["bumps_in_batch"] == 2
    assert r3["convergence_ms"] == 1050 and r4["convergence_ms"] == 950
    assert r4["reconciling_ms"] == 150
    assert r4["members"] == 3 and r4["members_changed"] == 3 and r4["partitions_moved"] == 3
    assert r3["assignment_interval_ms"] == 1000 and r3["complete"]
    assert by_epoch[2]["time_to_assignment_ms"] == 0 and by_epoch[2]["bump_time"] == t0


def test_rebalance_cut_short_by_deletion_is_incomplete():
    h = stable_group(History(), members=("a",))
    h.after(10).bump(2, 3)
    h.after(10).add("group_deleted")
    _, rows = audit_group(h.events)
    last = [r for r in rows if r["group_epoch"] == 3][0]
    assert not last["complete"] and last["time_to_assignment_ms"] is None


def test_summary_percentiles_per_group_type_and_day():
    rows = [{"group_id": "g", "group_type": "consumer", "day": "2026-01-01", "complete": True,
             "time_to_assignment_ms": v, "convergence_ms": v * 2, "reconciling_ms": v} for v in range(1, 101)]
    summary = summarize_latency(rows)
    levels = {r["level"]: r for r in summary}
    assert set(levels) == {"group_day", "group_type_day", "group_type"}
    s = levels["group_type"]
    assert s["rebalances"] == 100 and s["time_to_assignment_ms_p50"] == 50.5
    assert s["time_to_assignment_ms_p99"] == 99.01 and s["time_to_assignment_ms_max"] == 100.0
    assert s["convergence_ms_p95"] == percentile([v * 2 for v in range(1, 101)], 0.95)
