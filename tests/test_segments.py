"""Broker log segment reader: golden segments read exactly as Kafka's FileRecords reads them."""

from __future__ import annotations

import shutil

import pytest

from offsets_audit.errors import UserError
from offsets_audit.sources.segments import (
    RECORD_FIELDS, batch_boundaries, iter_batches, list_segments, partition_of, read_segment,
)
from segments_golden import collected_cases

CASES = collected_cases()


def read_without_headers(path, **kwargs):
    records = []
    for record in read_segment(path, **kwargs):
        record.pop("headers")
        records.append(record)
    return records


def test_golden_cases_cover_segments_and_histories(golden):
    names = {case.name for case in CASES}
    assert len(list((golden / "segments").glob("*.log"))) == sum(1 for c in CASES if c.log.parent.name == "segments")
    assert len(list((golden / "histories").rglob("*.log"))) == len(CASES) - len(list((golden / "segments").glob("*.log")))
    assert "legacy-magic0-magic1-00000000000000000000.log" in names


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_golden_record_is_read_exactly(case):
    quarantine = []
    records = read_without_headers(case.log, partition=case.partition, quarantine=quarantine)
    assert quarantine == []
    assert records == case.expected_records()


def test_record_dicts_have_the_documented_keys():
    case = CASES[0]
    record = next(read_segment(case.log, partition=case.partition))
    assert tuple(record) == RECORD_FIELDS


def test_batches_account_for_the_manifest_counts(golden):
    import json

    for line in (golden / "segments" / "manifest.jsonl").read_text().splitlines():
        entry = json.loads(line)
        batches = list(iter_batches(golden / "segments" / entry["file"]))
        assert len(batches) == entry["batches"], entry["file"]
        assert sum(len(b.records) for b in batches) == entry["records"], entry["file"]
        assert sum(b.size for b in batches) == entry["bytes"], entry["file"]


def test_partition_comes_from_the_topic_partition_folder(tmp_path, golden):
    folder = tmp_path / "__consumer_offsets-17"
    folder.mkdir()
    target = folder / "00000000000000000000.log"
    shutil.copy(golden / "segments" / "v2-none-00000000000000000000.log", target)
    assert partition_of(target) == 17
    assert {r["partition"] for r in read_segment(target)} == {17}
    assert {r["partition"] for r in read_segment(target, partition=3)} == {3}


def test_partition_is_none_outside_a_topic_partition_folder(golden):
    path = golden / "segments" / "v2-none-00000000000000000000.log"
    assert partition_of(path) is None
    assert {r["partition"] for r in read_segment(path)} == {None}


def test_list_segments_ignores_index_and_checkpoint_files(tmp_path, golden):
    for partition in (0, 1):
        folder = tmp_path / f"__consumer_offsets-{partition}"
        folder.mkdir()
        shutil.copy(golden / "segments" / "v2-none-00000000000000000000.log", folder / "00000000000000000000.log")
        shutil.copy(golden / "segments" / "v2-gzip-00000000000000000000.log", folder / "00000000000000000035.log")
        for side in ("00000000000000000000.index", "00000000000000000000.timeindex", "00000000000000000000.txnindex",
                     "00000000000000000035.snapshot", "leader-epoch-checkpoint", "partition.metadata"):
            (folder / side).write_bytes(b"\x00" * 24)
    found = list_segments(tmp_path)
    assert [(p.split("/")[-2], p.split("/")[-1], part) for p, part in found] == [
        ("__consumer_offsets-0", "00000000000000000000.log", 0),
        ("__consumer_offsets-0", "00000000000000000035.log", 0),
        ("__consumer_offsets-1", "00000000000000000000.log", 1),
        ("__consumer_offsets-1", "00000000000000000035.log", 1),
    ]
    assert list_segments(tmp_path / "__consumer_offsets-1" / "00000000000000000000.log") == [
        (str(tmp_path / "__consumer_offsets-1" / "00000000000000000000.log"), 1)]


def test_a_missing_path_is_a_user_error_naming_it(tmp_path):
    missing = tmp_path / "no-such-dir"
    with pytest.raises(UserError, match="no-such-dir"):
        list_segments(missing)


def test_an_empty_segment_has_no_records(tmp_path):
    empty = tmp_path / "00000000000000000000.log"
    empty.write_bytes(b"")
    quarantine = []
    assert list(read_segment(empty, quarantine=quarantine)) == []
    assert quarantine == []


@pytest.mark.parametrize("max_bytes", [1, 1000, 5000, 1 << 30])
def test_reading_split_ranges_equals_reading_the_whole_file(max_bytes):
    for case in CASES[:7]:
        ranges = batch_boundaries(case.log, max_bytes)
        assert ranges[0][0] == 0 and ranges[-1][1] == case.log.stat().st_size
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        pieces = [r for start, end in ranges for r in read_segment(case.log, case.partition, start=start, end=end)]
        assert pieces == list(read_segment(case.log, case.partition))


def test_reading_a_missing_segment_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="missing.log"):
        list(read_segment(tmp_path / "missing.log"))


def test_list_segments_of_a_broker_log_dir_keeps_only_the_offsets_topic(tmp_path, golden):
    source = golden / "segments" / "v2-none-00000000000000000000.log"
    for folder in ("__consumer_offsets-3", "orders-0", "__cluster_metadata-0"):
        (tmp_path / folder).mkdir()
        shutil.copy(source, tmp_path / folder / "00000000000000000000.log")
    assert [part for _, part in list_segments(tmp_path)] == [3]
    assert len(list_segments(tmp_path, topic=None)) == 3
    assert len(list_segments(tmp_path / "orders-0")) == 1


@pytest.mark.parametrize("chunk", [17, 100, 4096, 1 << 20])
def test_batch_ends_walked_from_chunks_equal_one_header_at_a_time(monkeypatch, tmp_path, chunk):
    """``complete_batch_ends`` reads headers from chunks read ahead: the same ends as reading each header where it
    starts (``batch_end``), whatever the chunk size, on every golden segment whole, cut short, with garbage after
    its batches and from a batch boundary inside it."""
    import os

    from offsets_audit.sources import segments
    from offsets_audit.sources.segments import batch_end, complete_batch_ends

    def one_at_a_time(handle, start, end):
        pos, ends = start, []
        while pos < end:
            next_pos = batch_end(handle, pos, end)
            if next_pos <= pos:
                break
            pos = next_pos
            ends.append(pos)
        return ends

    monkeypatch.setattr(segments, "_WALK_CHUNK", chunk)
    for case in CASES:
        data = case.log.read_bytes()
        for name, content in (("whole", data), ("cut", data[:len(data) * 2 // 3]), ("garbage", data + b"\x07" * 40)):
            path = tmp_path / f"{name}.log"
            path.write_bytes(content)
            size = os.path.getsize(path)
            with open(path, "rb") as handle:
                expected = one_at_a_time(handle, 0, size)
                assert list(complete_batch_ends(handle, 0, size)) == expected, (case.log.name, name)
                if expected:
                    start = expected[len(expected) // 2 - 1] if len(expected) > 1 else 0
                    assert list(complete_batch_ends(handle, start, size)) == one_at_a_time(handle, start, size)
