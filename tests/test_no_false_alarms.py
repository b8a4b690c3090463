"""No false alarms on Kafka's own histories, audited as a user would run it (no group configs, no overrides).

Per history, the findings of warning or error severity it really contains:

* ``history-assignment-batching``: ``offset_committed_backwards`` (warning): the golden driver commits some offsets
  backwards on purpose, which Kafka accepts and the rule is there to report. Its group ``batch-override-0`` runs
  with ``consumer.assignment.interval.ms=0``, a group config the log does not hold: without a snapshot that is
  one ``assignment_interval_overridden`` *info* finding, never an error.
* every other history: none.

And every assignor re-run the audit trusts (confidence ``metadata_provided`` or better: the history's topic
snapshot given) gives the recorded target.
"""
from __future__ import annotations

import collections

import pytest

from offsets_audit.assignors.rerun import audit_group as rerun_group
from offsets_audit.assignors.topic_metadata import TopicMetadata, load_topics
from offsets_audit.audit import audit_events
from offsets_audit.config import load_settings
from offsets_audit.replay import replay_records
from replay_support import HISTORIES, load_expected

#: warning/error rules each golden history really contains (see the module docstring)
REAL = {
    "history-consumer-group": set(),
    "history-simple-and-txn-commits": set(),
    "history-streams-group": set(),
    "history-assignment-batching": {"offset_committed_backwards"},
    "history-many-groups": set(),
}
INFO = {"history-assignment-batching": {("assignment_interval_overridden", "batch-override-0")}}


def _parts(name: str) -> list[tuple]:
    """(records file, state file) of a history (``history-many-groups`` has one per partition)."""
    if name == "history-many-groups":
        folder = HISTORIES / name
        return [(p, folder / (p.name.split("-00000000000000000000")[0] + ".state.json"))
                for p in sorted(folder.glob("*.expected.jsonl.xz"))]
    return [(HISTORIES / f"{name}-00000000000000000000.expected.jsonl", HISTORIES / f"{name}.state.json")]


@pytest.fixture(scope="module", params=sorted(REAL))
def history(request):
    name = request.param
    records, topics = [], []
    for records_path, state_path in _parts(name):
        records.extend(load_expected(records_path))
        topics.extend(load_topics(state_path))
    return name, replay_records(records), TopicMetadata(topics)


@pytest.mark.parametrize("kafka_version", ["4.3", None])
def test_kafka_history_has_no_warning_or_error_but_what_it_really_contains(history, kafka_version):
    name, result, _ = history
    config = load_settings().replace(broker={"kafka_version": kafka_version})
    findings, _ = audit_events(result.events, config)
    serious = {f.rule for f in findings if f.severity in ("warning", "error")}
    assert serious == REAL[name], [(f.rule, f.group_id, f.message) for f in findings if f.rule not in REAL[name]]
    info = {(f.rule, f.group_id) for f in findings if f.severity == "info"}
    assert info == INFO.get(name, set())
    assert all("None" not in f.message for f in findings)


def test_every_trusted_rerun_of_a_kafka_history_matches(history):
    name, result, snapshot = history
    rows = [row for fold in result.groups.values() if fold.target_assignment_rows()
            for row in rerun_group(fold.target_assignment_rows(), snapshot)]
    trusted = [r for r in rows if r["kind"] == "rerun" and r["confidence"] in ("metadata_provided", "metadata_verified")]
    # classic and simple groups have nothing to re-run; streams re-runs are "inferred" (task offsets are not logged)
    if name not in ("history-simple-and-txn-commits", "history-streams-group"):
        assert trusted, name
    assert [(r["group_id"], r["assignment_epoch"], r["current_order"]) for r in trusted if not r["match"]] == []
    orders = collections.Counter(r["current_order"] for r in trusted)
    assert set(orders) <= {"chained", "record_order", "not_order_sensitive"}


# -- a group converted from classic and back, through the real replay --------------------------------------------

