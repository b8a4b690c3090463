"""Plug-in assignors: loading by 'module:attribute', the read-only group view, result validation."""

from __future__ import annotations

import dataclasses
import json

import pytest
from golden_files import GOLDEN, open_golden

from offsets_audit.assignors import plugin
from offsets_audit.errors import UserError

A = "AAAAAAAAAAAAAAAAAAAAAA"
B = "BBBBBBBBBBBBBBBBBBBBBA"


def round_robin(group):
    """A tiny plug-in: every subscribed partition, round-robin over the sorted member ids."""
    members = sorted(group.members)
    result = {m: {} for m in members}
    i = 0
    for topic in sorted(group.topics.values(), key=lambda t: t.name):
        subscribers = [m for m in members if topic.topic_id in group.members[m].subscribed_topic_ids]
        for p in range(topic.num_partitions):
            if subscribers and group.is_partition_assignable(topic.topic_id, p):
                result[subscribers[i % len(subscribers)]].setdefault(topic.topic_id, []).append(p)
                i += 1
    return result


class RoundRobinAssignor:
    def assign(self, group):
        return round_robin(group)


class Failing:
    def assign(self, group):
        raise plugin.PartitionAssignorError("no capacity")


def _case(members=("m1", "m2"), topics=((A, 3), (B, 2))):
    return {"subscription_type": "HOMOGENEOUS",
            "topics": [{"id": t, "name": f"topic-{t[0]}", "partitions": n, "partition_racks": None} for t, n in topics],
            "members": [{"member_id": m, "instance_id": None, "rack_id": "r1", "subscribed_topic_names": [],
                         "subscribed_topic_ids": [t for t, _ in topics], "current_assignment": {A: [0]}}
                        for m in members],
            "assignable_partitions": None}


EXPECTED = {"error": None, "members": {"m1": {A: [0, 2], B: [1]}, "m2": {A: [1], B: [0]}}}


def test_round_robin_function_plugin_gives_golden_layout():
    assert plugin.run_plugin(round_robin, _case()) == EXPECTED


def test_load_assignor_by_module_and_attribute():
    fn = plugin.load_assignor(f"{__name__}:round_robin")
    assert plugin.run_plugin(fn, _case()) == EXPECTED


def test_class_plugin_is_instantiated_and_its_assign_called():
    fn = plugin.load_assignor(f"{__name__}:RoundRobinAssignor")
    assert plugin.run_plugin(fn, _case()) == EXPECTED
    assert plugin.run_plugin(RoundRobinAssignor(), _case()) == EXPECTED


def test_registered_plugin_runs_through_the_dispatcher():
    from offsets_audit import assignors

    assignors.register_plugin("round-robin-test", f"{__name__}:round_robin")
    try:
        assert assignors.run("round-robin-test", _case()) == EXPECTED
    finally:
        assignors.unregister_assignor("round-robin-test")


def test_group_view_is_read_only():
    seen = {}

    def sneaky(group):
        seen["group"] = group
        with pytest.raises(dataclasses.FrozenInstanceError):
            group.subscription_type = "X"
        with pytest.raises(TypeError):
            group.members["intruder"] = None
        with pytest.raises(TypeError):
            group.members["m1"].current_assignment[B] = frozenset()
        with pytest.raises(AttributeError):
            group.members["m1"].current_assignment[A].add(9)
        return {}

    plugin.run_plugin(sneaky, _case())
    view = seen["group"]
    assert view.members["m1"].rack_id == "r1"
    assert view.topics[A].num_partitions == 3 and view.topic_by_name("topic-B").topic_id == B
    assert view.is_partition_assigned(A, 0) and not view.is_partition_assigned(A, 1)


def test_members_left_out_by_the_plugin_get_empty_assignments():
    assert plugin.run_plugin(lambda g: {"m1": {A: [2, 0, 1]}}, _case())["members"] == {"m1": {A: [0, 1, 2]}, "m2": {}}


@pytest.mark.parametrize("bad, words", [
    ({"ghost": {A: [0]}}, "not in the group"),
    ({"m1": {"CCCCCCCCCCCCCCCCCCCCCA": [0]}}, "does not exist"),
    ({"m1": {A: [3]}}, "no partition 3"),
    ({"m1": {A: [0]}, "m2": {A: [0]}}, "given to both"),
    ({"m1": {A: [1, 1]}}, "listed twice"),
    ({"m1": {A: ["0"]}}, "not an int"),
    ({"m1": {A: 0}}, "not a list"),
    ({"m1": [A]}, "not to"),
    ([], "expected a mapping"),
])
def test_invalid_results_are_user_errors(bad, words):
    with pytest.raises(UserError, match=words):
        plugin.run_plugin(lambda g: bad, _case())


def test_unsubscribed_topic_is_rejected():
    case = _case()
    case["members"][1]["subscribed_topic_ids"] = [A]
    with pytest.raises(UserError, match="not subscribed"):
        plugin.run_plugin(lambda g: {"m2": {B: [0]}}, case)


def test_share_groups_may_share_partitions_but_only_assignable_ones():
    case = _case()
    case["assignable_partitions"] = {A: [0, 1]}
    shared = plugin.run_plugin(lambda g: {"m1": {A: [0]}, "m2": {A: [0]}}, case, allow_sharing=True)
    assert shared["members"] == {"m1": {A: [0]}, "m2": {A: [0]}}
    with pytest.raises(UserError, match="not assignable"):
        plugin.run_plugin(lambda g: {"m1": {A: [2]}}, case, allow_sharing=True)


def test_plugin_failure_is_reported_like_kafka():
    assert plugin.run_plugin(Failing, _case()) == {"error": "PartitionAssignorException", "message": "no capacity"}


@pytest.mark.parametrize("spec, words", [
    ("no_colon", "not of the form"),
    ("surely_missing_module_xyz:fn", "cannot import"),
    (f"{__name__}:nothing_here", "no attribute"),
])
def test_bad_plugin_names_are_user_errors(spec, words):
    with pytest.raises(UserError, match=words):
        plugin.load_assignor(spec)


def test_round_robin_plugin_covers_every_golden_uniform_step0_partition_once():
    with open_golden(GOLDEN / "assignors" / "uniform.jsonl") as handle:
        cases = [json.loads(line) for line in handle][:30]
    for case in cases:
        result = plugin.run_plugin(round_robin, case["input"])
        subscribed = {t for m in case["input"]["members"] for t in m["subscribed_topic_ids"]}
        expected_total = sum(t["partitions"] for t in case["input"]["topics"] if t["id"] in subscribed)
        assigned = sum(len(ps) for topics in result["members"].values() for ps in topics.values())
        assert assigned == expected_total


def test_run_accepts_a_plugin_spec_as_the_assignor_name():
    """`assignors.custom` in the config reaches the executors as a "module:attribute" name."""
    from offsets_audit.assignors import run

    case = {
        "subscription_type": "HOMOGENEOUS",
        "topics": [{"id": "T0AAAAAAAAAAAAAAAAAAAA", "name": "t0", "partitions": 3, "partition_racks": None}],
        "members": [{"member_id": m, "instance_id": None, "rack_id": None, "subscribed_topic_names": ["t0"],
                     "subscribed_topic_ids": ["T0AAAAAAAAAAAAAAAAAAAA"], "current_assignment": {}} for m in ("a", "b")],
        "assignable_partitions": None,
    }
    result = run(f"{__name__}:round_robin", case)
    assert result["error"] is None
    assigned = sorted(p for member in result["members"].values() for ps in member.values() for p in ps)
    assert assigned == [0, 1, 2]
