"""Bad bytes: every DecodeError code, and fuzzing that nothing but DecodeError ever leaves the codec."""

from __future__ import annotations

import base64
import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsets_audit.codec import DECODE_ERROR_CODES, DECODE_WARNING_CODES, DecodeError, decode_record, encode_record
from offsets_audit.codec.wire import read_java_unsigned_varint
from offsets_audit.codec.spark import decode_columns
from golden_files import open_golden

OFFSET_KEY = {"group": "g", "topic": "t", "partition": 3}
OFFSET_V3 = {"offset": 42, "leaderEpoch": 7, "metadata": "m", "commitTimestamp": 1000}


def _golden_pairs(golden):
    pairs = []
    for name in ("records.jsonl", "records_removed_types.jsonl"):
        with open_golden(golden / "records" / name) as f:
            for line in f:
                g = json.loads(line)
                value = None if g["value_b64"] is None else base64.b64decode(g["value_b64"])
                pairs.append((base64.b64decode(g["key_b64"]), value))
    return pairs


def _code(key, value):
    with pytest.raises(DecodeError) as info:
        decode_record(key, value)
    return info.value


def test_empty_key():
    assert _code(b"", None).code == "empty_key"
    assert _code(None, b"\x00\x00").code == "empty_key"


def test_unknown_record_type_names_the_type():
    error = _code(struct.pack(">h", 99) + b"\x00\x00", None)
    assert error.code == "unknown_record_type"
    assert error.record_type == 99 and "99" in str(error)


def test_unknown_version_names_type_version_and_schema_file():
    key, _ = encode_record(1, OFFSET_KEY, None, None)
    error = _code(key, struct.pack(">h", 5) + b"\x00" * 30)
    assert error.code == "unknown_version"
    assert (error.record_type, error.version) == (1, 5)
    assert "offset_commit_value.json" in str(error)


def test_legacy_offset_commit_accepts_only_value_version_0():
    key, value = encode_record(1, OFFSET_KEY, OFFSET_V3, 3)
    assert _code(struct.pack(">h", 0) + key[2:], value).code == "unknown_version"


def test_truncated_value_gives_position():
    key, value = encode_record(1, OFFSET_KEY, OFFSET_V3, 3)
    error = _code(key, value[:-3])
    assert error.code == "truncated"
    assert error.position is not None and error.part == "value"


def test_truncated_prefix():
    key, _ = encode_record(1, OFFSET_KEY, None, None)
    assert _code(key, b"\x00").code == "truncated"
    assert _code(b"\x00", None).code == "truncated"


def test_string_over_32767_bytes_in_a_flexible_version():
    """The generated read refuses a string length over 0x7fff ("had invalid length"): Kafka fails the load."""
    key, value = encode_record(1, OFFSET_KEY, dict(OFFSET_V3, metadata="m" * 32767), 4)
    assert decode_record(key, value).value["metadata"] == "m" * 32767
    key, value = encode_record(1, OFFSET_KEY, dict(OFFSET_V3, metadata="m" * 32768), 4)
    error = _code(key, value)
    assert error.code == "string_too_long" and error.part == "value"


def test_unknown_tag_with_a_negative_size():
    """``readUnknownTaggedField`` with a negative size: Java cannot allocate the array, the load fails."""
    key, value = encode_record(1, OFFSET_KEY, dict(OFFSET_V3, topicId="AAAAAAAAAAAAAAAAAAAAAA"), 4)
    assert _code(key, value[:-1] + b"\x01\x07\xff\xff\xff\xff\x0f").code == "negative_length"


def test_negative_length():
    key = struct.pack(">hh", 1, -5)
    assert _code(key, None).code == "negative_length"


