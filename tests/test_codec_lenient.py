"""Records Kafka's loader applies although their bytes are not as a broker writes them (docs/decoding.md).

One test per case of the list in docs/decoding.md, each built from bytes a writer outside Kafka could
produce (Burrow's hand-written vectors in ``core/internal/consumer/kafka_client_test.go`` are re-created
here byte for byte; the others are written by hand the same way, or are a broker's bytes edited by hand).
Each asserts the decoded values, the warning (code, part, byte position) and that ``replay_records``
applies the record; the cases Kafka skips or fails on stay quarantined.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsets_audit.codec import (
    DECODE_WARNING_CODES, DecodeError, DecodeWarning, decode_consumer_protocol, decode_record,
    encode_consumer_protocol, encode_record,
)
from offsets_audit.codec.java_utf8 import decode_java_utf8
from offsets_audit.codec.spark import decode_batch, decode_batch_generic, decode_columns
from offsets_audit.replay import replay_records

TOPIC_ID = "g_8BiAjWJZGXGxeb02GS2A"


# ------------------------------------------------------------------ writing bytes by hand, as other tools do


def s16(text: str | bytes) -> bytes:
    """A non-flexible string: int16 length + bytes."""
    data = text.encode() if isinstance(text, str) else text
    return struct.pack(">h", len(data)) + data


def b32(data: bytes) -> bytes:
    """Non-flexible bytes: int32 length + bytes."""
    return struct.pack(">i", len(data)) + data


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def offset_key(group: bytes | str, topic: bytes | str, partition: int, record_type: int = 1) -> bytes:
    return i16(record_type) + s16(group) + s16(topic) + i32(partition)


def replayed(*pairs):
    """``replay_records`` over key/value pairs at offsets 0, 1, ... of partition 0."""
    return replay_records([{"key": k, "value": v, "partition": 0, "offset": i, "timestamp": 1000 + i}
                           for i, (k, v) in enumerate(pairs)])


def one_row(key: bytes, value: bytes | None) -> dict:
    """The Spark edge's decoded columns of one record, vectorised path and generic path alike."""
    batch = pa.RecordBatch.from_pydict({"key": pa.array([key], pa.binary()), "value": pa.array([value], pa.binary()),
                                        "partition": pa.array([0], pa.int32()), "offset": pa.array([5], pa.int64())})
    fast, generic = decode_batch(batch), decode_batch_generic(batch)
    assert fast.equals(generic)
    return generic.to_pylist()[0]


# Burrow's GroupMetadataValue v1 vector: one member, an empty subscription, a 22-byte assignment (version 0,
# topic1 partition 11, no user-data field) and 4 bytes after the last member.
BURROW_GROUP_KEY = b"\x00\x02\x00\x09testgroup"
BURROW_GROUP_VALUE = (b"\x00\x01\x00\x08testtype\x00\x00\x00\x01\x00\x0ctestprotocol\x00\x0atestleader\x00\x00\x00\x01"
                      b"\x00\x0ctestmemberid\x00\x0ctestclientid\x00\x0etestclienthost\x00\x00\x00\x04\x00\x00\x00\x08"
                      b"\x00\x00\x00\x00\x00\x00\x00\x16\x00\x00\x00\x00\x00\x01\x00\x06topic1\x00\x00\x00\x01\x00\x00"
                      b"\x00\x0b\x00\x00\x00\x00")
# Burrow's offset commit (key type 1, value version 0): offset 8372, metadata "testdata", commit timestamp 1637
BURROW_OFFSET_KEY = b"\x00\x01\x00\x09testgroup\x00\x09testtopic\x00\x00\x00\x0b"
BURROW_OFFSET_VALUE = b"\x00\x00\x00\x00\x00\x00\x00\x00\x20\xb4\x00\x08testdata\x00\x00\x00\x00\x00\x00\x06\x65"


RANGE_PROTOCOL = s16("range")
LEADER_M1 = s16("m1")


