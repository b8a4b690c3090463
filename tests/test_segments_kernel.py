"""The compiled segment walk (``sources._segments_kernel``) against the pure-Python walk it stands in for.

``read_arrow`` with and without the kernel must give the same rows, quarantine rows included: on every golden
segment, on damaged ones, and on batches whose CRC is right but whose records are anything (the kernel must
refuse exactly the batches ``_decode_v2`` refuses, and hand them to the Python walk)."""
from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings, strategies as st

from offsets_audit.sources import segments
from offsets_audit.sources.segment_writer import encode_batch, encode_control_batch
from offsets_audit.sources.segments_spark import read_arrow, source_arrow_schema
from segments_golden import collected_cases

SEGMENT_CASES = collected_cases()

pytestmark = pytest.mark.skipif(segments._KERNEL is None, reason="the segment kernel is not built (no C compiler)")


def both_ways(path, **kwargs) -> tuple[pa.Table, pa.Table]:
    """The rows read with every kernel run as its own Arrow batch, and without the kernel."""
    schema = source_arrow_schema()
    fast = pa.Table.from_batches(list(read_arrow(str(path), 3, kernel=True, short_run=0, **kwargs)), schema=schema)
    slow = pa.Table.from_batches(list(read_arrow(str(path), 3, kernel=False, **kwargs)), schema=schema)
    return fast, slow


def assert_same_rows(path, **kwargs) -> pa.Table:
    """The kernel's runs, as Arrow batches of their own and joined to the rows around them (short runs), read
    as the Python walk reads the same batches."""
    fast, slow = both_ways(path, **kwargs)
    joined = pa.Table.from_batches(list(read_arrow(str(path), 3, kernel=True, short_run=1 << 30, **kwargs)),
                                   schema=source_arrow_schema())
    for name in slow.column_names:
        assert fast[name].equals(slow[name]), name
        assert joined[name].equals(slow[name]), name
    return fast


def used_the_kernel(path) -> bool:
    return any(isinstance(b, segments.BatchRun) for b in segments.iter_batch_runs(str(path), run_records=100))


@pytest.mark.parametrize("case", SEGMENT_CASES, ids=[c.log.name for c in SEGMENT_CASES])
def test_golden_segments_read_the_same_with_the_kernel(case):
    table = assert_same_rows(case.log)
    assert table.num_rows == len(case.expected_records())


def test_the_kernel_reads_plain_and_control_batches_and_leaves_compressed_ones(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(encode_batch([(b"k", b"v"), (b"k2", None)], 0, 1754000000000, producer_id=7, producer_epoch=2,
                                  transactional=True)
                     + encode_control_batch("COMMIT", 2, 7, 2, 11, 1754000000001)
                     + encode_batch([(b"k", b"v")], 3, 1754000000002, compression="gzip")
                     + encode_control_batch("ABORT", 4, 7, 2, 12, 1754000000003)
                     + encode_batch([(None, b"")], 5, 1754000000004))
    runs = [b for b in segments.iter_batch_runs(str(path), run_records=100)]
    assert [isinstance(b, segments.BatchRun) for b in runs] == [True, False, True]
    table = assert_same_rows(path)
    assert table.column("control_type").to_pylist() == [None, None, "COMMIT", None, "ABORT", None]
    assert table.column("coordinator_epoch").to_pylist() == [None, None, 11, None, 12, None]
    assert table.column("key").to_pylist()[-1] is None and table.column("value").to_pylist()[-1] == b""


@pytest.mark.parametrize("key, value", [
    (None, None), (b"\x00\x00", b""), (b"\xff\xff\x00\x01", struct.pack(">hi", 0, 9)),  # short, negative version
    (struct.pack(">hh", 0, 42), b""), (struct.pack(">hh", 0, -3), b""),  # unknown type ids
    (struct.pack(">hh", 0, 1), b"\x00\x00\x00"),  # a COMMIT whose value is too short for the epoch
    (struct.pack(">hh", 3, 0) + b"tail", struct.pack(">hi", 1, -5) + b"more"),  # longer than needed
    (struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 3)),  # LEADER_CHANGE: no coordinator epoch
])
def test_odd_control_records_read_as_the_python_walk_reads_them(tmp_path, key, value):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(encode_batch([(key, value)], 0, 1754000000000, producer_id=1, transactional=True,
                                  is_control=True))
    assert used_the_kernel(path)
    assert_same_rows(path)


def raw_batch(payload: bytes, count: int, attributes: int = 0, base_offset: int = 0, last_delta: int = 0,
              timestamps: tuple[int, int] = (1, 1)) -> bytes:
    """A magic-2 batch with an arbitrary record payload and a right CRC32C: only the records can be wrong."""
    after_crc = struct.pack(">hiqqqhii", attributes, last_delta, timestamps[0], timestamps[1], 5, 1, 0, count) + payload
    return struct.pack(">qiib", base_offset, 9 + len(after_crc), 0, 2) + struct.pack(">I", crc32c(after_crc)) + after_crc


