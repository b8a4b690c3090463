"""Lag-aware what-if assignor (KAFKA-5337 proposal): the proposal's worked example and the rules."""

from __future__ import annotations

import pytest

from offsets_audit.assignors import lag_aware
from offsets_audit.errors import UserError

T0 = "t0t0t0t0t0t0t0t0t0t0tA"
T1 = "t1t1t1t1t1t1t1t1t1t1tA"


def _member(member_id, topics):
    return {"member_id": member_id, "instance_id": None, "rack_id": None, "subscribed_topic_names": topics,
            "subscribed_topic_ids": topics, "current_assignment": {}}


def _input(members, topics, offsets, reset="latest"):
    return {"subscription_type": "HOMOGENEOUS",
            "topics": [{"id": t, "name": f"name-{t[:2]}", "partitions": n, "partition_racks": None}
                       for t, n in topics.items()],
            "members": members, "assignable_partitions": None, "offsets": offsets, "auto_offset_reset": reset}


def _committed(lags, end=1_000_000):
    return {str(p): {"committed": end - lag, "end": end, "begin": 0} for p, lag in enumerate(lags)}


def test_kafka_5337_worked_example():
    case = _input([_member("C0", [T0]), _member("C1", [T0])], {T0: 3},
                  {T0: _committed([100_000, 50_000, 60_000])})
    result, total = lag_aware.assign_with_lags(case)
    assert result == {"error": None, "members": {"C0": {T0: [0]}, "C1": {T0: [1, 2]}}}
    assert total == {"C0": 100_000, "C1": 110_000}


def test_fewest_partitions_wins_before_least_lag():
    case = _input([_member("a", [T0]), _member("b", [T0])], {T0: 4}, {T0: _committed([10, 9, 8, 1])})
    # 0 (10) -> a; 1 (9) -> b; 2 (8) -> b (both 1 partition, b has less lag); 3 (1) -> a.
    assert lag_aware.assign(case)["members"] == {"a": {T0: [0, 3]}, "b": {T0: [1, 2]}}


def test_equal_count_and_lag_go_to_smallest_member_id():
    case = _input([_member("m2", [T0]), _member("m1", [T0])], {T0: 2}, {T0: _committed([0, 0])})
    assert lag_aware.assign(case)["members"] == {"m1": {T0: [0]}, "m2": {T0: [1]}}


def test_equal_lags_are_placed_lowest_partition_first():
    case = _input([_member("a", [T0])], {T0: 3}, {T0: _committed([5, 5, 5])})
    _, total = lag_aware.assign_with_lags(case)
    assert total == {"a": 15}


def test_missing_commit_with_latest_reset_has_no_lag():
    assert lag_aware.partition_lag(None, begin=10, end=500, auto_offset_reset="latest") == 0


def test_missing_commit_with_earliest_reset_lags_the_whole_log():
    assert lag_aware.partition_lag(None, begin=10, end=500, auto_offset_reset="earliest") == 490


def test_unknown_reset_mode_counts_as_earliest():
    assert lag_aware.partition_lag(None, begin=0, end=7, auto_offset_reset="none") == 7


def test_commit_beyond_end_counts_as_zero_lag():
    assert lag_aware.partition_lag(900, begin=0, end=500) == 0


def test_missing_commits_follow_auto_offset_reset_in_assignment():
    offsets = {T0: {"0": {"committed": None, "end": 100, "begin": 0}, "1": {"committed": 95, "end": 100, "begin": 0}}}
    members = [_member("a", [T0]), _member("b", [T0])]
    _, latest = lag_aware.assign_with_lags(_input(members, {T0: 2}, offsets, "latest"))
    _, earliest = lag_aware.assign_with_lags(_input(members, {T0: 2}, offsets, "earliest"))
    assert sorted(latest.values()) == [0, 5]
    assert sorted(earliest.values()) == [5, 100]


def test_offsets_may_be_keyed_by_topic_name():
    case = _input([_member("a", [T0]), _member("b", [T0])], {T0: 2}, {"name-t0": _committed([1, 50])})
    _, total = lag_aware.assign_with_lags(case)
    assert total == {"a": 50, "b": 1}


def test_each_topic_is_balanced_on_its_own():
    members = [_member("a", [T0, T1]), _member("b", [T0, T1]), _member("c", [T1])]
    case = _input(members, {T0: 2, T1: 3}, {T0: _committed([100, 1]), T1: _committed([30, 20, 10])})
    result = lag_aware.assign(case)["members"]
    assert result == {"a": {T0: [0], T1: [0]}, "b": {T0: [1], T1: [1]}, "c": {T1: [2]}}


def test_partition_without_offsets_has_no_lag():
    case = _input([_member("a", [T0])], {T0: 2}, {}, "earliest")
    result, total = lag_aware.assign_with_lags(case)
    assert result["members"] == {"a": {T0: [0, 1]}} and total == {"a": 0}


def test_non_integer_offsets_are_a_user_error():
    case = _input([_member("a", [T0])], {T0: 1}, {T0: {"0": {"committed": "x", "end": 5, "begin": 0}}})
    with pytest.raises(UserError):
        lag_aware.assign(case)


def test_dispatcher_runs_lag_aware():
    assignors = pytest.importorskip("offsets_audit.assignors")
    if not hasattr(assignors, "run"):
        pytest.skip("offsets_audit.assignors.run is not there yet")
    case = _input([_member("C0", [T0]), _member("C1", [T0])], {T0: 3}, {T0: _committed([100_000, 50_000, 60_000])})
    assert assignors.run("lag_aware", case) == lag_aware.assign(case)
