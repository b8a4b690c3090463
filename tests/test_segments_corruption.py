"""Bad bytes in a segment never raise: every batch is read whole or covered by one quarantine entry."""

from __future__ import annotations

import struct
import zlib

import pytest
import xxhash
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings, strategies as st

from offsets_audit.sources.compression import compress
from offsets_audit.sources.segment_writer import encode_batch
from offsets_audit.sources.segments import iter_batches, read_segment
from segments_golden import batch_extents, collected_cases

SEGMENT_CASES = [c for c in collected_cases() if c.log.parent.name == "segments"]


def read_bytes(tmp_path, data: bytes, name="00000000000000000000.log"):
    path = tmp_path / name
    path.write_bytes(data)
    quarantine = []
    batches = list(iter_batches(path, quarantine))
    return batches, quarantine


def assert_bytes_are_accounted_for(batches, quarantine, size):
    """Read batches and quarantine entries tile the file exactly: no byte read twice, none lost."""
    pieces = sorted([(b.position, b.size) for b in batches] + [(q["position"], q["skipped_bytes"]) for q in quarantine])
    pos = 0
    for start, length in pieces:
        assert start == pos and length > 0
        pos += length
    assert pos == size


def assert_untouched_batches_are_read(original, batches, touched: set[int]):
    """Every original batch none of whose bytes changed is read with the same records."""
    clean = {b.position: b for b in original}
    by_position = {b.position: b for b in batches}
    for start, batch in clean.items():
        if not any(start <= t < start + batch.size for t in touched):
            assert start in by_position, f"untouched batch at byte {start} was not read"
            assert by_position[start].records == batch.records


@pytest.fixture(params=SEGMENT_CASES, ids=[c.name for c in SEGMENT_CASES])
def segment(request):
    case = request.param
    data = case.log.read_bytes()
    return case, data, list(iter_batches(case.log))


def test_truncation_at_a_batch_boundary_reads_the_whole_batches_before_it(segment, tmp_path):
    case, data, original = segment
    for start, _ in batch_extents(data):
        batches, quarantine = read_bytes(tmp_path, data[:start])
        assert quarantine == []
        assert [b.records for b in batches] == [b.records for b in original if b.position < start]


def test_truncation_mid_batch_quarantines_the_tail_as_truncated_batch(segment, tmp_path):
    case, data, original = segment
    for start, end in batch_extents(data):
        for cut in sorted({start + 1, start + 11, start + 12, start + 17, start + 30, start + 61,
                           (start + end) // 2, end - 1}):
            if not start < cut < end:
                continue
            batches, quarantine = read_bytes(tmp_path, data[:cut])
            assert [b.position for b in batches] == [b.position for b in original if b.position < start]
            assert len(quarantine) == 1
            entry = quarantine[0]
            assert entry["error_code"] == "truncated_batch"
            assert (entry["position"], entry["skipped_bytes"]) == (start, cut - start)
            if cut - start >= 17:
                assert entry["base_offset"] == struct.unpack_from(">q", data, start)[0]
            assert str(tmp_path) in entry["message"] and f"byte {start}" in entry["message"]


@pytest.mark.parametrize("field_offset", [8, 11, 16, 17, 21, 23, 40, 57, 60, 61])
def test_a_bit_flip_in_a_header_costs_at_most_that_batch(segment, tmp_path, field_offset):
    case, data, original = segment
    for start, end in batch_extents(data):
        target = start + field_offset
        if target >= end:
            continue
        for bit in (0, 7):
            corrupted = bytearray(data)
            corrupted[target] ^= 1 << bit
            batches, quarantine = read_bytes(tmp_path, bytes(corrupted))
            assert_bytes_are_accounted_for(batches, quarantine, len(data))
            assert_untouched_batches_are_read(original, batches, {target})
            assert len(batches) + len(quarantine) == len(original)


def test_a_bit_flip_in_a_payload_quarantines_that_batch_as_crc_mismatch(segment, tmp_path):
    case, data, original = segment
    for start, end in batch_extents(data):
        target = end - 1 - (end - start) // 3
        corrupted = bytearray(data)
        corrupted[target] ^= 0x10
        batches, quarantine = read_bytes(tmp_path, bytes(corrupted))
        assert [q["error_code"] for q in quarantine] == ["crc_mismatch"]
        assert (quarantine[0]["position"], quarantine[0]["skipped_bytes"]) == (start, end - start)
        assert_untouched_batches_are_read(original, batches, {target})
        assert len(batches) == len(original) - 1


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case_index=st.integers(0, len(SEGMENT_CASES) - 1),
       flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), max_size=6),
       cut=st.one_of(st.none(), st.floats(0, 1)),
       garbage=st.one_of(st.none(), st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=80))))
