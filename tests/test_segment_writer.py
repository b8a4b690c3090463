"""Segment writer: batches Kafka's reader (and ours) read back exactly; byte-identical to Kafka when uncompressed."""

from __future__ import annotations

import itertools
import struct

import pytest

from offsets_audit.sources.segment_writer import (
    SegmentWriter, encode_batch, encode_control_batch, segment_path,
)
from offsets_audit.sources.segments import read_segment
from segments_golden import collected_cases

CASES = collected_cases()
V2_CASES = [c for c in CASES if not c.name.startswith("legacy")]


def golden_batches(case):
    """The golden records grouped into their batches, in log order."""
    return [list(group) for _, group in
            itertools.groupby(case.expected_records(), key=lambda r: (r["batch_base_offset"], r["batch_last_offset"]))]


def rewrite(case, batches) -> bytes:
    """Encode the golden batches again with our writer (magic 2, same codec and producer fields)."""
    out = []
    for batch in batches:
        first = batch[0]
        if first["is_control"]:
            out.append(encode_control_batch(first["control_type"], first["offset"], first["producer_id"],
                                            first["producer_epoch"], first["coordinator_epoch"], first["timestamp"],
                                            partition_leader_epoch=first["partition_leader_epoch"]))
        else:
            out.append(encode_batch(
                [(r["key"], r["value"]) for r in batch], first["batch_base_offset"],
                [r["timestamp"] for r in batch], first["compression"], first["producer_id"], first["producer_epoch"],
                first["is_transactional"], max(first["base_sequence"], 0), first["partition_leader_epoch"]))
    return b"".join(out)


@pytest.mark.parametrize("case", V2_CASES, ids=[c.name for c in V2_CASES])
def test_rewritten_golden_segment_reads_back_equal(case, tmp_path):
    target = tmp_path / "00000000000000000000.log"
    target.write_bytes(rewrite(case, golden_batches(case)))
    records = [dict(r, headers=None) for r in read_segment(target, partition=case.partition)]
    for record in records:
        record.pop("headers")
    assert records == case.expected_records()


@pytest.mark.parametrize("case", [c for c in V2_CASES if c.name.startswith(("v2-none", "history"))],
                         ids=lambda c: c.name)
def test_uncompressed_batches_are_byte_identical_to_kafkas(case):
    """MemoryRecordsBuilder output for the coordinator's settings is reproduced byte for byte."""
    golden_bytes = case.log.read_bytes()
    ours = rewrite(case, golden_batches(case))
    compressed = {r["compression"] for r in case.expected_records()} - {"none"}
    if compressed:
        pytest.skip(f"{case.name} has {sorted(compressed)} batches")
    assert ours == golden_bytes


def test_compressed_batches_match_kafkas_bytes_except_snappy():
    """gzip, lz4 and zstd batches are byte-identical to Kafka's; snappy's compressor (Rust snap vs snappy-java)
    chooses other matches, so there only the decompressed record bytes are compared."""
    from offsets_audit.sources.compression import decompress

    for case in [c for c in V2_CASES if c.log.parent.name == "segments"]:
        golden_bytes = case.log.read_bytes()
        ours = rewrite(case, golden_batches(case))
        for theirs_batch, our_batch in zip(split_batches(golden_bytes), split_batches(ours), strict=True):
            codec = theirs_batch[22] & 0x07
            if codec == 2:
                assert decompress(codec, our_batch[61:]) == decompress(codec, theirs_batch[61:])
            else:
                assert our_batch == theirs_batch, case.name


def split_batches(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        out.append(data[pos:pos + 12 + length])
        pos += 12 + length
    return out


def test_legacy_segment_records_survive_a_rewrite_as_magic_2(tmp_path):
    case = next(c for c in CASES if c.name.startswith("legacy"))
    target = tmp_path / "00000000000000000000.log"
    target.write_bytes(rewrite(case, golden_batches(case)))
    keep = ("offset", "timestamp", "key", "value", "batch_base_offset", "batch_last_offset", "compression")
    ours = [{k: r[k] for k in keep} for r in read_segment(target, partition=case.partition)]
    assert ours == [{k: r[k] for k in keep} for r in case.expected_records()]


def test_writer_assigns_offsets_and_names_the_file_like_a_broker(tmp_path):
    with SegmentWriter.create(tmp_path, partition=7, base_offset=100, partition_leader_epoch=5) as writer:
        assert writer.append_batch([(b"k1", b"v1"), (b"k2", None)], timestamp=1754000000000) == (100, 101)
        assert writer.append_batch([(b"k3", b"v3")], timestamp=1754000000100, compression="zstd",
                                   producer_id=4000, producer_epoch=2, transactional=True) == (102, 102)
        assert writer.append_control("COMMIT", 4000, 2, 9, 1754000000200) == 103
        assert writer.next_offset == 104
    path = segment_path(tmp_path, 7, 100)
    assert path == tmp_path / "__consumer_offsets-7" / "00000000000000000100.log"
    records = list(read_segment(path))
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [
        (100, b"k1", b"v1"), (101, b"k2", None), (102, b"k3", b"v3"), (103, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x09")]
    assert {r["partition"] for r in records} == {7}
    assert {r["partition_leader_epoch"] for r in records} == {5}
    assert records[2]["is_transactional"] and records[2]["producer_id"] == 4000 and records[2]["compression"] == "zstd"
    assert records[3]["is_control"] and records[3]["control_type"] == "COMMIT" and records[3]["coordinator_epoch"] == 9
    assert records[3]["base_sequence"] == -1 and records[0]["base_sequence"] == 0 and records[0]["producer_id"] == -1


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_large_batches_round_trip_in_every_codec(compression, tmp_path):
    """Payloads beyond one lz4 (64 KiB) / xerial (32 KiB) block, headers and per-record timestamps."""
    records = [(f"key-{i}".encode(), bytes(range(256)) * (i % 7) if i % 5 else None, [("h", b"x"), ("n", None)])
               for i in range(600)]
    timestamps = [1754000000000 + 3 * i for i in range(600)]
    target = tmp_path / "00000000000000000000.log"
    target.write_bytes(encode_batch(records, 0, timestamps, compression))
    got = list(read_segment(target))
    assert [(r["key"], r["value"], r["headers"], r["timestamp"]) for r in got] == [
        (k, v, h, t) for (k, v, h), t in zip(records, timestamps)]


def test_a_new_writer_replaces_the_file_and_append_continues_after_the_last_batch(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    with SegmentWriter(path) as writer:
        writer.append_batch([(b"a", b"1"), (b"b", b"2")], 1)
    with SegmentWriter(path, append=True) as writer:
        assert writer.next_offset == 2
        assert writer.append_batch([(b"c", b"3")], 2) == (2, 2)
    assert [r["offset"] for r in read_segment(path)] == [0, 1, 2]
    with SegmentWriter(path) as writer:
        writer.append_batch([(b"z", None)], 3)
    assert [(r["offset"], r["key"]) for r in read_segment(path)] == [(0, b"z")]
