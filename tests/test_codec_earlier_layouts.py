"""Values whose layout changed without a version bump read as the release that wrote them reads them.

Kafka 4.0's early-access share groups wrote ``ShareGroupMetadataValue`` v0 without ``metadataHash`` and
``ShareGroupStatePartitionMetadataValue`` v0 without ``initializingTopics``; 4.1 added both (untagged) at v0.
A healthy 4.0 cluster's records must decode (and print as 4.0's kafka-dump-log prints them), a 4.1+ record must
never be read with the older layout, and bytes neither layout reads must stay quarantined. The real 4.0 broker's
records are judged in tests/test_real_kafka_logs.py (tests/real_kafka_logs/4.0.2).
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from offsets_audit.codec import DecodeError, decode_record, encode_record
from offsets_audit.codec.records import codecs, kafka_dump_log
from offsets_audit.codec.spark import decode_batch, decode_batch_generic

SHARE_METADATA, STATE_PARTITION_METADATA = 11, 15
TOPIC = {"topicId": "g_8BiAjWJZGXGxeb02GS2A", "topicName": "orders"}


def _written_before_4_1(record_type: int, key: dict, value: dict) -> tuple[bytes, bytes]:
    """A record as a 4.0 broker writes it: the key as always, the value with 4.0's reader/writer of v0."""
    key_bytes, _ = encode_record(record_type, key, None, None)
    (layout, compiled), = codecs().by_type[record_type].earlier[0]
    assert layout == "before 4.1"
    out = bytearray(struct.pack(">h", 0))
    compiled.write(value, out)
    return key_bytes, bytes(out)


def test_only_the_two_share_values_kafka_changed_in_place_have_earlier_layouts():
    earlier = {t: [name for name, _ in layouts[0]] for t, c in codecs().by_type.items()
               for layouts in [c.earlier] if layouts}
    assert earlier == {SHARE_METADATA: ["before 4.1"], STATE_PARTITION_METADATA: ["before 4.1"]}


def test_a_4_0_share_group_metadata_value_reads_and_prints_as_4_0_prints_it():
    key, value = _written_before_4_1(SHARE_METADATA, {"groupId": "share-g"}, {"epoch": 7})
    assert len(value) == 2 + 4 + 1  # version, epoch, no tagged fields
    record = decode_record(key, value)
    assert (record.value, record.layout, record.warnings) == ({"epoch": 7}, "before 4.1", [])
    assert kafka_dump_log(record)[1] == '{"version":"0","data":{"epoch":7}}'


def test_a_4_0_state_partition_metadata_value_reads_its_two_arrays():
    initialized = [{**TOPIC, "partitions": [0, 1, 2]}]
    deleting = [{"topicId": "AAAAAAAAAAAAAAAAAAAAAQ", "topicName": "gone"}]
    key, value = _written_before_4_1(STATE_PARTITION_METADATA, {"groupId": "share-g"},
                                     {"initializedTopics": initialized, "deletingTopics": deleting})
    record = decode_record(key, value)
    assert record.layout == "before 4.1"
    assert record.value == {"initializedTopics": initialized, "deletingTopics": deleting}
    for empty in ({"initializedTopics": [], "deletingTopics": []},
                  {"initializedTopics": initialized, "deletingTopics": []}):
        assert decode_record(*_written_before_4_1(STATE_PARTITION_METADATA, {"groupId": "g"}, empty)).value == empty


@pytest.mark.parametrize("record_type,value", [
    (SHARE_METADATA, {"epoch": 7, "metadataHash": 0}),
    (SHARE_METADATA, {"epoch": 1, "metadataHash": -3}),
    (STATE_PARTITION_METADATA, {"initializingTopics": [], "initializedTopics": [], "deletingTopics": []}),
    (STATE_PARTITION_METADATA, {"initializingTopics": [{**TOPIC, "partitions": [0]}],
                                "initializedTopics": [{**TOPIC, "partitions": [1]}], "deletingTopics": []}),
])
def test_a_current_record_is_read_with_the_current_layout(record_type, value):
    key, value_bytes = encode_record(record_type, {"groupId": "g"}, value, 0)
    record = decode_record(key, value_bytes)
    assert (record.value, record.layout) == (value, None)


def test_bytes_neither_layout_reads_stay_quarantined():
    key, value = encode_record(SHARE_METADATA, {"groupId": "g"}, {"epoch": 7, "metadataHash": 5}, 0)
    for cut in (value[:5], value[:-1], value[:-4]):
        with pytest.raises(DecodeError) as caught:
            decode_record(key, cut)
        assert caught.value.code == "truncated"


def test_the_vectorised_path_sends_4_0_values_to_the_generic_reader(monkeypatch):
    from offsets_audit.codec import vectorised

    monkeypatch.setattr(vectorised, "_ROWS_PER_WEIGHT", 0)  # column-wise even for three rows
    pairs = [_written_before_4_1(SHARE_METADATA, {"groupId": "a"}, {"epoch": 3}),
             encode_record(SHARE_METADATA, {"groupId": "b"}, {"epoch": 4, "metadataHash": 9}, 0),
             _written_before_4_1(STATE_PARTITION_METADATA, {"groupId": "a"},
                                 {"initializedTopics": [{**TOPIC, "partitions": [0]}], "deletingTopics": []})]
    batch = pa.RecordBatch.from_pydict({
        "key": pa.array([k for k, _ in pairs], pa.binary()), "value": pa.array([v for _, v in pairs], pa.binary()),
        "topic": pa.array(["__consumer_offsets"] * 3), "partition": pa.array([0] * 3, pa.int32()),
        "offset": pa.array(range(3), pa.int64())})
    vectorised, generic = decode_batch(batch), decode_batch_generic(batch)
    assert vectorised.to_pydict() == generic.to_pydict()
    assert generic.column("error_code").to_pylist() == [None, None, None]
    assert generic.column("value_json").to_pylist()[:2] == ['{"epoch":3}', '{"epoch":4,"metadataHash":9}']