def varint(value: int, extra: int = 0) -> bytes:
    """Zig-zag varint of ``value``, padded with ``extra`` redundant continuation bytes (still parses)."""
    raw = (value << 1) ^ (value >> 63) if value >= 0 else ((-value - 1) << 1) | 1
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw or extra > 0:
            out.append(byte | 0x80)
            if not raw:
                extra -= 1
                if extra == 0:
                    out.append(0)
                    break
        else:
            out.append(byte)
            break
    return bytes(out)


records = st.lists(st.tuples(
    st.integers(-3, 3) | st.integers(-(1 << 40), 1 << 40),  # timestamp delta
    st.integers(-2, 5) | st.integers(-(1 << 62), 1 << 62),  # offset delta
    st.none() | st.binary(max_size=6), st.none() | st.binary(max_size=6),
    st.sampled_from([0, 0, 0, 1, 2]),  # header count
    st.sampled_from([b"", b"\x02h\x01", b"\x02h\x02z", b"\x01"]),  # each header's bytes: none, good, bad key
    st.sampled_from([0, 0, 0, 1, 4, 8]),  # redundant varint bytes
    st.sampled_from([0, 0, 0, 0, -1, 1, -2]),  # record length error
), max_size=4)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=records, count_error=st.sampled_from([0, 0, 0, -1, 1]), attributes=st.sampled_from([0, 0x08, 0x10, 0x20, 0x30]),
       base_offset=st.integers(0, 3) | st.integers(1 << 62, (1 << 63) - 1), junk=st.just(b"") | st.binary(max_size=3),
       timestamps=st.tuples(st.integers(-2, 2) | st.integers(1 << 62, (1 << 63) - 1), st.integers(-1, 5)))
def test_records_of_any_shape_behind_a_right_crc_read_as_the_python_walk_reads_them(
        tmp_path, batch, count_error, attributes, base_offset, junk, timestamps):
    payload = bytearray()
    for ts_delta, offset_delta, key, value, headers, header_bytes, extra, length_error in batch:
        body = b"\x00" + varint(ts_delta, extra) + varint(offset_delta) + (
            varint(-1) if key is None else varint(len(key), extra) + key) + (
            varint(-1) if value is None else varint(len(value)) + value) + varint(headers) + header_bytes * headers
        payload += varint(len(body) + length_error, extra) + body
    payload += junk
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(encode_batch([(b"k", b"v")], 0, 1754000000000) + raw_batch(
        bytes(payload), len(batch) + count_error, attributes, base_offset, max(len(batch) - 1, 0), timestamps)
        + encode_batch([(b"k", b"v")], (1 << 63) - 2 if base_offset > 3 else 10, 1754000000000))
    assert_same_rows(path)


#: A golden segment damaged: which one, bytes flipped (where, mask) and where it is cut (``damaged_segment``).
DAMAGE = {"case_index": st.integers(0, len(SEGMENT_CASES) - 1),
          "flips": st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), max_size=4),
          "cut": st.one_of(st.none(), st.floats(0, 1))}


def damaged_segment(tmp_path, case_index: int, flips: list, cut: float | None):
    """A golden segment with ``flips`` applied and cut at ``cut`` of its length, written under ``tmp_path``."""
    data = bytearray(SEGMENT_CASES[case_index].log.read_bytes())
    for where, mask in flips:
        data[int(where * len(data))] ^= mask
    if cut is not None:
        data = data[:int(cut * len(data))]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(bytes(data))
    return path


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**DAMAGE, rows=st.sampled_from([1, 3, 10_000]))
def test_damaged_golden_segments_read_the_same_with_the_kernel(tmp_path, case_index, flips, cut, rows):
    assert_same_rows(damaged_segment(tmp_path, case_index, flips, cut), rows_per_batch=rows)


def test_ranges_and_bounds_read_the_same_with_the_kernel(tmp_path):
    """A range of a split file, a segment whose name states a base offset above some batches, and a next
    segment's base offset below the last batches: the kernel leaves the batches out of bounds to the walk."""
    data = b"".join(encode_batch([(b"k%d" % i, b"v")], 10 * i, 1754000000000 + i) for i in range(8))
    path = tmp_path / "00000000000000000020.log"
    path.write_bytes(data)
    ends = [end for end in segments.complete_batch_ends(open(path, "rb"), 0, len(data))]
    assert_same_rows(path)
    assert_same_rows(path, start=ends[2], end=ends[5], previous_batch=ends[1])
    assert_same_rows(path, next_base_offset=45)
    swapped = tmp_path / "00000000000000000000.log"  # two neighbours out of offset order: read, counted once
    batches = [encode_batch([(b"k", b"v")], offset, 1754000000000) for offset in (0, 2, 1, 3)]
    swapped.write_bytes(b"".join(batches))
    assert assert_same_rows(swapped).column("offset").to_pylist() == [0, 2, 1, 3]


