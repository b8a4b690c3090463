"""Every golden record (made by Kafka's own serde and JSON converters) through the codec, no sampling."""

from __future__ import annotations

import base64
import json

import pytest

from offsets_audit.codec import (
    decode_consumer_protocol, decode_record, encode_consumer_protocol, encode_record, kafka_dump_log,
)
from offsets_audit.codec.json import jackson_dumps
from golden_files import golden_glob, open_golden


def _lines(golden, name):
    with open_golden(golden / "records" / name) as f:
        return [json.loads(line) for line in f]


def _bytes(b64):
    return None if b64 is None else base64.b64decode(b64)


@pytest.fixture(scope="module")
def records(golden):
    return _lines(golden, "records.jsonl")


@pytest.fixture(scope="module")
def removed(golden):
    return _lines(golden, "records_removed_types.jsonl")


@pytest.fixture(scope="module")
def consumer_protocol(golden):
    return _lines(golden, "consumer_protocol.jsonl")


def _check_decoded(line):
    record = decode_record(_bytes(line["key_b64"]), _bytes(line["value_b64"]))
    assert (record.record_type, record.record_name, record.key_version, record.value_version) == (
        line["record_type"], line["record_name"], line["key_version"], line["value_version"])
    key_json, value_json = record.kafka_json()
    assert key_json == line["key_json"]
    assert value_json == line["value_json"]
    return record


def test_every_record_decodes_to_kafka_json(records):
    for line in records:
        _check_decoded(line)


def test_every_record_prints_like_kafka_dump_log(records):
    for line in records:
        record = decode_record(_bytes(line["key_b64"]), _bytes(line["value_b64"]))
        assert kafka_dump_log(record) == (line["dump_key"], line["dump_payload"])


def test_every_record_encodes_back_to_the_same_bytes(records, removed):
    for line in records + removed:
        key, value = _bytes(line["key_b64"]), _bytes(line["value_b64"])
        record = decode_record(key, value)
        assert encode_record(record.record_type, record.key, record.value, record.value_version) == (key, value)


def test_removed_record_types_still_decode(removed):
    assert {line["record_type"] for line in removed} == {9, 18}
    for line in removed:
        record = _check_decoded(line)
        # the current kafka-dump-log skips these types; we print them the way it prints known types
        dump_key, dump_payload = kafka_dump_log(record)
        assert json.loads(dump_key) == {"type": str(line["record_type"]), "data": line["key_json"]}
        expected = "<DELETE>" if line["value_json"] is None else jackson_dumps(
            {"version": str(line["value_version"]), "data": line["value_json"]})
        assert dump_payload == expected


def test_golden_covers_every_value_version_and_tombstones(records):
    from offsets_audit.codec.schema import load_schemas

    seen = {(line["record_type"], line["value_version"]) for line in records}
    for record_type, spec in load_schemas().record_types.items():
        if spec.removed_in:
            continue
        assert (record_type, None) in seen
        for version in spec.value.valid_versions:
            assert (record_type, version) in seen


def test_every_consumer_protocol_payload_decodes_to_kafka_json(consumer_protocol):
    for line in consumer_protocol:
        data = _bytes(line["value_b64"])
        assert decode_consumer_protocol(line["kind"], data) == line["value_json"]


def test_consumer_protocol_encode_round_trip(consumer_protocol):
    from offsets_audit.codec.records import _decode_consumer_protocol_dict

    for line in consumer_protocol:
        data = _bytes(line["value_b64"])
        version, message = _decode_consumer_protocol_dict(line["kind"], data, strict=True)
        assert version == line["version"]
        assert encode_consumer_protocol(line["kind"], version, message) == data


def test_classic_consumer_members_carry_decoded_protocol(records):
    checked = 0
    for line in records:
        if line["record_type"] != 2 or line["value_b64"] is None:
            continue
        record = decode_record(_bytes(line["key_b64"]), _bytes(line["value_b64"]))
        dumped = json.loads(line["dump_payload"])["data"]
        for member, dumped_member in zip(record.value["members"], dumped["members"]):
            if record.value["protocolType"] != "consumer":
                assert "subscription_decoded" not in member
                continue
            for kind in ("subscription", "assignment"):
                decoded = member[f"{kind}_decoded"]
                if decoded is None:
                    assert dumped_member[kind] == base64.b64encode(member[kind]).decode()
                else:
                    assert isinstance(dumped_member[kind], dict)
                    checked += 1
    assert checked > 0


