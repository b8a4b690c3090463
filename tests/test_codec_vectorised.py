"""The vectorised Spark path (``codec.vectorised``) equals the generic per-record path, row for row.

``decode_batch`` (flat records column-wise, the rest through ``decode_columns``) must give the same table as
``decode_batch_generic``: every column of every row, errors and error messages included, on the golden
records, real coordinator segments, a generated mix and corrupted offset commits.
"""

from __future__ import annotations

import base64
import json
import marshal
import random
import struct

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsets_audit.codec import encode_record
from offsets_audit.codec.spark import DECODED_COLUMNS, decode_batch, decode_batch_generic
from offsets_audit.codec.vectorised import decode_batch_columns, flat_layout, flat_record_types
from golden_files import golden_glob, open_golden

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


@pytest.fixture(autouse=True)
def every_group_vectorised(monkeypatch):
    """Small test batches would mostly stay below the group size that pays for column-wise decoding."""
    from offsets_audit.codec import vectorised

    monkeypatch.setattr(vectorised, "_ROWS_PER_WEIGHT", 0)
TOPIC_ID = "g_8BiAjWJZGXGxeb02GS2A"


def _b64(text):
    return None if text is None else base64.b64decode(text)


def _batch(pairs, *, partition=7, first_offset=0, is_control=None, read_errors=None) -> pa.RecordBatch:
    columns = {
        "key": pa.array([k for k, _ in pairs], pa.binary()),
        "value": pa.array([v for _, v in pairs], pa.binary()),
        "topic": pa.array(["__consumer_offsets"] * len(pairs)),
        "partition": pa.array([partition] * len(pairs), pa.int32()),
        "offset": pa.array(range(first_offset, first_offset + len(pairs)), pa.int64()),
    }
    if is_control is not None:
        columns["is_control"] = pa.array(is_control, pa.bool_())
    if read_errors is not None:
        columns["read_error_code"] = pa.array([e and e[0] for e in read_errors], pa.string())
        columns["read_error_message"] = pa.array([e and e[1] for e in read_errors], pa.string())
    return pa.RecordBatch.from_pydict(columns)


def assert_same_as_generic(batch: pa.RecordBatch) -> None:
    """The vectorised decode equals the generic one, with JSON texts, and without them (where the compiled kernel
    reads the simple layouts: ``_flat_kernel``) with and without the kernel."""
    from offsets_audit.codec import vectorised

    generic = decode_batch_generic(batch)
    _assert_columns_equal(decode_batch(batch), generic)
    # Without JSON texts: the same columns but for the JSON ones, null on decoded rows.
    decoded = pa.array([e is None for e in generic.column("error_code").to_pylist()])
    lean_generic = {name: (pc.if_else(decoded, pa.scalar(None, generic.column(name).type), generic.column(name))
                           if name in ("key_json", "value_json") else generic.column(name))
                    for name in generic.schema.names}
    lean = pa.RecordBatch.from_pydict(lean_generic, schema=generic.schema)
    _assert_columns_equal(decode_batch(batch, json_text=False), lean)
    kernel = vectorised._KERNEL
    try:
        vectorised._KERNEL = None
        _assert_columns_equal(decode_batch(batch, json_text=False), lean)
    finally:
        vectorised._KERNEL = kernel


def _assert_columns_equal(fast: pa.RecordBatch, generic: pa.RecordBatch) -> None:
    assert fast.schema == generic.schema
    for name in generic.schema.names:
        if not fast.column(name).equals(generic.column(name)):
            a, b = fast.column(name).to_pylist(), generic.column(name).to_pylist()
            diff = [(i, a[i], b[i]) for i in range(len(a)) if a[i] != b[i]][:5]
            raise AssertionError(f"column {name} differs at (row, fast, generic): {diff}")


def _fast_rows(batch: pa.RecordBatch) -> int:
    """How many rows the vectorised path decoded itself (the rest went to the generic path)."""
    from offsets_audit.codec.spark import _decode_lists

    seen = []

    def generic(sub):
        seen.append(sub.num_rows)
        return _decode_lists(sub)

    decode_batch_columns(batch, {n: t for n, (t, _) in DECODED_COLUMNS.items()}, generic)
    return batch.num_rows - sum(seen)


def _golden_pairs(golden):
    pairs = []
    for name in ("records.jsonl", "records_removed_types.jsonl"):
        with open_golden(golden / "records" / name) as f:
            pairs += [(_b64(g["key_b64"]), _b64(g["value_b64"])) for g in map(json.loads, f)]
    return pairs


@pytest.fixture(scope="module")
def golden_pairs(golden):
    return _golden_pairs(golden)