def test_null_not_allowed():
    key = struct.pack(">hh", 1, -1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    assert _code(key, None).code == "null_not_allowed"


def test_invalid_varint():
    with pytest.raises(DecodeError) as info:
        read_java_unsigned_varint(b"\xff\xff\xff\xff\xff\x01", 0, [])
    assert info.value.code == "invalid_varint"
    key, value = encode_record(1, OFFSET_KEY, dict(OFFSET_V3, topicId="AAAAAAAAAAAAAAAAAAAAAA"), 4)
    # v4 is flexible: replace the compact metadata length with an over-long varint
    broken = value[:14] + b"\xff\xff\xff\xff\xff\xff" + value[15:]
    assert _code(key, broken).code == "invalid_varint"


def test_unknown_tags_are_kept_and_written_back():
    key, value = encode_record(1, OFFSET_KEY, dict(OFFSET_V3, topicId="AAAAAAAAAAAAAAAAAAAAAA"), 4)
    assert value[-1:] == b"\x00"
    with_unknown = value[:-1] + b"\x01\x07\x02ab"
    record = decode_record(key, with_unknown)
    assert record.value["_unknown_tags"] == {7: b"ab"}
    assert "_unknown_tags" not in record.kafka_json()[1]
    assert encode_record(1, record.key, record.value, 4)[1] == with_unknown


def test_every_code_is_listed():
    assert {"empty_key", "unknown_record_type", "unknown_version", "truncated", "trailing_bytes", "bad_utf8",
            "negative_length", "invalid_varint", "string_too_long"} <= set(DECODE_ERROR_CODES)


def _only_decode_errors(key, value):
    try:
        record = decode_record(key, value)
    except DecodeError as exc:
        assert exc.code in DECODE_ERROR_CODES
    else:
        assert all(w.code in DECODE_WARNING_CODES for w in record.warnings)


_FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def pairs(golden):
    return _golden_pairs(golden)


@_FUZZ
@given(data=st.data())
def test_truncations_raise_only_decode_error(pairs, data):
    key, value = data.draw(st.sampled_from(pairs))
    cut_key = data.draw(st.integers(0, len(key)))
    _only_decode_errors(key[:cut_key], value)
    if value:
        cut = data.draw(st.integers(0, len(value) - 1))
        try:
            record = decode_record(key, value[:cut])
        except DecodeError:
            return
        # A cut can end exactly where a release's earlier layout of the same value version ends (4.0's
        # ShareGroupMetadataValue v0 before 4.1 added metadataHash): those bytes are that release's record, read
        # with every byte and nothing tolerated. Any other cut raises.
        assert record.layout is not None and not record.warnings, (cut, record)


@_FUZZ
@given(data=st.data())
def test_bit_flips_raise_only_decode_error(pairs, data):
    key, value = data.draw(st.sampled_from(pairs))
    target = data.draw(st.sampled_from(["key", "value"] if value else ["key"]))
    raw = bytearray(key if target == "key" else value)
    for _ in range(data.draw(st.integers(1, 4))):
        bit = data.draw(st.integers(0, len(raw) * 8 - 1))
        raw[bit // 8] ^= 1 << (bit % 8)
    if target == "key":
        _only_decode_errors(bytes(raw), value)
    else:
        _only_decode_errors(key, bytes(raw))


@_FUZZ
@given(key=st.binary(max_size=64), value=st.one_of(st.none(), st.binary(max_size=256)))
def test_random_bytes_raise_only_decode_error(key, value):
    _only_decode_errors(key, value)


@_FUZZ
@given(record_type=st.integers(0, 23), version=st.integers(-32768, 32767), body=st.binary(max_size=64))
def test_any_value_version_raises_only_decode_error(record_type, version, body):
    _only_decode_errors(struct.pack(">hh", record_type, 1) + b"g", struct.pack(">h", version) + body)


def test_pure_column_decoder_never_raises_and_keeps_every_row():
    keys = [b"", b"\x00", None, struct.pack(">h", 77), encode_record(1, OFFSET_KEY, None, None)[0]]
    values = [None, None, b"x", None, b"\x00\x09"]
    out = decode_columns(keys, values, partitions=[0] * 5, offsets=list(range(5)))
    assert out["error_code"] == ["empty_key", "truncated", "empty_key", "unknown_record_type", "unknown_version"]
    assert "offset 4" in out["error_message"][4] and "schemas/" in out["error_message"][4]


# ------------------------------------------------------------------ Spark: one DataFrame per property


def _corrupted_rows(pairs, seed=7, copies=3):
    import random

    rng = random.Random(seed)
    rows = []
    for key, value in pairs * copies:
        kind = rng.randrange(5)
        if kind == 0 and value:
            value = value[: rng.randrange(len(value))]
        elif kind == 1:
            raw = bytearray(key)
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
            key = bytes(raw)
        elif kind == 2:
            key, value = rng.randbytes(rng.randrange(0, 20)), rng.choice([None, rng.randbytes(30)])
        elif kind == 3:
            value = struct.pack(">h", rng.randrange(-5, 40)) + (value or b"")[2:]
        rows.append((key, value))
    return rows


@pytest.mark.spark
def test_spark_decode_quarantines_bad_rows_and_conserves_counts(spark, pairs):
    from datetime import datetime, timezone

    from pyspark.sql import functions as F

    from offsets_audit.codec.spark import decode, split
    from offsets_audit.sources.schema import KAFKA_SCHEMA, with_batch_columns

    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    corrupted = _corrupted_rows(pairs)
    rows = [(k, v, "__consumer_offsets", 7, i, when, 0) for i, (k, v) in enumerate(corrupted)]
    df = with_batch_columns(spark.createDataFrame(rows, KAFKA_SCHEMA))
    # one control record and one row the source could not read
    extra = spark.createDataFrame(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05", "__consumer_offsets", 7, len(rows), when, 0),
         (None, None, "__consumer_offsets", 7, len(rows) + 1, when, 0)], KAFKA_SCHEMA)
    extra = with_batch_columns(extra).withColumn(
        "is_control", F.col("offset") == len(rows)).withColumn(
        "read_error_code", F.when(F.col("offset") == len(rows) + 1, F.lit("crc_mismatch"))).withColumn(
        "read_error_message", F.when(F.col("offset") == len(rows) + 1, F.lit("bad crc in file x at byte 9")))
    decoded_df = decode(df.unionByName(extra)).cache()
    decoded, quarantined = split(decoded_df)
    total, n_decoded, n_quarantined = decoded_df.count(), decoded.count(), quarantined.count()
    assert total == len(rows) + 2 == n_decoded + n_quarantined
    assert n_quarantined > 0 and n_decoded > 0
    bad = quarantined.select("error_code", "error_message", "key", "partition", "offset").collect()
    assert all(r["error_code"] and r["error_message"] for r in bad)
    by_offset = {r["offset"]: r for r in decoded_df.collect()}
    control = by_offset[len(rows)]
    assert control["record_name"] == "ControlRecord" and control["error_code"] is None
    unreadable = by_offset[len(rows) + 1]
    assert unreadable["error_code"] == "crc_mismatch" and unreadable["error_message"].startswith("bad crc")
    # rows that decode in Spark decode the same way in the pure core
    for i, (key, value) in enumerate(corrupted):
        try:
            decode_record(key, value)
            assert by_offset[i]["error_code"] is None
        except DecodeError as exc:
            assert by_offset[i]["error_code"] == exc.code
            assert f"offset {i}" in by_offset[i]["error_message"]
    decoded_df.unpersist()