def _conversion_records() -> list[dict]:
    """The appends Kafka writes when a classic group is upgraded by a consumer-protocol member joining
    (``GroupMetadataManager.convertToConsumerGroup``: the classic group's tombstone, then
    ``ConsumerGroup.createConsumerGroupRecords`` with the generation as group and assignment epoch and
    timestamp 0, then the joining member's heartbeat bumping the epoch), and downgraded again when that member
    leaves (``convertToClassicGroup``: the consumer group's tombstones, then the classic group)."""
    from offsets_audit.codec import encode_consumer_protocol
    from offsets_audit.codec.record_types import RecordType
    from offsets_audit.simulate import records as R
    from offsets_audit.simulate.classic import ProtocolBytes
    from offsets_audit.simulate.modern import Member
    from offsets_audit.simulate.writer import encode

    orders = "tdSMm_pWjo9nwTbCqMDntA"
    t0 = 1_754_000_000_000
    subscription = {"topics": ["orders"], "userData": None, "ownedPartitions": [], "generationId": -1, "rackId": None}

    def classic(generation, at):
        entry = {"memberId": "classic-a", "groupInstanceId": None, "clientId": "c", "clientHost": "/127.0.0.1",
                 "rebalanceTimeout": 30000, "sessionTimeout": 45000,
                 "subscription": ProtocolBytes("subscription", 3, subscription),
                 "assignment": ProtocolBytes("assignment", 3, {
                     "assignedPartitions": [{"topic": "orders", "partitions": [0, 1, 2]}], "userData": None})}
        return R.group_metadata("g", "consumer", generation, "range", "classic-a", at, [entry])

    a = Member("classic-a", "c", ("orders",), member_epoch=1, previous_member_epoch=1, server_assignor="range")
    a.assigned = {orders: {0: 1, 1: 1, 2: 1}}
    a_meta = R.consumer_member_metadata("g", a)
    a_meta.value["classicMemberMetadata"] = {"sessionTimeoutMs": 45000, "supportedProtocols": [
        {"name": "range", "metadata": encode_consumer_protocol("subscription", 3, subscription)}]}
    b = Member("b", "c2", ("orders",), member_epoch=2, previous_member_epoch=0, server_assignor="range")
    b.assigned = {orders: {2: 2}}
    a2 = Member("classic-a", "c", ("orders",), member_epoch=2, previous_member_epoch=1, server_assignor="range")
    a2.assigned = {orders: {0: 1, 1: 1}}
    member_types = (RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                    RecordType.CONSUMER_GROUP_MEMBER_METADATA)
    appends = [
        (t0, [classic(1, t0)]),
        (t0 + 5_000, [R.group_tombstone("g"), a_meta, R.consumer_group_metadata("g", 1, 17),
                      R.consumer_target_member("g", "classic-a", {orders: [0, 1, 2]}),
                      R.consumer_target_metadata("g", 1, 0), R.consumer_current_assignment("g", a),
                      R.consumer_member_metadata("g", b), R.consumer_group_metadata("g", 2, 17),
                      R.consumer_target_member("g", "classic-a", {orders: [0, 1]}),
                      R.consumer_target_member("g", "b", {orders: [2]}),
                      R.consumer_target_metadata("g", 2, t0 + 5_000)]),
        (t0 + 5_100, [R.consumer_current_assignment("g", a2), R.consumer_current_assignment("g", b)]),
        (t0 + 60_000, [*R.member_tombstones("g", "b", member_types), R.consumer_group_metadata("g", 3, 17),
                       *R.member_tombstones("g", "classic-a", member_types),
                       *R.group_tombstones("g", (RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                                                 RecordType.CONSUMER_GROUP_METADATA)),
                       classic(3, t0 + 60_000)]),
    ]
    out = []
    for at, records in appends:
        for record in records:
            key, value = encode(record)
            out.append({"key": key, "value": value, "partition": 0, "offset": len(out), "timestamp": at})
    return out


@pytest.mark.parametrize("kafka_version", ["4.3", "4.2", None])
def test_a_group_converted_from_classic_and_back_raises_nothing(kafka_version):
    result = replay_records(_conversion_records())
    events = [e["event"] for e in result.events]
    assert events.count("group_deleted") == 2 and "target_assignment_computed" in events
    config = load_settings().replace(broker={"kafka_version": kafka_version})
    findings, _ = audit_events(result.events, config)
    assert [(f.rule, f.message) for f in findings if f.severity in ("warning", "error")] == []