# ------------------------------------------------------------------ layouts from schemas/


def test_offset_commit_layouts_are_flat_for_every_version():
    layouts = flat_record_types()
    assert set(layouts[1].values) == {0, 1, 2, 3, 4}
    assert set(layouts[0].values) == {0}
    v4 = layouts[1].values[4]
    assert v4.flexible and [f.name for f in v4.tagged] == ["topicId"]


def test_messages_with_bytes_are_not_flat():
    from offsets_audit.codec.schema import load_schemas

    group_metadata = load_schemas().record_types[2].value
    assert flat_layout(group_metadata, 3) is None


def test_arrays_of_structs_are_flat():
    layouts = flat_record_types()
    assignment = layouts[7].values[0]
    [topic_partitions] = assignment.fields
    assert topic_partitions.array and [f.name for f in topic_partitions.element.fields] == ["topicId", "partitions"]


def test_assignment_records_of_real_histories_take_the_fast_path(golden):
    assignments = []
    for path in golden_glob(golden / "histories", "*.expected.jsonl"):
        with open_golden(path) as f:
            lines = [json.loads(raw) for raw in f]
        assignments += [(_b64(g["key_b64"]), _b64(g["value_b64"])) for g in lines if not g["is_control"]
                        and g["value_b64"] and _b64(g["key_b64"])[:2] in (b"\x00\x07", b"\x00\x08")]
    batch = _batch(assignments)
    assert len(assignments) > 50
    assert _fast_rows(batch) > len(assignments) // 2
    assert_same_as_generic(batch)


# ------------------------------------------------------------------ equality with the generic path


def test_golden_records_equal_generic(golden_pairs):
    assert_same_as_generic(_batch(golden_pairs))


def test_golden_segments_and_histories_equal_generic(golden):
    files = golden_glob(golden / "segments", "*.expected.jsonl") + golden_glob(golden / "histories", "*.expected.jsonl") \
        + golden_glob(golden / "histories" / "history-many-groups", "*.expected.jsonl")
    total = fast = 0
    for path in files:
        with open_golden(path) as f:
            lines = [json.loads(raw) for raw in f]
        batch = _batch([(_b64(g["key_b64"]), _b64(g["value_b64"])) for g in lines],
                       is_control=[g["is_control"] for g in lines])
        assert_same_as_generic(batch)
        total += batch.num_rows
        fast += _fast_rows(batch)
    assert total > 5000 and fast > total // 2


def test_small_groups_take_the_generic_path(monkeypatch):
    from offsets_audit.codec import vectorised

    monkeypatch.setattr(vectorised, "_ROWS_PER_WEIGHT", 8)
    commits = [encode_record(1, {"group": "g", "topic": "t", "partition": i},
                             {"offset": i, "leaderEpoch": 1, "metadata": "", "commitTimestamp": 5}, 3)
               for i in range(100)]
    assignment = encode_record(7, {"groupId": "g", "memberId": "m"},
                               {"topicPartitions": [{"topicId": TOPIC_ID, "partitions": [0, 1]}]}, 0)
    batch = _batch(commits + [assignment] * 10)
    assert _fast_rows(batch) == 100
    assert_same_as_generic(batch)


def test_well_formed_offset_commits_take_the_fast_path_only():
    pairs = [encode_record(1, {"group": f"g{i}", "topic": "orders", "partition": i}, None if i % 7 == 0 else
                           {"offset": i, "leaderEpoch": 3, "metadata": "", "commitTimestamp": 1000 + i,
                            "expireTimestamp": -1, "topicId": TOPIC_ID if i % 2 else ZERO_UUID}, i % 5)
             for i in range(200)]
    batch = _batch(pairs)
    assert _fast_rows(batch) == len(pairs)
    assert_same_as_generic(batch)


def _commit(rng: random.Random, version: int, text=None, tombstone=False, record_type=1):
    def s():
        if text is not None:
            return text
        return rng.choice(["", "orders", "é-ü", "tab\there", 'quote"', "back\\slash", "x" * rng.choice([126, 127, 300]),
                           "\x7f", "\U0001f600", "ctl\x01"])
    key = {"group": s(), "topic": s(), "partition": rng.randrange(-5, 1 << 31)}
    value = {"offset": rng.randrange(-(1 << 63), 1 << 63), "leaderEpoch": rng.randrange(-(1 << 31), 1 << 31),
             "metadata": s(), "commitTimestamp": rng.randrange(-(1 << 63), 1 << 63),
             "expireTimestamp": rng.randrange(-(1 << 63), 1 << 63),
             "topicId": rng.choice([ZERO_UUID, TOPIC_ID, "_____________________w"])}
    if record_type == 0:
        version = 0
    return encode_record(record_type, key, None if tombstone else value, None if tombstone else version)