def classic_group_value(protocol_type: str, subscription: bytes, assignment: bytes, version: int = 1,
                        protocol=RANGE_PROTOCOL, leader=LEADER_M1, after: bytes = b"") -> bytes:
    """A GroupMetadataValue v1-v3 with one member ``m1`` written field by field."""
    member = s16("m1") + (i16(-1) if version >= 3 else b"") + s16("client") + s16("/10.0.0.1") + i32(300000) \
        + i32(45000) + b32(subscription) + b32(assignment)
    return i16(version) + s16(protocol_type) + i32(7) + protocol + leader \
        + (i64(1700000000000) if version >= 2 else b"") + i32(1) + member + after


def subscription_v0(*topics: bytes | str, user_data: bytes | None = None) -> bytes:
    return i16(0) + i32(len(topics)) + b"".join(s16(t) for t in topics) \
        + (i32(-1) if user_data is None else b32(user_data))


def assignment_v0(topic: bytes | str, *partitions: int, user_data: bytes | None = b"") -> bytes:
    body = i16(0) + i32(1) + s16(topic) + i32(len(partitions)) + b"".join(i32(p) for p in partitions)
    return body + (b"" if user_data == b"" else (i32(-1) if user_data is None else b32(user_data)))


# ------------------------------------------------------------------ Burrow's vectors


def test_burrow_offset_commit_v0_decodes_exactly_without_warnings():
    record = decode_record(BURROW_OFFSET_KEY, BURROW_OFFSET_VALUE)
    assert record.key == {"group": "testgroup", "topic": "testtopic", "partition": 11}
    assert record.value == {"offset": 8372, "metadata": "testdata", "commitTimestamp": 1637}
    assert record.warnings == []
    committed = replayed((BURROW_OFFSET_KEY, BURROW_OFFSET_VALUE)).offsets.committed
    assert committed[("testgroup", "testtopic", 11)]["committed_offset"] == 8372
    assert one_row(BURROW_OFFSET_KEY, BURROW_OFFSET_VALUE)["decode_warnings"] is None


def test_burrow_group_metadata_with_bytes_after_the_last_member_is_applied():
    """``CoordinatorRecordSerde.readMessage`` never checks what is left after ``GroupMetadataValue.read``."""
    record = decode_record(BURROW_GROUP_KEY, BURROW_GROUP_VALUE)
    assert record.key == {"group": "testgroup"}
    value = record.value
    assert (value["protocolType"], value["generation"], value["protocol"], value["leader"]) == (
        "testtype", 1, "testprotocol", "testleader")
    [member] = value["members"]
    assert (member["memberId"], member["clientId"], member["clientHost"], member["rebalanceTimeout"],
            member["sessionTimeout"], member["subscription"]) == (
        "testmemberid", "testclientid", "testclienthost", 4, 8, b"")
    assert record.warnings == [DecodeWarning("trailing_bytes", "value", len(BURROW_GROUP_VALUE) - 4)]

    group = replayed((BURROW_GROUP_KEY, BURROW_GROUP_VALUE)).groups["testgroup"].to_dict()
    assert (group["generation"], group["leader"], group["protocol"], group["state"]) == (
        1, "testleader", "testprotocol", "Stable")
    assert [m["member_id"] for m in group["members"]] == ["testmemberid"]

    row = one_row(BURROW_GROUP_KEY, BURROW_GROUP_VALUE)
    assert row["error_code"] is None and row["group_id"] == "testgroup"
    assert row["decode_warnings"] == [{"code": "trailing_bytes", "part": "value", "position": 128}]


def test_burrow_assignment_without_user_data_stays_raw_with_a_warning():
    """The same member in a "consumer" group: Kafka's ``ConsumerProtocol.deserializeConsumerProtocolAssignment``
    needs the user-data field (the generated reader underflows: ``SchemaException``), so the assignment
    keeps its raw bytes; the empty subscription is what a broker writes before a member syncs: no warning."""
    assignment = BURROW_GROUP_VALUE[-26:-4]
    assert len(assignment) == 22
    value = classic_group_value("consumer", b"", assignment)
    record = decode_record(BURROW_GROUP_KEY, value)
    [member] = record.value["members"]
    assert member["assignment"] == assignment and member["assignment_decoded"] is None
    assert member["subscription_decoded"] is None
    assert record.warnings == [DecodeWarning("consumer_protocol_undecodable", "value.members[0].assignment", 22)]
    group = replayed((BURROW_GROUP_KEY, value)).groups["testgroup"].to_dict()
    assert group["generation"] == 7 and [m["member_id"] for m in group["members"]] == ["m1"]
    with pytest.raises(DecodeError):
        decode_consumer_protocol("assignment", assignment)