def test_random_corruption_never_raises_and_loses_no_untouched_batch(tmp_path, case_index, flips, cut, garbage):
    case = SEGMENT_CASES[case_index]
    data = bytearray(case.log.read_bytes())
    original = list(iter_batches(case.log))
    touched = set()
    for where, mask in flips:
        index = int(where * len(data))
        data[index] ^= mask
        touched.add(index)
    if garbage is not None:
        where, junk = garbage
        index = int(where * len(data))
        data[index:index] = junk
        touched |= set(range(index, len(data) + 1))  # everything after moves
    if cut is not None:
        data = data[:int(cut * len(data))]
        touched |= set(range(len(data), len(data) + 1))
        original = [b for b in original if b.position + b.size <= len(data)]
    batches, quarantine = read_bytes(tmp_path, bytes(data))
    assert_bytes_are_accounted_for(batches, quarantine, len(data))
    assert_untouched_batches_are_read(original, batches, touched)


def v2_with_payload(payload: bytes, codec: int, count: int = 1) -> bytes:
    """A magic-2 batch header with an arbitrary (possibly bad) payload and a correct CRC32C."""
    after_crc = struct.pack(">hiqqqhii", codec, count - 1, 1, 1, -1, -1, 0, count) + payload
    return struct.pack(">qiib", 0, 9 + len(after_crc), 0, 2) + struct.pack(">I", crc32c(after_crc)) + after_crc


def good_batch(base_offset: int) -> bytes:
    return encode_batch([(b"k", b"v")], base_offset, 1754000000000)


