"""RangeAssignor ("range"): every golden case, plus the rules it is built from."""

from __future__ import annotations

import pytest

from assignor_golden import golden_cases
from offsets_audit.assignors import run

TOPIC_A = "f10of4il9cKFRFbGz3l8RQ"
TOPIC_B = "-JP2nvddCDAXoiB0nt0jqQ"


def member(member_id, topics, instance_id=None, current=None):
    return {"member_id": member_id, "instance_id": instance_id, "rack_id": None,
            "subscribed_topic_names": list(topics), "subscribed_topic_ids": list(topics),
            "current_assignment": current or {}}


def case(members, subscription_type="HOMOGENEOUS", topics=((TOPIC_A, 7), (TOPIC_B, 2))):
    return {"subscription_type": subscription_type,
            "topics": [{"id": t, "name": f"topic-{i}", "partitions": n, "partition_racks": None}
                       for i, (t, n) in enumerate(topics)],
            "members": members, "assignable_partitions": None}


@pytest.mark.parametrize("golden_case", golden_cases("range"))
def test_matches_kafka_range_assignor(golden_case):
    assert run("range", golden_case["input"]) == golden_case["expected"]


# range.py runs _range_kernel.c when it is built (pip install) and its pure-Python paths otherwise (the --py-files
# zip on Spark executors, a machine without a C compiler): plain loops for small groups, numpy for large ones.
# Every path must give Kafka's answer.
PATHS = {"kernel": (True, 2000), "loops": (False, 2000), "numpy": (False, 0)}


def _use_path(monkeypatch, path):
    from offsets_audit.assignors import range as range_assignor

    kernel, numpy_from_pairs = PATHS[path]
    if kernel and range_assignor._KERNEL is None:
        pytest.skip("the compiled kernel is not built in this install (pip install -e . builds it)")
    if not kernel:
        monkeypatch.setattr(range_assignor, "_KERNEL", None)
    monkeypatch.setattr(range_assignor, "NUMPY_FROM_PAIRS", numpy_from_pairs)
    return range_assignor


@pytest.mark.parametrize("path", list(PATHS))
def test_every_golden_case_matches_kafka_on_every_path(monkeypatch, path):
    _use_path(monkeypatch, path)
    cases = [param.values[0] for param in golden_cases("range")]
    assert [c["case_id"] for c in cases if run("range", c["input"]) != c["expected"]] == []


def test_first_members_get_one_extra_partition():
    result = run("range", case([member("b", [TOPIC_A]), member("a", [TOPIC_A]), member("c", [TOPIC_A])],
                               topics=((TOPIC_A, 7),)))
    assert result["members"] == {"a": {TOPIC_A: [0, 1, 2]}, "b": {TOPIC_A: [3, 4]}, "c": {TOPIC_A: [5, 6]}}


def test_static_members_come_first_ordered_by_instance_id():
    result = run("range", case([member("a", [TOPIC_A]), member("z", [TOPIC_A], instance_id="i2"),
                                member("y", [TOPIC_A], instance_id="i1")], topics=((TOPIC_A, 3),)))
    assert result["members"] == {"y": {TOPIC_A: [0]}, "z": {TOPIC_A: [1]}, "a": {TOPIC_A: [2]}}


def test_member_ids_compare_as_utf16_code_units():
    # U+FF21 (BMP, high) sorts after U+1F600 (surrogate pair D83D..) in Java's String.compareTo.
    result = run("range", case([member("\uff21", [TOPIC_A]), member("\U0001f600", [TOPIC_A])],
                               topics=((TOPIC_A, 2),)))
    assert result["members"] == {"\U0001f600": {TOPIC_A: [0]}, "\uff21": {TOPIC_A: [1]}}


def test_member_with_empty_range_gets_no_topic_entry():
    result = run("range", case([member("a", [TOPIC_B]), member("b", [TOPIC_B]), member("c", [TOPIC_B])]))
    assert result["members"] == {"a": {TOPIC_B: [0]}, "b": {TOPIC_B: [1]}, "c": {}}


def test_heterogeneous_ranges_are_cut_among_each_topics_subscribers():
    result = run("range", case([member("a", [TOPIC_A, TOPIC_B]), member("b", [TOPIC_A])], "HETEROGENEOUS"))
    assert result["members"] == {"a": {TOPIC_A: [0, 1, 2, 3], TOPIC_B: [0, 1]}, "b": {TOPIC_A: [4, 5, 6]}}


def test_current_assignment_is_ignored():
    result = run("range", case([member("a", [TOPIC_A], current={TOPIC_A: [6]}), member("b", [TOPIC_A])],
                               topics=((TOPIC_A, 2),)))
    assert result["members"] == {"a": {TOPIC_A: [0]}, "b": {TOPIC_A: [1]}}