# ------------------------------------------------------------------ bytes after the message


def test_bytes_after_an_offset_commit_key_are_ignored():
    key = BURROW_OFFSET_KEY + b"\x00\x00"
    record = decode_record(key, BURROW_OFFSET_VALUE)
    assert record.key == {"group": "testgroup", "topic": "testtopic", "partition": 11}
    assert record.warnings == [DecodeWarning("trailing_bytes", "key", len(BURROW_OFFSET_KEY))]
    assert replayed((key, BURROW_OFFSET_VALUE)).offsets.committed[("testgroup", "testtopic", 11)][
        "commit_timestamp"] == 1637
    assert one_row(key, BURROW_OFFSET_VALUE)["decode_warnings"] == [
        {"code": "trailing_bytes", "part": "key", "position": len(BURROW_OFFSET_KEY)}]


def test_bytes_after_an_offset_commit_value_are_ignored():
    """OffsetCommitValue v1 (with an expire timestamp) followed by a stray int32, as a buggy tool writes it."""
    value = i16(1) + i64(42) + s16("") + i64(1000) + i64(2000) + i32(0)
    record = decode_record(offset_key("g", "t", 0), value)
    assert record.value == {"offset": 42, "metadata": "", "commitTimestamp": 1000, "expireTimestamp": 2000}
    assert record.warnings == [DecodeWarning("trailing_bytes", "value", len(value) - 4)]
    commit = replayed((offset_key("g", "t", 0), value)).offsets.committed[("g", "t", 0)]
    assert (commit["committed_offset"], commit["expire_timestamp"]) == (42, 2000)


def test_bytes_after_a_tombstone_key_are_ignored():
    key = offset_key("g", "t", 0) + b"\xff"
    record = decode_record(key, None)
    assert record.is_tombstone and record.warnings == [DecodeWarning("trailing_bytes", "key", len(key) - 1)]
    result = replayed((offset_key("g", "t", 0), BURROW_OFFSET_VALUE), (key, None))
    assert ("g", "t", 0) not in result.offsets.committed


# ------------------------------------------------------------------ malformed UTF-8, decoded as Java does

