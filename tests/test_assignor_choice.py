"""Which assignor a re-run takes, and the input orders it rebuilds, as Kafka's coordinator has them.

Each case here is one Kafka's coordinator showed the oracle (tests/kafka/java/**/oracle, recorded assignor inputs):
the brokers' ``group.consumer.assignors`` decides a consumer group's default assignor; a streams group's
``streams.assignor.name`` its task assignor (Kafka 4.4); the subscribed topics reach the assignor through
``TopicIds`` over the member's names; a share group's joining member is already in the group's member table.
"""
from __future__ import annotations

from offsets_audit.assignors.inputs import MemberOrder, subscription_iteration_order
from offsets_audit.assignors.java_order import hashmap_order
from offsets_audit.assignors.rerun import audit_group
from offsets_audit.group_configs import assignor_choice, configured_assignors
from offsets_audit.settings import BrokerSettings


def _config(broker=None, groups=None):
    return BrokerSettings(group_configs={"complete": True, "broker": broker or {}, "groups": groups or {}})


def test_configured_assignors_take_names_and_kafkas_classes():
    assert configured_assignors("range,uniform") == ["range", "uniform"]
    assert configured_assignors("org.apache.kafka.coordinator.group.assignor.UniformAssignor, com.acme.Mine") == [
        "uniform", "com.acme.Mine"]
    assert configured_assignors(None) == []


def test_the_brokers_first_consumer_assignor_is_the_default():
    assert assignor_choice(_config({"group.consumer.assignors": "range,uniform"}))["consumer"] == "range"
    assert assignor_choice(_config())["consumer"] is None
    assert assignor_choice(BrokerSettings())["consumer"] is None


def test_a_streams_group_runs_the_assignor_its_config_names_if_the_brokers_offer_it():
    offered = {"group.streams.assignors": "sticky,balanced"}
    groups = {"app": {"streams.assignor.name": "balanced"}, "other": {"streams.assignor.name": "missing"}}
    choice = assignor_choice(_config(offered, groups))["streams"]
    assert choice == {"": "sticky", "app": "balanced", "other": "sticky"}
    # brokers' list unknown: the name stands
    assert assignor_choice(_config(None, groups))["streams"]["other"] == "missing"


def _streams_row(epoch):
    return {"group_id": "app", "group_type": "streams", "assignment_epoch": epoch, "assignment_timestamp": 1000 * epoch,
            "partition": 0, "offset": epoch, "members": [{"member_id": "m", "member_epoch": epoch, "process_id": "p"}],
            "target": {"m": {"active": {"0": [0]}}}, "previous_target": {},
            "topology": {"epoch": 0, "subtopologies": [{"subtopologyId": "0", "sourceTopics": ["t"]}]}}


def test_a_custom_streams_assignor_is_reported_not_rerun_with_its_name():
    rows = audit_group([_streams_row(2)], streams_assignors={"app": "com.acme.BalancedTaskAssignor"})
    assert [(r["kind"], r["assignor"], r["match"]) for r in rows] == [("not_rerun", "com.acme.BalancedTaskAssignor", None)]
    assert "com.acme.BalancedTaskAssignor" in rows[0]["notes"]
    assert [r["kind"] for r in audit_group([_streams_row(2)])] == ["rerun"]


def test_subscribed_topics_come_in_topic_ids_order_over_the_names_hash_set():
    names = ["h00018.t1", "h00018.t0"]
    assert subscription_iteration_order({"subscribed_topic_names": names}, None) == hashmap_order(names)
    member = {"subscribed_topic_names": ["x"], "subscribed_topic_regex": "t.*"}
    resolved = {"t.*": {"topics": ["t2", "t1", "x"]}}
    # UnionSet: the larger set (the regex's topics) first, then the names it lacks
    assert subscription_iteration_order(member, resolved) == hashmap_order(["t2", "t1", "x"])


def test_a_share_groups_joining_member_is_in_the_table_a_consumer_groups_is_an_addition():
    """Two ids in one HashMap bucket: the one inserted first is iterated first."""
    first, joining = "wv3BrvMym1ndJCHfZoNC9g", "KzYwClGy2iX4ho1jcgqj3w"
    members = [{"member_id": first, "member_epoch": 2}, {"member_id": joining, "member_epoch": 0}]
    consumer, share = MemberOrder(), MemberOrder()
    consumer.order(members[:1])
    share.order(members[:1], overlay=False)
    assert [m["member_id"] for m in consumer.order(members)] == [first, joining]
    assert [m["member_id"] for m in share.order(members, overlay=False)] == [joining, first]
