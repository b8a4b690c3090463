"""The audit over Kafka's own golden histories (``tests/golden/README.md``): Kafka's coordinator breaks no rule.

The only findings are the offsets the golden driver commits at random (it moves some backwards,
which Kafka accepts); every other rule stays silent on every record of every history.
"""
from __future__ import annotations

import collections
import copy

import pytest

from offsets_audit.audit import audit_events, summarize_latency
from offsets_audit.config import load_settings
from offsets_audit.replay import replay_records
from replay_support import HISTORIES, load_expected

BATCHING_OVERRIDES = {"batch-override-0": {"assignment_interval_ms": 0},
                      "batch-override-3000": {"assignment_interval_ms": 3000}}


def _config(overrides=None):
    return load_settings().replace(broker={"group_overrides": copy.deepcopy(overrides or {})})


def _events(name):
    if name == "history-many-groups":
        records = []
        for path in sorted((HISTORIES / name).glob("*.expected.jsonl.xz")):
            records.extend(load_expected(path))
    else:
        records = load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl")
    return replay_records(records).events


@pytest.mark.parametrize("name", ["history-consumer-group", "history-simple-and-txn-commits",
                                  "history-streams-group", "history-assignment-batching", "history-many-groups"])
def test_kafka_histories_break_no_rule(name):
    findings, rebalances = audit_events(_events(name), _config(BATCHING_OVERRIDES))
    assert {f.rule for f in findings} <= {"offset_committed_backwards"}, [
        (f.rule, f.group_id, f.message, f.evidence) for f in findings if f.rule != "offset_committed_backwards"]
    assert all(r["complete"] for r in rebalances if r["group_type"] != "share") or name == "history-many-groups"


def test_assignment_interval_violated_on_batching_history_with_wrong_interval():
    """With a snapshot that says batch-override-0 runs on the 1000 ms default, its assignments break it."""
    snapshot = {"complete": True, "broker": {"group.consumer.assignment.interval.ms": "1000"},
                "groups": {"batch-override-3000": {"consumer.assignment.interval.ms": "3000"}}}
    cfg = _config().replace(broker={"group_configs": snapshot})
    findings, _ = audit_events(_events("history-assignment-batching"), cfg)
    violated = collections.Counter(f.group_id for f in findings if f.rule == "assignment_interval_violated")
    assert set(violated) == {"batch-override-0"} and violated["batch-override-0"] >= 10
    one = next(f for f in findings if f.rule == "assignment_interval_violated")
    assert len(one.evidence) == 2 and one.details["assignment_interval_ms"] == 1000
    assert "group.consumer.assignment.interval.ms=1000" in one.details["judged_against"]


def test_batching_history_without_group_configs_gives_one_info_finding():
    """Nothing says how batch-override-0 is configured: one info finding, no error per assignment."""
    findings, _ = audit_events(_events("history-assignment-batching"), _config())
    unexplained = [f for f in findings if f.rule != "offset_committed_backwards"]
    assert [(f.rule, f.severity, f.group_id) for f in unexplained] == [
        ("assignment_interval_overridden", "info", "batch-override-0")]
    assert "interval appears overridden (smallest gap" in unexplained[0].message


def test_batching_history_with_the_real_group_configs_is_clean():
    snapshot = {"complete": True, "broker": {},
                "groups": {"batch-override-0": {"consumer.assignment.interval.ms": "0"},
                           "batch-override-3000": {"consumer.assignment.interval.ms": "3000"}}}
    cfg = _config().replace(broker={"group_configs": snapshot})
    findings, _ = audit_events(_events("history-assignment-batching"), cfg)
    assert {f.rule for f in findings} == {"offset_committed_backwards"}


def test_batching_latency_by_value():
    """KIP-1263 delays: the group epoch runs ahead until one assignment answers the whole burst."""
    _, rebalances = audit_events(_events("history-assignment-batching"), _config(BATCHING_OVERRIDES))
    by_group = collections.defaultdict(dict)
    for r in rebalances:
        by_group[r["group_id"]][r["group_epoch"]] = r
    default = by_group["batch-default"]
    assert sorted(default) == list(range(2, 22))
    # epochs 3..13 bumped within 250 ms, answered by one assignment at epoch 13 (offset 50, t=...1303)
    assert {default[e]["assignment_epoch"] for e in range(3, 14)} == {13}
    assert default[3]["time_to_assignment_ms"] == 1303 - 26 and default[13]["time_to_assignment_ms"] == 1303 - 246
    assert default[13]["bumps_in_batch"] == 11 and default[13]["assignment_offset"] == 50
    assert default[13]["converged_time"] == 1754000001933   # the batch after which epochs.jsonl says Stable
    zero = sorted(r["time_to_assignment_ms"] for r in by_group["batch-override-0"].values())
    assert zero[len(zero) // 2] == 0 and zero[-1] < 1000    # only member departures wait for a heartbeat
    gaps = [r["time_to_assignment_ms"] for r in by_group["batch-override-3000"].values()]
    assert max(gaps) > 3000
    summary = {(s["level"], s["group_id"]): s for s in summarize_latency(rebalances)}
    assert summary[("group_day", "batch-override-0")]["time_to_assignment_ms_p50"] == 0
    assert summary[("group_day", "batch-default")]["time_to_assignment_ms_max"] == 1330