@pytest.mark.parametrize("subscription_type", ["HOMOGENEOUS", "HETEROGENEOUS"])
def test_subscription_to_missing_topic_fails_the_assignment(subscription_type):
    missing = "AAAAAAAAAAAAAAAAAAAAAA"
    result = run("range", case([member("a", [missing])], subscription_type))
    assert result == {"error": "PartitionAssignorException", "message": "Member is subscribed to a non-existent topic"}


def test_empty_group_gets_empty_assignment():
    assert run("range", case([])) == {"error": None, "members": {}}


@pytest.mark.parametrize("path", list(PATHS))
def test_direct_run_equals_the_group_spec_path_on_random_groups(monkeypatch, path):
    """``range.run`` reads the case directly; ``assign`` over ``parse_group_spec`` is the path it replaced. Random
    groups with shared instance ids, duplicated and unknown subscriptions must answer the same on both."""
    import random

    from offsets_audit.assignors.common import PartitionAssignorException, assignment_result, error_result, parse_group_spec

    range_assignor = _use_path(monkeypatch, path)
    topic_ids = [TOPIC_A, TOPIC_B, "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBA"]
    for seed in range(300):
        rng = random.Random(seed)
        topics = tuple((t, rng.choice([0, 1, 3, 7, 20])) for t in rng.sample(topic_ids, rng.randint(1, 4)))
        known = [t for t, _ in topics]
        members = []
        for i in rng.sample(range(30), rng.randint(0, 9)):
            subscribed = rng.sample(known, rng.randint(0, len(known)))
            if rng.random() < 0.1:
                subscribed += subscribed[:1]
            if rng.random() < 0.05:
                subscribed.append("CCCCCCCCCCCCCCCCCCCCCA")
            instance = rng.choice([None, None, "i1", "i2", f"i{i}"])
            members.append(member(f"member-{i}", subscribed, instance_id=instance))
        group = case(members, rng.choice(["HOMOGENEOUS", "HETEROGENEOUS"]), topics)
        try:
            expected = assignment_result(range_assignor.assign(parse_group_spec(group)))
        except PartitionAssignorException as exc:
            expected = error_result(exc)
        assert range_assignor.run(group) == expected, f"seed {seed}"


def test_compiled_kernel_equals_the_numpy_path_on_large_random_groups(monkeypatch):
    """Groups past the plain loops' size (up to 300 members, 60 topics, static members, non-ASCII member ids):
    the kernel and the numpy path hand out the same ranges, member order and topic order included."""
    import random

    from offsets_audit.assignors import range as range_assignor

    if range_assignor._KERNEL is None:
        pytest.skip("the compiled kernel is not built in this install (pip install -e . builds it)")
    for seed in range(40):
        rng = random.Random(seed)
        topic_ids = [f"topic-{seed}-{t}" for t in range(rng.randint(1, 60))]
        topics = tuple((t, rng.choice([0, 1, 5, 50, 400])) for t in topic_ids)
        members = []
        for i in range(rng.randint(1, 300)):
            subscribed = rng.sample(topic_ids, rng.randint(0, len(topic_ids)))
            instance = f"i{rng.randint(0, 40)}" if rng.random() < 0.2 else None
            member_id = rng.choice(["m", "\uff21", "\U0001f600", "z"]) + str(i)
            members.append(member(member_id, subscribed, instance_id=instance))
        group = case(members, rng.choice(["HOMOGENEOUS", "HETEROGENEOUS"]), topics)
        compiled = range_assignor.run(group)
        monkeypatch.setattr(range_assignor, "_KERNEL", None)
        monkeypatch.setattr(range_assignor, "NUMPY_FROM_PAIRS", 0)
        python = range_assignor.run(group)
        monkeypatch.undo()
        assert compiled == python, f"seed {seed}"
        assert [list(a) for a in compiled.get("members", {}).values()] == \
            [list(a) for a in python.get("members", {}).values()], f"seed {seed}"
        assert list(compiled.get("members", {})) == list(python.get("members", {})), f"seed {seed}"


@pytest.mark.parametrize("odd", ["partitions", "topic_id"])
def test_inputs_outside_the_kernels_range_take_the_pure_python_path(monkeypatch, odd):
    """A partition count the kernel does not model, or a topic id that is not a str: the kernel declines and the
    pure-Python paths answer exactly as without it."""
    from offsets_audit.assignors import range as range_assignor

    topic = 7 if odd == "topic_id" else TOPIC_A
    partitions = -5 if odd == "partitions" else 3
    group = case([member("a", [topic]), member("b", [topic])], "HETEROGENEOUS", topics=((topic, partitions),))
    if range_assignor._KERNEL is not None:
        assert range_assignor._KERNEL.assign(["a", "b"], [[topic], [topic]], {topic: partitions}, False)[0] == "decline"
    compiled = range_assignor.run(group)
    monkeypatch.setattr(range_assignor, "_KERNEL", None)
    assert compiled == range_assignor.run(group)