# (bytes, the String Java's new String(bytes, UTF_8) makes of them): checked against the JVM below
JAVA_UTF8_CASES = [
    (b"\xed\xa0\x80", "\ufffd"),                 # a UTF-16 surrogate in UTF-8: one U+FFFD (Python: three)
    (b"\xed\xbf\xbfA", "\ufffdA"),
    (b"\xed\xa0", "\ufffd"),                     # its first two bytes at the end: one (Python: two)
    (b"\xed\xa0A", "\ufffdA"),                   # its first two bytes then ASCII: one (Python: two)
    (b"\xe0\x80\x80", "\ufffd\ufffd\ufffd"),     # overlong three-byte form: one per byte
    (b"\xc0\xaf", "\ufffd\ufffd"),               # overlong two-byte form
    (b"\xf0\x80\x80", "\ufffd\ufffd\ufffd"),     # overlong four-byte form
    (b"\xf4\x90\x80\x80", "\ufffd" * 4),         # above U+10FFFF
    (b"\xf5\x80", "\ufffd\ufffd"),               # F5..F7 never start a sequence
    (b"\xe4\xb8", "\ufffd"),                     # truncated three-byte sequence at the end
    (b"\xf0\x90\x80", "\ufffd"),                 # truncated four-byte sequence at the end
    (b"\xf0\x90\x80A", "\ufffdA"),               # four-byte sequence cut by ASCII
    (b"\xe4A", "\ufffdA"),                       # lead byte then ASCII
    (b"a\x80b", "a\ufffdb"),                     # stray continuation byte
    (b"\xff\xfe", "\ufffd\ufffd"),               # bytes that never occur in UTF-8
    (b"caf\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "caf\u00e9\u20ac\U0001f600"),  # well-formed: unchanged
]


@pytest.mark.parametrize(("raw", "text"), JAVA_UTF8_CASES)
def test_java_utf8_replacement(raw, text):
    decoded, first_bad = decode_java_utf8(raw)
    assert decoded == text
    assert (first_bad is None) == ("\ufffd" not in text)


def test_bad_utf8_in_a_group_id_is_replaced_and_applied():
    """``Readable.readString`` is ``new String(bytes, UTF_8)``: the coordinator keys the group by that String."""
    key = offset_key(b"grp-\xed\xa0\x80-x", "orders", 3)
    record = decode_record(key, BURROW_OFFSET_VALUE)
    assert record.key["group"] == "grp-\ufffd-x"
    assert record.warnings == [DecodeWarning("bad_utf8", "key", 4 + len(b"grp-"))]
    assert replayed((key, BURROW_OFFSET_VALUE)).offsets.committed[("grp-\ufffd-x", "orders", 3)][
        "committed_offset"] == 8372
    row = one_row(key, BURROW_OFFSET_VALUE)
    assert row["group_id"] == "grp-\ufffd-x" and '"group":"grp-\ufffd-x"' in row["key_json"]
    assert row["decode_warnings"] == [{"code": "bad_utf8", "part": "key", "position": 8}]


def test_bad_utf8_in_commit_metadata_is_replaced_and_applied():
    value = i16(3) + i64(5) + i32(2) + s16(b"m\xc0\xafx") + i64(99)
    record = decode_record(offset_key("g", "t", 1), value)
    assert record.value["metadata"] == "m\ufffd\ufffdx"
    assert record.warnings == [DecodeWarning("bad_utf8", "value", 2 + 8 + 4 + 2 + 1)]
    commit = replayed((offset_key("g", "t", 1), value)).offsets.committed[("g", "t", 1)]
    assert (commit["metadata"], commit["committed_leader_epoch"]) == ("m\ufffd\ufffdx", 2)
    assert '"metadata":"m\ufffd\ufffdx"' in one_row(offset_key("g", "t", 1), value)["value_json"]


def test_bad_utf8_in_a_flexible_record():
    """OffsetCommitValue v4 (compact strings) with a truncated sequence ending the metadata."""
    key, value = encode_record(1, {"group": "g", "topic": "t", "partition": 0},
                               {"offset": 1, "leaderEpoch": 0, "metadata": "ab", "commitTimestamp": 3}, 4)
    at = value.index(b"ab")
    edited = value[:at - 1] + b"\x04ab\xe4" + value[at + 2:]
    record = decode_record(key, edited)
    assert record.value["metadata"] == "ab\ufffd"
    assert record.warnings == [DecodeWarning("bad_utf8", "value", at + 2)]
    assert replayed((key, edited)).offsets.committed[("g", "t", 0)]["metadata"] == "ab\ufffd"


def test_one_warning_per_malformed_string():
    key = offset_key(b"\xff\xff", b"t\xff", 0)
    record = decode_record(key, None)
    assert (record.key["group"], record.key["topic"]) == ("\ufffd\ufffd", "t\ufffd")
    assert record.warnings == [DecodeWarning("bad_utf8", "key", 4), DecodeWarning("bad_utf8", "key", 9)]


# ------------------------------------------------------------------ nullable lengths below -1


def test_nullable_string_with_length_below_minus_one_is_null():
    """The generated read takes any negative length of a nullable field as null: protocol and leader here."""
    value = classic_group_value("consumer", subscription_v0("orders"), assignment_v0("orders", 0, user_data=None),
                                protocol=i16(-2), leader=i16(-32768))
    record = decode_record(BURROW_GROUP_KEY, value)
    assert record.value["protocol"] is None and record.value["leader"] is None
    assert record.warnings == [DecodeWarning("negative_length", "value", 2 + 10 + 4),
                               DecodeWarning("negative_length", "value", 2 + 10 + 4 + 2)]
    group = replayed((BURROW_GROUP_KEY, value)).groups["testgroup"].to_dict()
    assert (group["generation"], group["protocol"], group["leader"]) == (7, None, None)


def test_nullable_bytes_with_length_below_minus_one_is_null():
    """A subscription whose user data has length -2: ``ConsumerProtocol`` reads null user data."""
    subscription = i16(0) + i32(1) + s16("orders") + i32(-2)
    assert decode_consumer_protocol("subscription", subscription) == {"topics": ["orders"], "userData": None}
    record = decode_record(BURROW_GROUP_KEY, classic_group_value("consumer", subscription, b""))
    member = record.value["members"][0]
    assert member["subscription_decoded"]["topics"] == ["orders"] and member["subscription_decoded"]["userData"] is None
    assert record.warnings == [DecodeWarning("negative_length", "value.members[0].subscription", 14)]


def _member_metadata(**overrides):
    value = {"instanceId": None, "rackId": "rack-a", "clientId": "c", "clientHost": "/h", "subscribedTopicNames": ["t"],
             "subscribedTopicRegex": None, "serverAssignor": "uniform", "rebalanceTimeoutMs": 30000,
             "classicMemberMetadata": None}
    value.update(overrides)
    return encode_record(5, {"groupId": "g", "memberId": "m"}, value, 0)


def test_compact_nullable_string_with_a_negative_java_length_is_null():
    """ConsumerGroupMemberMetadataValue: rackId's compact length is the 5-byte varint of 0xFFFFFFFF, a Java
    int -1, so the length is -2: null in Kafka."""
    key, value = _member_metadata()
    at = value.index(b"\x07rack-a")
    edited = value[:at] + b"\xff\xff\xff\xff\x0f" + value[at + 7:]
    record = decode_record(key, edited)
    assert record.value["rackId"] is None and record.value["clientId"] == "c"
    assert record.warnings == [DecodeWarning("negative_length", "value", at)]
    member = replayed((key, edited)).groups["g"].to_dict()["members"]
    assert [m["member_id"] for m in member] == ["m"]


def test_tagged_nullable_array_with_a_negative_java_length_is_null():
    """StreamsGroupMetadataValue's lastAssignmentConfigs (tag 1, a nullable array) written with the compact
    length 0xFFFFFFFF (Java int -1, length -2): null, as Kafka reads it."""
    key = encode_record(17, {"groupId": "s"}, None, None)[0]
    value = i16(0) + i32(3) + i64(99) + b"\x01" + b"\x01\x05" + b"\xff\xff\xff\xff\x0f"
    record = decode_record(key, value)
    assert (record.value["epoch"], record.value["metadataHash"], record.value["lastAssignmentConfigs"]) == (3, 99, None)
    assert record.warnings == [DecodeWarning("negative_length", "value", 2 + 4 + 8 + 3)]
    assert replayed((key, value)).groups["s"].to_dict()["group_epoch"] == 3


def test_varint_with_bits_above_bit_31_keeps_the_low_32_bits():
    """``ByteUtils.readUnsignedVarint`` shifts the fifth byte into a Java int: 0x10 << 28 is 0, so the
    compact length 0x100000000 + 0 reads as 0, i.e. null."""
    key, value = _member_metadata()
    at = value.index(b"\x07rack-a")
    edited = value[:at] + b"\x80\x80\x80\x80\x10" + value[at + 7:]
    record = decode_record(key, edited)
    assert record.value["rackId"] is None
    assert record.warnings == [DecodeWarning("varint_overflow", "value", at)]
    assert "m" in {m["member_id"] for m in replayed((key, edited)).groups["g"].to_dict()["members"]}


# ------------------------------------------------------------------ tagged fields


def _commit_v4(topic_id=TOPIC_ID):
    return encode_record(1, {"group": "g", "topic": "t", "partition": 2},
                         {"offset": 10, "leaderEpoch": 1, "metadata": "", "commitTimestamp": 5, "topicId": topic_id}, 4)


@pytest.mark.parametrize("size", [0, 15, 17, 127])
def test_known_tagged_field_with_a_wrong_size_is_read_by_its_type(size):
    """The generated read switches on a known tag and reads its type, ignoring ``_size``; it goes on right
    after the content. Here topicId (16 bytes) claims ``size`` bytes and is the last thing in the value."""
    key, value = _commit_v4()
    assert value[-18:-16] == b"\x00\x10"
    edited = value[:-17] + bytes([size]) + value[-16:]
    record = decode_record(key, edited)
    assert record.value["topicId"] == TOPIC_ID
    assert record.warnings == [DecodeWarning("bad_tagged_field", "value", len(value) - 16)]
    assert replayed((key, edited)).offsets.committed[("g", "t", 2)]["topic_id"] == TOPIC_ID


def test_known_tagged_field_size_over_its_content_then_bytes_after():
    """Size 17 for a 16-byte uuid plus the 17th byte: Kafka reads the uuid, ends the section, and never
    looks at the byte (trailing)."""
    key, value = _commit_v4()
    edited = value[:-17] + b"\x11" + value[-16:] + b"\x00"
    record = decode_record(key, edited)
    assert record.value["topicId"] == TOPIC_ID
    assert [w.code for w in record.warnings] == ["bad_tagged_field", "trailing_bytes"]
    assert one_row(key, edited)["error_code"] is None


# ------------------------------------------------------------------ the consumer protocol in classic groups


def test_subscription_with_bytes_after_it_is_decoded():
    subscription = subscription_v0("orders", "payments") + b"\x00\x00\x00\x00"
    value = classic_group_value("consumer", subscription, assignment_v0("orders", 0, 1, user_data=None))
    record = decode_record(BURROW_GROUP_KEY, value)
    member = record.value["members"][0]
    assert member["subscription_decoded"]["topics"] == ["orders", "payments"]
    assert member["assignment_decoded"]["assignedPartitions"] == [{"topic": "orders", "partitions": [0, 1]}]
    assert record.warnings == [DecodeWarning("trailing_bytes", "value.members[0].subscription", len(subscription) - 4)]
    group = replayed((BURROW_GROUP_KEY, value)).groups["testgroup"].to_dict()
    assert group["members"][0]["subscription_decoded"]["topics"] == ["orders", "payments"]


def test_subscription_of_a_newer_version_is_read_as_the_highest_known():
    """``ConsumerProtocol.checkSubscriptionVersion``: a version above the highest is read with the highest
    (v3 here); what a v4 would add after the rack id is left unread."""
    v3 = encode_consumer_protocol("subscription", 3, {"topics": ["orders"], "userData": None, "ownedPartitions": [
        {"topic": "orders", "partitions": [2]}], "generationId": 9, "rackId": "rack-b"})
    v4 = i16(4) + v3[2:] + b"\x00\x00\x00\x05"
    found = []
    assert decode_consumer_protocol("subscription", v4, warnings=found) == decode_consumer_protocol("subscription", v3)
    assert found == [DecodeWarning("consumer_protocol_newer_version", "subscription", 0),
                     DecodeWarning("trailing_bytes", "subscription", len(v3))]
    record = decode_record(BURROW_GROUP_KEY, classic_group_value("consumer", v4, b""))
    decoded = record.value["members"][0]["subscription_decoded"]
    assert (decoded["generationId"], decoded["rackId"], decoded["_version"]) == (9, "rack-b", 3)
    assert [w.code for w in record.warnings] == ["consumer_protocol_newer_version", "trailing_bytes"]


def test_assignment_with_bad_utf8_topic_is_decoded_with_replacement():
    assignment = assignment_v0(b"ord\xe9rs", 0, user_data=None)
    record = decode_record(BURROW_GROUP_KEY, classic_group_value("consumer", subscription_v0("orders"), assignment))
    assert record.value["members"][0]["assignment_decoded"]["assignedPartitions"][0]["topic"] == "ord\ufffdrs"
    assert record.warnings == [DecodeWarning("bad_utf8", "value.members[0].assignment", 2 + 4 + 2 + 3)]


@pytest.mark.parametrize("subscription", [b"\x00", i16(-1) + i32(0) + i32(-1), i16(0) + i32(3) + s16("only-one")])
def test_subscription_kafka_refuses_keeps_its_bytes(subscription):
    """One byte (no version), a negative version, a topic array longer than its bytes: ``SchemaException``."""
    record = decode_record(BURROW_GROUP_KEY, classic_group_value("consumer", subscription, b""))
    member = record.value["members"][0]
    assert member["subscription"] == subscription and member["subscription_decoded"] is None
    [warning] = record.warnings
    assert (warning.code, warning.part) == ("consumer_protocol_undecodable", "value.members[0].subscription")
    assert replayed((BURROW_GROUP_KEY, classic_group_value("consumer", subscription, b""))).groups[
        "testgroup"].to_dict()["generation"] == 7


def test_protocol_bytes_of_other_protocol_types_are_not_read():
    record = decode_record(BURROW_GROUP_KEY, classic_group_value("connect", b"\x00", b"\x00"))
    assert record.warnings == [] and "subscription_decoded" not in record.value["members"][0]


# ------------------------------------------------------------------ what Kafka skips or fails on stays quarantined


@pytest.mark.parametrize(("key", "value", "code"), [
    (i16(99) + s16("g"), None, "unknown_record_type"),            # CoordinatorLoaderImpl skips it (a warn log)
    (BURROW_OFFSET_KEY, i16(7) + BURROW_OFFSET_VALUE[2:], "unknown_version"),  # UnknownRecordVersionException
    (b"\x00", None, "truncated"),                                  # "Could not read version from key's buffer"
    (i16(1) + s16("g") + s16("t"), None, "truncated"),             # the key does not parse: the load fails
    (i16(1) + i16(-1) + s16("t") + i32(0), None, "null_not_allowed"),  # "non-nullable field ... as null"
    (BURROW_OFFSET_KEY, BURROW_OFFSET_VALUE[:-3], "truncated"),
    (b"", None, "empty_key"),
])
def test_what_kafka_skips_or_fails_on_is_quarantined(key, value, code):
    with pytest.raises(DecodeError) as info:
        decode_record(key, value)
    assert info.value.code == code
    out = decode_columns([key], [value])
    assert out["error_code"] == [code] and out["decode_warnings"] == [None]


# ------------------------------------------------------------------ both Spark paths, every case at once


def _all_cases():
    key_v4, value_v4 = _commit_v4()
    member_key, member_value = _member_metadata()
    at = member_value.index(b"\x07rack-a")
    return [
        (BURROW_OFFSET_KEY, BURROW_OFFSET_VALUE), (BURROW_GROUP_KEY, BURROW_GROUP_VALUE),
        (BURROW_OFFSET_KEY + b"\x00", BURROW_OFFSET_VALUE), (BURROW_OFFSET_KEY, BURROW_OFFSET_VALUE + b"\x01"),
        (offset_key(b"g\xed\xa0\x80", "t", 0), BURROW_OFFSET_VALUE), (offset_key("g", b"t\xff", 0), None),
        (key_v4, value_v4[:-17] + b"\x0f" + value_v4[-16:]),
        (member_key, member_value[:at] + b"\xff\xff\xff\xff\x0f" + member_value[at + 7:]),
        (BURROW_GROUP_KEY, classic_group_value("consumer", subscription_v0("a") + b"\x00", b"\x00")),
        (i16(99) + s16("g"), None),
    ]


def test_warnings_are_the_same_on_the_vectorised_and_generic_paths(monkeypatch):
    from offsets_audit.codec import vectorised

    monkeypatch.setattr(vectorised, "_ROWS_PER_WEIGHT", 0)
    cases = _all_cases() * 3
    batch = pa.RecordBatch.from_pydict({"key": pa.array([k for k, _ in cases], pa.binary()),
                                        "value": pa.array([v for _, v in cases], pa.binary())})
    fast, generic = decode_batch(batch), decode_batch_generic(batch)
    assert fast.equals(generic)
    warnings = generic.column("decode_warnings").to_pylist()
    assert warnings[0] is None and warnings[1] == [{"code": "trailing_bytes", "part": "value", "position": 128}]
    assert sum(w is not None for w in warnings) == 3 * 8
    for row, (key, value) in zip(generic.to_pylist(), cases):
        try:
            record = decode_record(key, value)
        except DecodeError as exc:
            assert row["error_code"] == exc.code and row["decode_warnings"] is None
        else:
            assert row["error_code"] is None
            assert row["decode_warnings"] == ([w._asdict() for w in record.warnings] or None)


@pytest.mark.spark
def test_spark_decode_keeps_warned_records_and_conserves_counts(spark):
    from datetime import datetime, timezone

    from pyspark.sql import functions as F

    from offsets_audit.codec.spark import decode, split
    from offsets_audit.sources.schema import KAFKA_SCHEMA, with_batch_columns

    cases = _all_cases()
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    df = with_batch_columns(spark.createDataFrame(
        [(k, v, "__consumer_offsets", 0, i, when, 0) for i, (k, v) in enumerate(cases)], KAFKA_SCHEMA))
    decoded_df = decode(df).cache()
    decoded, quarantined = split(decoded_df)
    assert (decoded.count(), quarantined.count()) == (len(cases) - 1, 1)
    warned = decoded.filter(F.col("decode_warnings").isNotNull())
    assert warned.count() == 8
    codes = {r["code"] for r in warned.select(F.explode("decode_warnings").alias("w")).select("w.*").collect()}
    assert codes == {"trailing_bytes", "bad_utf8", "bad_tagged_field", "negative_length",
                     "consumer_protocol_undecodable"}
    decoded_df.unpersist()


# ------------------------------------------------------------------ Java's decoder itself, through the JVM Spark runs


def _java_string(spark, raw: bytes) -> str:
    return spark._jvm.java.lang.String(bytearray(raw), "UTF-8")


@pytest.mark.spark
def test_java_utf8_table_matches_the_jvm(spark):
    for raw, text in JAVA_UTF8_CASES:
        assert _java_string(spark, raw) == text, raw


_INTERESTING = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF,
                0xF0, 0xF1, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF]