def _generated_mix(golden_pairs, seed=3, n=3000):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        if rng.random() < 0.1:
            rows.append(rng.choice(golden_pairs))
        else:
            rows.append(_commit(rng, rng.randrange(5), text=None if rng.random() < 0.3 else "plain-ascii",
                                tombstone=rng.random() < 0.05, record_type=rng.choice([0, 1, 1, 1])))
    return rows


def test_generated_mix_equals_generic(golden_pairs):
    assert_same_as_generic(_batch(_generated_mix(golden_pairs)))


def test_without_json_text_only_the_json_columns_of_decoded_rows_are_null(golden_pairs):
    """``decode_batch(..., json_text=False)`` (a run that never writes the JSON texts, ``codec.source``'s
    ``compact``): every column as with them, fast and generic rows alike, but ``key_json`` and ``value_json``."""
    rows = _generated_mix(golden_pairs) + list(_corruptions(*golden_pairs[0]))
    batch = _batch(rows)
    full, lean = decode_batch(batch, True).to_pylist(), decode_batch(batch, True, json_text=False).to_pylist()
    assert len(full) == len(lean) and any(r["error_code"] for r in full)
    assert any(r["record_type"] not in (0, 1) and r["error_code"] is None for r in full)
    for a, b in zip(full, lean):
        assert b["key_json"] is None and b["value_json"] is None
        same = {k: v for k, v in a.items() if k not in ("key_json", "value_json", "decoded_record")}
        assert {k: b[k] for k in same} == same
        assert (a["decoded_record"] is None) == (b["decoded_record"] is None)
        if a["decoded_record"] is not None:
            assert marshal.loads(a["decoded_record"]) == marshal.loads(b["decoded_record"])


def test_offset_commit_values_are_typed_as_value_json_prints_them(golden_pairs):
    """``offset_commit_value`` holds what ``value_json`` prints for offset commits (fields it omits are null)
    and is null for every other row, so the commit log never parses the JSON again."""
    from offsets_audit.codec.offset_commits import OFFSET_COMMIT_VALUE_SOURCES

    rng = random.Random(4)
    pairs = _generated_mix(golden_pairs, seed=7, n=1500) + [
        _commit(rng, version, text="plain-ascii") for version in range(5) for _ in range(20)]
    seen = set()
    for row in decode_batch(_batch(pairs)).to_pylist():
        typed = row["offset_commit_value"]
        if row["record_type"] in (0, 1) and row["value_json"] is not None and row["error_code"] is None:
            value = json.loads(row["value_json"])
            assert typed == {name: value.get(field) for name, field in OFFSET_COMMIT_VALUE_SOURCES.items()}
            seen |= {(row["record_type"], row["value_version"], name) for name, v in typed.items() if v is not None}
        else:
            assert typed is None, row
    assert {(1, 4, "topic_id"), (1, 1, "expire_timestamp"), (1, 3, "leader_epoch"), (0, 0, "offset")} <= seen
    assert (1, 2, "leader_epoch") not in seen


def test_sliced_batches_equal_generic(golden_pairs):
    batch = _batch(_generated_mix(golden_pairs, seed=5, n=800))
    for start, length in ((1, 100), (137, 500), (799, 1), (0, 0)):
        assert_same_as_generic(batch.slice(start, length))


def test_control_records_and_read_errors_equal_generic(golden_pairs):
    pairs = _generated_mix(golden_pairs, seed=9, n=300)
    rng = random.Random(1)
    control = [rng.random() < 0.1 for _ in pairs]
    errors = [("crc_mismatch", f"bad crc at byte {i}") if rng.random() < 0.1 else None for i in range(len(pairs))]
    pairs[3] = (None, None)
    assert_same_as_generic(_batch(pairs, is_control=control, read_errors=errors))


def _corruptions(key: bytes, value: bytes | None):
    """Every truncation, a byte flip at every position, trailing bytes and tag-section variants."""
    for cut in range(len(key)):
        yield key[:cut], value
    for at in range(len(key)):
        for b in (0x00, 0x7F, 0x80, 0xFF):
            yield key[:at] + bytes([b]) + key[at + 1:], value
    yield key + b"\x00", value
    if value is None:
        return
    for cut in range(len(value)):
        yield key, value[:cut]
    for at in range(len(value)):
        for b in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            yield key, value[:at] + bytes([b]) + value[at + 1:]
    yield key, value + b"\x00"
    for version in (-1, 5, 0x7FFF):
        yield key, struct.pack(">h", version) + value[2:]