@pytest.mark.parametrize("headers", [b"\x02", b"\x02\x02h", b"\x02\x02h\x01", b"\x04\x02h\x01"])
def test_records_with_headers_are_left_to_the_python_walk(tmp_path, headers):
    """A header count (with or without the headers it announces) is the Python walk's to parse or refuse."""
    body = b"\x00" + varint(0) + varint(0) + varint(1) + b"k" + varint(1) + b"v" + headers
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(raw_batch(varint(len(body)) + body, 1) + encode_batch([(b"k", b"v")], 1, 1754000000000))
    assert_same_rows(path)


def test_bounds_beyond_a_long_leave_the_walk_to_python():
    """The offset after a batch that ends at the largest long is 2^63: the kernel reads nothing then."""
    data = encode_batch([(b"k", b"v")], 0, 1754000000000)
    assert segments._KERNEL.walk_v2(data, 0, len(data), None, None, None, 100) is not None
    for bounds in ([1 << 63, None, None], [None, -(1 << 63) - 1, None], [None, None, 1 << 64]):
        assert segments._KERNEL.walk_v2(data, 0, len(data), *bounds, 100) is None


def test_the_kernels_crc32c_is_castagnolis():
    for data in (b"", b"a", b"123456789", bytes(range(256)) * 3):
        assert segments._KERNEL.crc32c(data) == crc32c(data)


def test_short_runs_between_compressed_batches_join_one_arrow_batch(tmp_path):
    """Where plain and compressed batches alternate, every kernel run is one Kafka batch: the runs join the rows
    around them, so the read makes Arrow batches of ``rows_per_batch`` rows, not two per pair of Kafka batches."""
    path = tmp_path / "00000000000000000000.log"
    data, offset = b"", 0
    for i in range(200):
        records = [(f"k{i}-{j}".encode(), f"v{i}-{j}".encode()) for j in range(3)]
        data += encode_batch(records, offset, 1754000000000 + i, compression="gzip" if i % 2 else "none")
        offset += len(records)
    path.write_bytes(data)
    assert used_the_kernel(path)
    assert_same_rows(path)
    batches = list(read_arrow(str(path), 3, rows_per_batch=250))
    assert [b.num_rows for b in batches] == [252, 252, 96]


def assert_same_header_walk(path, max_bytes: int) -> None:
    """``plan_ranges``' header walk by the kernel as the Python walk does it: cuts and last batches."""
    import os

    size = os.path.getsize(path)
    if size == 0:
        return
    with open(path, "rb") as handle:
        assert segments._header_walk(handle, size, max_bytes) == segments._header_walk(handle, size, max_bytes,
                                                                                       kernel=False)


@pytest.mark.parametrize("max_bytes", [1, 100, 5000, 1 << 30])
@pytest.mark.parametrize("chunk", [17, 200, 4096, 1 << 20])
def test_the_kernel_plans_ranges_as_the_python_walk(tmp_path, monkeypatch, max_bytes, chunk):
    """Every golden segment whole, cut short, with garbage after its batches and with a header of an unknown magic
    or a length below its magic's minimum in the middle, read by the kernel in chunks of a header, of a few batches
    (batches across chunks, batches longer than a chunk) or whole: the same cuts and the same last batches."""
    monkeypatch.setattr(segments, "_KERNEL_CHUNK", chunk)
    for case in SEGMENT_CASES:
        data = case.log.read_bytes()
        ends = list(segments.complete_batch_ends(open(case.log, "rb"), 0, len(data)))
        middle = ends[len(ends) // 2 - 1] if len(ends) > 1 else 0
        bad_magic = bytearray(data)
        bad_length = bytearray(data)
        if middle + 17 <= len(data):
            bad_magic[middle + 16] = 3
            bad_length[middle + 8:middle + 12] = struct.pack(">i", 13)
        for name, content in (("whole", data), ("cut", data[:len(data) * 2 // 3]), ("garbage", data + b"\x07" * 40),
                              ("magic", bytes(bad_magic)), ("length", bytes(bad_length))):
            path = tmp_path / f"{name}.log"
            path.write_bytes(content)
            assert_same_header_walk(path, max_bytes)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**DAMAGE, max_bytes=st.sampled_from([1, 64, 700, 1 << 20]), chunk=st.sampled_from([17, 300, 1 << 20]))
def test_damaged_golden_segments_plan_the_same_with_the_kernel(tmp_path, case_index, flips, cut, max_bytes, chunk):
    path = damaged_segment(tmp_path, case_index, flips, cut)
    segments._KERNEL_CHUNK, saved = chunk, segments._KERNEL_CHUNK  # hypothesis: no function-scoped monkeypatch
    try:
        assert_same_header_walk(path, max_bytes)
    finally:
        segments._KERNEL_CHUNK = saved
