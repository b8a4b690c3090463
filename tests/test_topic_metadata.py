"""Topic-metadata snapshots: reading, KIP-1101 hash verification, hash-guided repair, capture."""
from __future__ import annotations

import json

import pytest

from offsets_audit.assignors.metadata_hash import compute_metadata_hash
from offsets_audit.assignors.topic_metadata import (
    TopicMetadata,
    capture_topics,
    load_topics,
    repair_partition_counts,
    topics_from_partition_metadata,
    verify_metadata_hash,
    write_topics,
)
from offsets_audit.errors import UserError
from broker import kafka_bootstrap  # noqa: F401  (fixture)
from golden_files import read_golden
from replay_support import GOLDEN, HISTORIES


def test_state_json_topics_load_as_a_snapshot():
    topics = load_topics(HISTORIES / "history-consumer-group.state.json")
    assert {t["name"]: t["partitions"] for t in topics} == {"orders": 12, "payments": 3}


def test_json_lines_and_parquet_snapshots_read_the_same(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"topic": "a", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": 3,
             "partition_racks": [["r1"], ["r2"], ["r1", "r2"]]}]
    (tmp_path / "s.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "s.parquet")
    assert load_topics(tmp_path / "s.jsonl") == load_topics(tmp_path / "s.parquet")


def test_written_snapshot_reads_back(tmp_path):
    topics = load_topics(HISTORIES / "history-streams-group.state.json")
    path = write_topics(topics, tmp_path / "snap.json")
    assert load_topics(path) == topics


def test_missing_snapshot_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_topics(tmp_path / "nope.json")


def test_topic_without_partition_count_is_a_user_error(tmp_path):
    (tmp_path / "bad.json").write_text('[{"name": "x"}]')
    with pytest.raises(UserError, match="partition count"):
        load_topics(tmp_path / "bad.json")


def test_versions_apply_from_their_valid_from_time():
    snapshot = TopicMetadata([{"name": "t", "id": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": 6},
                              {"name": "t", "id": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": 12, "valid_from_ms": 100}])
    assert snapshot.as_of(99)["t"]["partitions"] == 6
    assert snapshot.as_of(100)["t"]["partitions"] == 12
    assert snapshot.as_of(None)["t"]["partitions"] == 12


def test_group_hash_cases_verify_against_golden():
    for line in read_golden(GOLDEN / "metadata_hash" / "group_hash.jsonl").splitlines():
        case = json.loads(line)
        by_name = {t["name"]: {"id": t["topic_id"], "partitions": t["partitions"],
                               "partition_racks": t.get("partition_racks")} for t in case["topics"]}
        assert verify_metadata_hash(case["group_hash"], case["subscribed_topic_names"], by_name) in (True, None)
        if case["group_hash"] != 0:
            assert verify_metadata_hash(case["group_hash"] ^ 1, case["subscribed_topic_names"], by_name) is False


def test_absent_hash_is_neither_match_nor_mismatch():
    by_name = {"t": {"id": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": 3}}
    assert verify_metadata_hash(0, ["t"], by_name) is None
    assert verify_metadata_hash(None, ["t"], by_name) is None


def test_repair_finds_the_partition_count_behind_the_hash():
    topic = {"topic_id": "AAAAAAAAAAAAAAAAAAAAAQ", "name": "t", "partitions": 7, "partition_racks": None}
    recorded = compute_metadata_hash(["t"], [topic])
    later = {"t": {"id": topic["topic_id"], "name": "t", "partitions": 20}}
    repaired = repair_partition_counts(recorded, ["t"], later)
    assert repaired["t"]["partitions"] == 7
    assert repair_partition_counts(recorded ^ 1, ["t"], later) is None


def test_deprecated_partition_metadata_record_gives_topics_with_racks():
    value = [{"topicId": "AAAAAAAAAAAAAAAAAAAAAQ", "topicName": "t", "numPartitions": 2,
              "partitionMetadata": [{"partition": 1, "racks": ["r1"]}]}]
    (t,) = topics_from_partition_metadata(value)
    assert (t["name"], t["partitions"], t["partition_racks"]) == ("t", 2, [None, ["r1"]])


class _FakeAdmin:
    def describe_cluster(self):
        return {"brokers": [{"node_id": 1, "rack": "r1"}, {"node_id": 2, "rack": "r2"}]}

    def describe_topics(self, topics=None):
        return [{"topic": "t", "error_code": 0, "is_internal": False, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ",
                 "partitions": [{"partition": 1, "replicas": [2]}, {"partition": 0, "replicas": [1, 2]}]},
                {"topic": "__consumer_offsets", "error_code": 0, "is_internal": True, "partitions": []}]


def test_capture_maps_replicas_to_racks_and_skips_internal_topics():
    (t,) = capture_topics("unused:9092", admin_client=_FakeAdmin())
    assert t == {"id": "AAAAAAAAAAAAAAAAAAAAAQ", "name": "t", "partitions": 2,
                 "partition_racks": [["r1", "r2"], ["r2"]], "valid_from_ms": None}


@pytest.mark.broker
def test_capture_topics_command_against_a_broker(tmp_path, kafka_bootstrap):
    from broker import create_topic, unique_topic
    from offsets_audit.cli import main

    topic = unique_topic("capture")
    create_topic(kafka_bootstrap, topic, 3)
    out = tmp_path / "topics.json"
    assert main(["capture-topics", "--bootstrap-server", kafka_bootstrap, "--output", str(out),
                 "--topic", topic]) == 0
    (t,) = load_topics(out)
    assert (t["name"], t["partitions"]) == (topic, 3)