def test_corrupted_offset_commits_equal_generic():
    rng = random.Random(11)
    rows = []
    for version in range(5):
        for tombstone in (False, True):
            key, value = _commit(rng, version, text="grp", tombstone=tombstone)
            rows += list(_corruptions(key, value))
    key, value = _commit(rng, 0, text="grp", record_type=0)
    rows += list(_corruptions(key, value))
    assert_same_as_generic(_batch(rows))


def test_v4_tag_sections_equal_generic():
    key, plain = encode_record(1, {"group": "g", "topic": "t", "partition": 1},
                               {"offset": 5, "leaderEpoch": 1, "metadata": "m", "commitTimestamp": 9}, 4)
    assert plain[-1:] == b"\x00"
    body = plain[:-1]
    uuid = base64.urlsafe_b64decode(TOPIC_ID + "==")
    variants = [
        body + b"\x01\x00\x10" + uuid,              # topicId
        body + b"\x01\x00\x10" + bytes(16),         # topicId equal to its default: not printed
        body + b"\x01\x00\x11" + uuid + b"\x00",    # wrong size
        body + b"\x01\x07\x02ab",                   # unknown tag
        body + b"\x02\x00\x10" + uuid + b"\x07\x00",  # two tags
        body + b"\x01\x00\x10" + uuid[:5],          # truncated
        body + b"\x01\x80\x01\x10" + uuid,          # tag as a two-byte varint
        body + b"\x80\x00",                         # count as a two-byte varint
        body[:14] + b"\x00" + body[16:] + b"\x00",  # null metadata
    ]
    assert_same_as_generic(_batch([(key, v) for v in variants]))


_FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FUZZ
@given(data=st.data())
def test_mutated_offset_commits_equal_generic(data):
    rng = random.Random(data.draw(st.integers(0, 1 << 30)))
    rows = []
    for _ in range(data.draw(st.integers(1, 20))):
        key, value = _commit(rng, data.draw(st.integers(0, 4)), tombstone=data.draw(st.booleans()),
                             record_type=data.draw(st.sampled_from([0, 1])))
        target = data.draw(st.sampled_from(["none", "key", "value"]))
        if target != "none" and (target == "key" or value):
            raw = bytearray(key if target == "key" else value)
            for _ in range(data.draw(st.integers(1, 3))):
                raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
            cut = data.draw(st.integers(0, len(raw) + 2))
            raw = bytes(raw[:cut]) + data.draw(st.binary(max_size=2))
            key, value = (raw, value) if target == "key" else (key, raw)
        rows.append((key, value))
    assert_same_as_generic(_batch(rows))


@_FUZZ
@given(data=st.data())
def test_mutated_golden_records_equal_generic(golden_pairs, data):
    rows = []
    for _ in range(data.draw(st.integers(1, 12))):
        key, value = data.draw(st.sampled_from(golden_pairs))
        if value and data.draw(st.booleans()):
            raw = bytearray(value)
            for _ in range(data.draw(st.integers(1, 3))):
                raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
            value = bytes(raw[:data.draw(st.integers(0, len(raw) + 1))])
        rows.append((key, value))
    assert_same_as_generic(_batch(rows))


@pytest.fixture(scope="module")
def history_pairs(golden):
    pairs = []
    for path in golden_glob(golden / "histories", "*.expected.jsonl"):
        with open_golden(path) as f:
            pairs += [(_b64(g["key_b64"]), _b64(g["value_b64"])) for g in map(json.loads, f) if not g["is_control"]]
    return pairs


@_FUZZ
@given(data=st.data())
def test_mutated_real_group_records_equal_generic(history_pairs, data):
    """Member, assignment and metadata records as a coordinator writes them, then corrupted."""
    rows = []
    for _ in range(data.draw(st.integers(1, 12))):
        key, value = data.draw(st.sampled_from(history_pairs))
        if value and data.draw(st.booleans()):
            raw = bytearray(value)
            for _ in range(data.draw(st.integers(1, 3))):
                raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.sampled_from([0, 1, 2, 0x7F, 0x80, 0xFF]))
            value = bytes(raw[:data.draw(st.integers(0, len(raw) + 1))]) + data.draw(st.binary(max_size=2))
        rows.append((key, value))
    assert_same_as_generic(_batch(rows))


def test_long_partition_arrays_stay_on_the_fast_path():
    key, value = encode_record(7, {"groupId": "g", "memberId": "m"},
                               {"topicPartitions": [{"topicId": TOPIC_ID, "partitions": list(range(500))}]}, 0)
    batch = _batch([(key, value)])
    assert _fast_rows(batch) == 1
    assert_same_as_generic(batch)