@pytest.mark.parametrize("codec, payload, code", [
    (1, b"\x1f\x8b\x08\x00 not really gzip", "decompression_failed"),
    (3, b"\x04\x22\x4d\x18 not lz4", "decompression_failed"),
    (4, b"\x28\xb5\x2f\xfd not zstd", "decompression_failed"),
    (2, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09garbage!!", "decompression_failed"),
    (5, b"", "unknown_compression"),
    (0, b"\x02\x00", "bad_record"),
])
def test_a_batch_with_a_good_crc_but_unreadable_payload_is_quarantined(tmp_path, codec, payload, code):
    data = good_batch(0) + v2_with_payload(payload, codec) + good_batch(2)
    batches, quarantine = read_bytes(tmp_path, data)
    assert [b.base_offset for b in batches] == [0, 2]
    assert [q["error_code"] for q in quarantine] == [code]
    assert quarantine[0]["skipped_bytes"] == len(data) - 2 * len(good_batch(0))


def test_unknown_magic_resyncs_at_the_next_batch(tmp_path):
    bad = bytearray(good_batch(1))
    bad[16] = 7
    batches, quarantine = read_bytes(tmp_path, good_batch(0) + bytes(bad) + good_batch(2))
    assert [b.base_offset for b in batches] == [0, 2]
    assert [q["error_code"] for q in quarantine] == ["unknown_magic"]
    assert quarantine[0]["base_offset"] == 1


def test_preallocated_zero_tail_is_one_quarantine_entry(tmp_path):
    batches, quarantine = read_bytes(tmp_path, good_batch(0) + b"\x00" * 4096)
    assert [b.base_offset for b in batches] == [0]
    assert [(q["error_code"], q["skipped_bytes"]) for q in quarantine] == [("bad_length", 4096)]


def test_quarantine_can_be_a_callback(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(good_batch(0) + good_batch(1)[:20])
    seen = []
    records = list(read_segment(path, quarantine=seen.append))
    assert [r["offset"] for r in records] == [0]
    assert [q["error_code"] for q in seen] == ["truncated_batch"]


def legacy_message(offset: int, magic: int, attributes: int, key, value, timestamp: int = -1) -> bytes:
    """A LegacyRecord with its log header (offset, size), CRC32 from the magic byte on."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def test_magic0_lz4_with_kafkas_broken_header_checksum_is_read(tmp_path):
    inner = legacy_message(5, 0, 0, b"a", b"1") + legacy_message(6, 0, 0, b"b", None)
    frame = bytearray(compress(3, inner))
    frame[6] = (xxhash.xxh32_intdigest(bytes(frame[:6])) >> 8) & 0xFF  # checksum over magic + descriptor
    batches, quarantine = read_bytes(tmp_path, legacy_message(6, 0, 3, None, bytes(frame)))
    assert quarantine == []
    assert [(r[0], r[2], r[3]) for r in batches[0].records] == [(5, b"a", b"1"), (6, b"b", None)]
    assert (batches[0].base_offset, batches[0].last_offset, batches[0].compression) == (5, 6, "lz4")


def test_magic1_wrapper_inner_offsets_are_relative_and_log_append_time_wins(tmp_path):
    inner = (legacy_message(0, 1, 0, b"a", b"1", timestamp=10) + legacy_message(1, 1, 0, b"b", b"2", timestamp=11)
             + legacy_message(2, 1, 0, b"c", b"3", timestamp=12))
    create = legacy_message(41, 1, 1, None, compress(1, inner), timestamp=99)
    append = legacy_message(44, 1, 1 | 0x08, None, compress(1, inner), timestamp=99)
    batches, quarantine = read_bytes(tmp_path, create + append)
    assert quarantine == []
    assert [(r[0], r[1]) for r in batches[0].records] == [(39, 10), (40, 11), (41, 12)]
    assert [(r[0], r[1]) for r in batches[1].records] == [(42, 99), (43, 99), (44, 99)]
    assert (batches[1].timestamp_type, batches[0].timestamp_type) == ("LogAppendTime", "CreateTime")


def _zigzag_varint(value: int) -> bytes:
    raw, out = (value << 1) ^ (value >> 127), bytearray()
    while raw >= 0x80:
        out.append(raw & 0x7F | 0x80)
        raw >>= 7
    return bytes(out + bytes([raw]))


@pytest.mark.parametrize("base_offset, offset_delta, last_offset_delta", [
    ((1 << 62), (1 << 62), 0),  # the record's offset is 2^63
    ((1 << 63) - 1, 0, 1),  # the header's last offset is 2^63
])
def test_offsets_beyond_a_long_are_a_bad_record_not_a_crash(tmp_path, base_offset, offset_delta, last_offset_delta):
    """A batch whose CRC is right but whose offsets cannot be a Java long: quarantined as bad_record (before, the
    read accepted it and the Arrow conversion of the offset column raised)."""
    from offsets_audit.sources.segments_spark import read_arrow

    body = b"\x00" + _zigzag_varint(0) + _zigzag_varint(offset_delta) + _zigzag_varint(1) + b"k" \
        + _zigzag_varint(1) + b"v" + _zigzag_varint(0)
    after_crc = struct.pack(">hiqqqhii", 0, last_offset_delta, 1, 1, -1, -1, 0, 1) + _zigzag_varint(len(body)) + body
    batch = struct.pack(">qiib", base_offset, 9 + len(after_crc), 0, 2) + struct.pack(">I", crc32c(after_crc)) + after_crc
    batches, quarantine = read_bytes(tmp_path, batch + encode_batch([(b"k", b"v")], 0, 1754000000000))
    assert [q["error_code"] for q in quarantine] == ["bad_record"] and "beyond a long" in quarantine[0]["message"]
    assert [b.base_offset for b in batches] == [0]
    rows = [row for b in read_arrow(str(tmp_path / "00000000000000000000.log"), 0) for row in b.to_pylist()]
    assert sorted(str(r["read_error_code"]) for r in rows) == ["None", "bad_record"]