@pytest.mark.spark
@settings(max_examples=300, deadline=None)
@given(raw=st.lists(st.one_of(st.sampled_from(_INTERESTING), st.integers(0, 255)), max_size=8).map(bytes))
def test_java_utf8_matches_the_jvm_on_any_bytes(spark, raw):
    assert decode_java_utf8(raw)[0] == _java_string(spark, raw)


def test_every_warning_code_is_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "decoding.md").read_text(encoding="utf-8")
    for code in DECODE_WARNING_CODES:
        assert f"`{code}`" in doc, code


@pytest.mark.spark
def test_spark_replay_applies_warned_records(spark):
    """The Spark replay takes the decoded rows (``error_code`` null), warned ones included, like the pure one."""
    from datetime import datetime, timezone

    from offsets_audit.codec.spark import decode
    from offsets_audit.replay.spark import replay
    from offsets_audit.sources.schema import KAFKA_SCHEMA, with_batch_columns

    cases = _all_cases()
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    df = with_batch_columns(spark.createDataFrame(
        [(k, v, "__consumer_offsets", 0, i, when, 0) for i, (k, v) in enumerate(cases)], KAFKA_SCHEMA))
    tables = replay(decode(df))
    states = {r["group_id"]: r for r in tables["group_state"].collect()}
    assert states["testgroup"]["generation"] == 7  # the last classic record of testgroup in _all_cases
    assert "g" in states
    offsets = {(r["group_id"], r["topic"], r["partition"]) for r in tables["offsets"].collect()}
    assert {("testgroup", "testtopic", 11), ("g\ufffd", "t", 0)} <= offsets
    undecodable = [r for r in tables["group_events"].collect() if r["event"] == "replay_anomaly"]
    assert [r["offset"] for r in undecodable] == [len(cases) - 1]