@pytest.mark.spark
def test_every_record_through_spark_decode_matches_kafka_json(spark, records, removed):
    from datetime import datetime, timezone

    from offsets_audit.codec.spark import decode
    from offsets_audit.sources.schema import KAFKA_SCHEMA, with_batch_columns

    lines = records + removed
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows = [(_bytes(line["key_b64"]), _bytes(line["value_b64"]), "__consumer_offsets", 0, offset, when, 0)
            for offset, line in enumerate(lines)]
    df = with_batch_columns(spark.createDataFrame(rows, KAFKA_SCHEMA))
    out = {row["offset"]: row for row in decode(df).collect()}
    assert len(out) == len(lines)
    for offset, line in enumerate(lines):
        row = out[offset]
        assert row["error_code"] is None, row["error_message"]
        assert row["decode_warnings"] is None, row["decode_warnings"]
        assert (row["record_type"], row["record_name"], row["key_version"], row["value_version"]) == (
            line["record_type"], line["record_name"], line["key_version"], line["value_version"])
        assert row["is_tombstone"] == (line["value_b64"] is None)
        assert json.loads(row["key_json"]) == line["key_json"]
        assert (None if row["value_json"] is None else json.loads(row["value_json"])) == line["value_json"]
        assert row["topic"] == "__consumer_offsets"
        key = line["key_json"]
        assert row["group_id"] == key.get("group", key.get("groupId"))
        assert row["member_id"] == key.get("memberId")
        assert row["topic_name"] == key.get("topic")
        assert row["topic_partition"] == key.get("partition")


def _segment_and_history_files(golden):
    return golden_glob(golden / "segments", "*.expected.jsonl") + golden_glob(golden / "histories", "*.expected.jsonl") \
        + golden_glob(golden / "histories" / "history-many-groups", "*.expected.jsonl")


def test_no_record_kafka_wrote_carries_a_warning(golden, records, removed, consumer_protocol):
    """Leniency is for bytes Kafka tolerates, never for bytes Kafka writes: every golden record, removed
    type, consumer-protocol payload, segment and history record decodes without a warning."""
    checked = 0
    for line in records + removed:
        assert decode_record(_bytes(line["key_b64"]), _bytes(line["value_b64"])).warnings == [], line
        checked += 1
    for line in consumer_protocol:
        found = []
        decode_consumer_protocol(line["kind"], _bytes(line["value_b64"]), warnings=found)
        assert found == [], line
    for path in _segment_and_history_files(golden):
        with open_golden(path) as f:
            for raw in f:
                line = json.loads(raw)
                if line["is_control"]:
                    continue
                record = decode_record(_bytes(line["key_b64"]), _bytes(line["value_b64"]))
                assert record.warnings == [], (path.name, line["offset"], record.warnings)
                checked += 1
    assert checked > 5000


def test_every_segment_and_history_record_prints_like_kafka_dump_log(golden):
    """The data records of segments/ and histories/ (real coordinator output) decode, print and re-encode."""
    import lzma

    files = golden_glob(golden / "segments", "*.expected.jsonl") + golden_glob(golden / "histories", "*.expected.jsonl") \
        + golden_glob(golden / "histories" / "history-many-groups", "*.expected.jsonl")
    checked = 0
    for path in files:
        opener = lzma.open if path.suffix == ".xz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            for raw in f:
                line = json.loads(raw)
                if line["is_control"]:
                    continue
                key, value = _bytes(line["key_b64"]), _bytes(line["value_b64"])
                record = decode_record(key, value)
                assert kafka_dump_log(record) == (line["dump_key"], line["dump_payload"]), (path.name, line["offset"])
                assert encode_record(record.record_type, record.key, record.value, record.value_version) == (key, value)
                checked += 1
    assert checked > 5000


@pytest.mark.parametrize("source", ["records", "removed"])
def test_decoded_record_column_holds_what_decode_record_makes(source, records, removed):
    """The replay folds group records from the codec's ``decoded_record`` column (one decode per record end
    to end): on every golden record it holds the type, key and value that decoding the bytes gives."""
    from offsets_audit.codec.spark import DECODED_RECORD_COLUMN, decode_columns, decoded_record_of

    lines = records if source == "records" else removed
    keys = [_bytes(line["key_b64"]) for line in lines]
    values = [_bytes(line["value_b64"]) for line in lines]
    blobs = decode_columns(keys, values, with_decoded_record=True)[DECODED_RECORD_COLUMN]
    for line, key, value, blob in zip(lines, keys, values, blobs):
        if line["record_type"] in (0, 1):
            assert blob is None  # offset commits stay columnar: the fold never needs their values
            continue
        record, again = decode_record(key, value), decoded_record_of(blob)
        assert (again.record_type, again.key, again.value) == (record.record_type, record.key, record.value), line
