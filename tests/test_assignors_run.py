"""``offsets_audit.assignors.run``: dispatch by Kafka's assignor names, errors, and the plug-in registry."""

from __future__ import annotations

import pytest

from offsets_audit import assignors
from offsets_audit.assignors import known_assignors, register_assignor, run, unregister_assignor
from offsets_audit.errors import UserError

TOPIC = "f10of4il9cKFRFbGz3l8RQ"


def one_member_case(subscription_type="HOMOGENEOUS"):
    return {"subscription_type": subscription_type,
            "topics": [{"id": TOPIC, "name": "topic-0", "partitions": 2, "partition_racks": None}],
            "members": [{"member_id": "m", "instance_id": None, "rack_id": None,
                         "subscribed_topic_names": ["topic-0"], "subscribed_topic_ids": [TOPIC],
                         "current_assignment": {}}],
            "assignable_partitions": None}


def test_unknown_assignor_is_a_user_error_listing_the_known_names():
    with pytest.raises(UserError) as error:
        run("roundrobin", one_member_case())
    message = str(error.value)
    assert "roundrobin" in message
    for name in ("uniform", "range", "simple", "sticky", "streams_sticky", "lag_aware"):
        assert name in message


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_consumer_assignors_dispatch_by_kafka_name(name):
    assert run(name, one_member_case()) == {"error": None, "members": {"m": {TOPIC: [0, 1]}}}


def test_sticky_and_streams_sticky_name_the_same_module():
    table = assignors._BUILTIN_MODULES
    assert table["sticky"] == table["streams_sticky"] == "streams_sticky"
    assert table["simple"] == "simple" and table["lag_aware"] == "lag_aware"


def test_kafka_exception_becomes_error_result():
    bad = one_member_case()
    bad["topics"] = []
    assert run("range", bad) == {"error": "PartitionAssignorException",
                                 "message": "Member is subscribed to a non-existent topic"}


def test_malformed_input_is_a_user_error_naming_the_field():
    with pytest.raises(UserError, match="subscription_type"):
        run("uniform", {"topics": [], "members": []})


def test_registered_assignor_is_called_with_the_case_input():
    seen = []

    def everything_to_first(case_input):
        seen.append(case_input)
        first = case_input["members"][0]["member_id"]
        return {first: {t["id"]: list(range(t["partitions"])) for t in case_input["topics"]}}

    register_assignor("everything-to-first", everything_to_first)
    try:
        assert "everything-to-first" in known_assignors()
        result = run("everything-to-first", one_member_case())
        assert result == {"error": None, "members": {"m": {TOPIC: [0, 1]}}}
        assert seen == [one_member_case()]
    finally:
        unregister_assignor("everything-to-first")
    assert "everything-to-first" not in known_assignors()


def test_registering_a_non_callable_is_a_user_error():
    with pytest.raises(UserError):
        register_assignor("broken", "not a function")


def test_the_lean_parse_builds_the_same_group_spec_as_the_checked_one():
    """parse_group_spec reads well-formed input in a lean pass; the checked pass (which names a missing field) must
    build the very same spec from every golden input, and take over whatever the lean pass does not expect."""
    from assignor_golden import golden_cases
    from offsets_audit.assignors import common

    for assignor in ("uniform", "range", "simple"):
        for param in golden_cases(assignor):
            case_input = param.values[0]["input"]
            lean = common._parse_well_formed(case_input)
            assert lean == common._parse_checked(case_input), param.id
            assert list(lean.members) == list(common._parse_checked(case_input).members), param.id
    by_names = {"subscription_type": "HETEROGENEOUS", "topics": [{"id": "t1", "name": "one", "partitions": 2}],
                "members": [{"member_id": "m", "subscribed_topic_names": ["one"], "subscribed_topic_ids": None}]}
    assert common._parse_well_formed(by_names) is None
    assert common.parse_group_spec(by_names).members["m"].subscribed_topic_ids == ["t1"]
    with pytest.raises(UserError, match="members\\[0\\] has no 'member_id'"):
        common.parse_group_spec(dict(by_names, members=[{"subscribed_topic_ids": ["t1"]}]))