@_FUZZ
@given(rows=st.lists(st.tuples(
    st.one_of(st.none(), st.binary(max_size=40).map(lambda b: b"\x00\x01" + b), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=60).map(lambda b: b"\x00" + bytes([len(b) % 6]) + b))), max_size=30))
def test_random_bytes_equal_generic(rows):
    assert_same_as_generic(_batch(rows))


# ------------------------------------------------------------------ Spark


@pytest.mark.spark
def test_spark_decode_equals_generic_on_a_corrupted_mix(spark, golden_pairs):
    from datetime import datetime, timezone

    from offsets_audit.codec.spark import decode
    from offsets_audit.sources.schema import KAFKA_SCHEMA

    rng = random.Random(2)
    pairs = _generated_mix(golden_pairs, seed=4, n=400)
    key, value = _commit(rng, 4, text="grp")
    pairs += list(_corruptions(key, value))[::7]
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    df = spark.createDataFrame([(k, v, "__consumer_offsets", 7, i, when, 0) for i, (k, v) in enumerate(pairs)],
                               KAFKA_SCHEMA)
    got = {row["offset"]: row.asDict(recursive=True) for row in decode(df).collect()}
    expected = decode_batch_generic(_batch(pairs)).to_pylist()
    assert len(got) == len(expected)
    for want in expected:
        row = got[want["offset"]]
        assert {c: row[c] for c in DECODED_COLUMNS} == {c: want[c] for c in DECODED_COLUMNS}


def test_segment_source_batches_equal_generic(golden):
    """Batches as the segments source builds them (every SOURCE_SCHEMA column, control records, corruption)."""
    from offsets_audit.sources.segments import list_segments
    from offsets_audit.sources.segments_spark import read_arrow

    checked = 0
    for root in (golden / "segments", golden / "histories"):
        for path, partition in list_segments(root, names="any"):   # golden files are named by case
            for batch in read_arrow(path, partition):
                assert_same_as_generic(batch)
                checked += batch.num_rows
    assert checked > 5000


# ------------------------------------------------------------------ batches joined before decoding


def test_coalesced_batches_keep_row_order_and_limits(golden_pairs):
    from offsets_audit.codec.spark import _coalesce

    pairs = _generated_mix(golden_pairs, seed=6, n=1000)
    batches = [_batch(pairs[i:i + 70], first_offset=i) for i in range(0, len(pairs), 70)]
    joined = list(_coalesce(batches, max_rows=300, max_bytes=1 << 30))
    assert [b.num_rows for b in joined] == [280, 280, 280, 160]
    assert pa.Table.from_batches(joined).equals(pa.Table.from_batches(batches))
    by_bytes = list(_coalesce(batches, max_rows=10_000, max_bytes=batches[0].nbytes + 1))
    assert len(by_bytes) == len(batches)


def test_decode_batches_equals_generic_per_batch(golden_pairs):
    from offsets_audit.codec.spark import decode_batches

    pairs = _generated_mix(golden_pairs, seed=8, n=900)
    batches = [_batch(pairs[i:i + 100], first_offset=i) for i in range(0, len(pairs), 100)]
    got = pa.Table.from_batches(list(decode_batches(iter(batches))))
    assert got.equals(pa.Table.from_batches([decode_batch_generic(b) for b in batches]))


def test_the_compiled_kernel_reads_every_offset_commit_layout():
    """Where setup.py built ``_flat_kernel``, decoding without JSON texts reads offset commit keys and values (every
    version, tombstones too) in C; ``assert_same_as_generic`` compares its rows with the generic decoder's."""
    from offsets_audit.codec import vectorised

    if vectorised._KERNEL is None:
        pytest.skip("the compiled kernel is not built here (a pure-Python install)")
    layouts = flat_record_types()
    for record_type in (0, 1):
        assert vectorised._kernel_layouts(layouts[record_type].key, None) is not None
        for version, layout in layouts[record_type].values.items():
            assert vectorised._kernel_layouts(layouts[record_type].key, layout) is not None, version
    rng = random.Random(5)
    rows = [_commit(rng, version) for version in range(5) for _ in range(20)]
    batch = _batch(rows)
    calls = []
    real = vectorised._KERNEL.read_flat

    class Spy:
        @staticmethod
        def read_flat(*args):
            calls.append(len(args[1]))
            return real(*args)

    kernel = vectorised._KERNEL
    vectorised._KERNEL = Spy
    try:
        decode_batch(batch, json_text=False)
    finally:
        vectorised._KERNEL = kernel
    assert sum(calls) == 2 * len(rows)  # each row's key and value, in C
    assert_same_as_generic(batch)
