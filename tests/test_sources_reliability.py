"""Inputs that cannot crash or double, losses counted by offsets, config checked first.

Each test reproduces one input defect on a small simulated history (real segment files and a real
Parquet dump written by the simulator), then checks the fixed behaviour.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from offsets_audit.cli import main
from offsets_audit.config import documented_choices, load_settings
from offsets_audit.errors import UserError
from offsets_audit.sources import check_options, preflight
from offsets_audit.sources.parquet import check_parquet_files
from offsets_audit.sources.segments import (
    RAW_BYTES_CAP, iter_batches, list_segments, read_segment, scan_segments,
)
from offsets_audit.sources.segments_spark import plan, read_arrow
from segments_golden import batch_extents


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    from offsets_audit.simulate import simulate

    out = tmp_path_factory.mktemp("history")
    simulate(out, groups=4, hours=0.1, partitions=3, segment_bytes=64 * 1024, seed=13)
    return out


def copy_segments(history: Path, tmp_path: Path) -> Path:
    target = tmp_path / "segments"
    shutil.copytree(history / "segments", target)
    return target


def offsets_on_disk(root: Path) -> set[tuple[int, int]]:
    return {(r["partition"], r["offset"]) for path, p in list_segments(root) for r in read_segment(path, p)}


# -- defect 3: only Kafka's segment names; overlaps refused ---------------------------------------------------

def test_a_backup_copy_and_a_notes_file_are_skipped_and_named(history, tmp_path):
    root = copy_segments(history, tmp_path)
    folder = root / "__consumer_offsets-1"
    first = sorted(folder.glob("*.log"))[0]
    shutil.copy(first, folder / "backup-of-segment.log")
    (folder / "notes.log").write_text("rotated by hand on tuesday\n")
    before = offsets_on_disk(history / "segments")
    scan = scan_segments(root)
    assert {Path(p).name for p, _ in scan.skipped} == {"backup-of-segment.log", "notes.log"}
    assert all("20-digit" in why for _, why in scan.skipped)
    assert offsets_on_disk(root) == before
    report: dict = {}
    from offsets_audit.sources import _plan_segments

    _plan_segments(str(root), {}, report)
    assert len(report["skipped_files"]) == 2 and "segmentNames: any" in report["notes"][0]
    assert len(scan_segments(root, names="any").files) == len(scan.files) + 2


def test_two_copies_of_a_partition_are_refused_naming_both_files(history, tmp_path):
    for broker in ("broker-1", "broker-2"):
        shutil.copytree(history / "segments" / "__consumer_offsets-0", tmp_path / broker / "__consumer_offsets-0")
    with pytest.raises(UserError) as error:
        plan(str(tmp_path))
    message = str(error.value)
    assert "broker-1" in message and "broker-2" in message and "read twice" in message
    assert "\n" not in message


def test_a_segment_overlapping_the_next_one_is_refused(history, tmp_path):
    folder = tmp_path / "__consumer_offsets-1"
    folder.mkdir()
    files = sorted((history / "segments" / "__consumer_offsets-1").glob("*.log"))
    shutil.copy(files[0], folder / files[0].name)
    # the first segment again, named as if it started one offset later
    shutil.copy(files[0], folder / f"{1:020d}.log")
    with pytest.raises(UserError, match="are in both"):
        plan(str(tmp_path))


# -- defect 4: a single segment file ---------------------------------------------------------------------------

def test_a_single_file_takes_its_partition_from_its_folder_or_the_option_or_zero(history, tmp_path):
    inside = sorted((history / "segments" / "__consumer_offsets-1").glob("*.log"))[0]
    ranges, scan = plan(str(inside))
    assert {r.partition for r in ranges} == {1} and not scan.notes
    ranges, _ = plan(str(inside), partition=7)
    assert {r.partition for r in ranges} == {7}
    alone = tmp_path / "copy.log"
    shutil.copy(inside, alone)
    ranges, scan = plan(str(alone))
    assert {r.partition for r in ranges} == {0}
    assert "source.options.partition" in scan.notes[0]
    rows = [row for r in ranges for b in read_arrow(r.path, r.partition) for row in b.to_pylist()]
    assert rows and {row["partition"] for row in rows} == {0}


# -- defect 6: losses counted by offsets ------------------------------------------------------------------------

def read_with_losses(path, **kwargs):
    quarantine: list = []
    offsets = [r["offset"] for r in read_segment(path, quarantine=quarantine, **kwargs)]
    return offsets, quarantine


def test_a_zeroed_block_loses_the_offsets_up_to_the_next_good_batch(history, tmp_path):
    source = sorted((history / "segments" / "__consumer_offsets-1").glob("*.log"))[0]
    data = bytearray(source.read_bytes())
    clean = [r["offset"] for r in read_segment(source)]
    extents = batch_extents(bytes(data))
    start = extents[3][0] + 5
    data[start:start + 4096] = bytes(4096)
    damaged = tmp_path / source.name
    damaged.write_bytes(bytes(data))
    offsets, quarantine = read_with_losses(damaged)
    lost = sum(q["records_lost"] for q in quarantine)
    assert len(offsets) + lost == len(clean)
    first = quarantine[0]
    missing = sorted(set(clean) - set(offsets))
    assert (first["lost_from"], first["lost_to"]) == (missing[0], missing[-1])
    assert f"offsets {missing[0]}-{missing[-1]}" in first["message"] and "fix:" in first["message"]
    assert first["raw_bytes"] == bytes(data[first["position"]:first["position"] + min(first["skipped_bytes"],
                                                                                    RAW_BYTES_CAP)])


def test_a_damaged_tail_of_a_rolled_segment_is_counted_up_to_the_next_segment(history, tmp_path):
    files = sorted((history / "segments" / "__consumer_offsets-1").glob("*.log"))
    folder = tmp_path / "__consumer_offsets-1"
    shutil.copytree(files[0].parent, folder)
    data = files[0].read_bytes()
    cut = batch_extents(data)[-3][0] + 3  # three batches from the end, inside a header: nothing says its offsets
    (folder / files[0].name).write_bytes(data[:cut])
    ranges, _ = plan(str(folder))
    first = [r for r in ranges if r.path.endswith(files[0].name)][0]
    assert first.next_base_offset == int(files[1].name[:20])
    offsets, quarantine = read_with_losses(first.path, next_base_offset=first.next_base_offset)
    assert len(offsets) + sum(q["records_lost"] for q in quarantine) == len(list(read_segment(files[0])))
    assert quarantine[0]["lost_to"] == first.next_base_offset - 1


def test_split_ranges_count_a_loss_once(history, tmp_path):
    source = sorted((history / "segments" / "__consumer_offsets-1").glob("*.log"))[0]
    data = bytearray(source.read_bytes())
    extents = batch_extents(bytes(data))
    for index in (2, 3, 9):  # payload bytes: CRC mismatches with trustworthy lengths, one at a range boundary
        data[extents[index][1] - 2] ^= 0x40
    damaged = tmp_path / source.name
    damaged.write_bytes(bytes(data))
    whole_offsets, whole = read_with_losses(damaged)
    total = len(list(read_segment(source)))
    assert len(whole_offsets) + sum(q["records_lost"] for q in whole) == total
    for max_bytes in (300, 1000, 5000):
        ranges, _ = plan(str(damaged), max_bytes=max_bytes)
        read = lost = 0
        for r in ranges:
            quarantine: list = []
            read += sum(len(b.records) for b in iter_batches(r.path, quarantine, r.start, r.end,
                                                              previous_batch=r.previous_batch))
            lost += sum(q["records_lost"] for q in quarantine)
        assert read + lost == total, max_bytes


def test_a_truncated_last_segment_counts_what_its_header_claims(history, tmp_path):
    source = sorted((history / "segments" / "__consumer_offsets-0").glob("*.log"))[-1]
    data = source.read_bytes()
    start, end = batch_extents(data)[-1]
    damaged = tmp_path / source.name
    damaged.write_bytes(data[:start + 70])
    offsets, quarantine = read_with_losses(damaged)
    assert len(offsets) + quarantine[0]["records_lost"] == len(list(read_segment(source)))
    assert "claim" in quarantine[0]["message"]
    damaged.write_bytes(data[:start + 10])  # too little left to say which offsets it held
    offsets, quarantine = read_with_losses(damaged)
    assert quarantine[0]["records_lost"] == 0 and "unknown" in quarantine[0]["message"]


# -- defect 2: a non-Parquet or damaged Parquet file ------------------------------------------------------------

def test_a_non_parquet_file_in_a_dump_is_one_line_naming_it(history, tmp_path):
    dump = tmp_path / "dump"
    shutil.copytree(history / "parquet", dump)
    assert check_parquet_files(str(dump)) == len(list(dump.rglob("*.parquet")))
    (dump / "partition=0" / "notes.txt").write_text("not parquet")
    with pytest.raises(UserError, match=r"notes\.txt .* is not a readable Parquet file") as error:
        preflight({"kind": "parquet", "path": str(dump)})
    assert "\n" not in str(error.value)
    (dump / "partition=0" / "notes.txt").unlink()
    part = dump / "partition=1" / "part-00000.parquet"
    part.write_bytes(part.read_bytes()[:-100])
    with pytest.raises(UserError, match="cut short"):
        check_parquet_files(str(dump))
    (dump / "_SUCCESS").write_bytes(b"")  # Spark's marker files are skipped, as Spark skips them


# -- defect 7: config checked before any Spark work ---------------------------------------------------------------

def write(tmp_path, text):
    path = tmp_path / "audit.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, expected", [
    ("rules:\n  rebalance_strom: {max_per_hour: 10}\n", "did you mean 'rules.rebalance_storm'"),
    ("rules:\n  rebalance_storm: {max_per_huor: 10}\n", "did you mean 'rules.rebalance_storm.max_per_hour'"),
    ("rules:\n  rebalance_storm: {severity: eror}\n", "did you mean 'error'"),
    ("source:\n  kind: segments\n  options: {partiton: 3}\n", "did you mean 'partition'"),
    ("source:\n  kind: segments\n  options: {segmentNames: all}\n", "use one of: kafka, any"),
    ("source:\n  kind: parquet\n  options: {mergeSchemas: true}\n", "did you mean 'mergeSchema'"),
    ("source:\n  kind: kafka\n  options: {kafka.security.protocol: SASL_PLAINTEX}\n", "did you mean 'SASL_PLAINTEXT'"),
    ("source:\n  kind: kafka\n  options: {kafka.bootstrap.server: 'b:9092'}\n", "did you mean 'kafka.bootstrap.servers'"),
    ("source:\n  kind: kafka\n  options: {startingOffset: earliest}\n", "did you mean 'startingOffsets'"),
    ("assignors:\n  what_if: [lagaware]\n", "did you mean 'lag_aware'"),
])
def test_config_mistakes_are_found_at_load_time(tmp_path, text, expected):
    with pytest.raises(UserError, match=expected.replace("(", r"\(").replace(".", r"\.")):
        load_settings(write(tmp_path, text))


def test_documented_keys_validate_without_code_changes():
    text = ("check:\n  fail_on: error\n  # a new setting\n  trust_after_gap: false\n"
            "  gap_policy: warn  # one of: warn, fail, ignore\n")
    assert documented_choices(text) == {"check.gap_policy": ("warn", "fail", "ignore")}
    defaults = load_settings()
    assert defaults.source.options == {}
    check_options("kafka", {"kafka.security.protocol": "sasl_ssl", "subscribe": "__consumer_offsets"})


def test_a_config_mistake_exits_2_before_spark_starts(tmp_path, capsys):
    code = main(["run", "--config", str(write(tmp_path, "rules:\n  rebalance_strom: {}\n")), "--input", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "rebalance_storm" in err[0]


def test_an_overlap_exits_2_before_spark_starts(history, tmp_path, capsys):
    for broker in ("broker-1", "broker-2"):
        shutil.copytree(history / "segments" / "__consumer_offsets-0", tmp_path / broker / "__consumer_offsets-0")
    code = main(["run", "--input", str(tmp_path), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "broker-1" in err[0] and "broker-2" in err[0]


# -- end to end: a single damaged segment file through `run` ------------------------------------------------------

@pytest.mark.spark
def test_run_on_a_single_damaged_segment_file_counts_its_losses(spark, history, tmp_path, capsys):
    import json

    source = sorted((history / "segments" / "__consumer_offsets-1").glob("*.log"))[0]
    data = bytearray(source.read_bytes())
    clean = len(list(read_segment(source)))
    start = batch_extents(bytes(data))[2][0] + 1
    data[start:start + 2048] = bytes(2048)
    damaged = tmp_path / "copy-of-a-segment.log"  # no <topic>-N folder, no Kafka name: given explicitly
    damaged.write_bytes(bytes(data))
    out = tmp_path / "out"
    code = main(["run", "--input", str(damaged), "--output", str(out), "--run-id", "r1"])
    printed = capsys.readouterr()
    assert code == 0, printed.err[-2000:]
    summary = json.loads((out / "summary" / "r1.json").read_text())
    records = summary["records"]
    assert records["read"] == records["decoded"] + records["quarantined"]
    assert records["records_lost"] > 0 and records["read"] + records["records_lost"] == clean
    assert "records lost" in printed.out and "source.options.partition" in printed.out
    quarantine = spark.read.parquet(str(out / "quarantine")).filter("read_error_code is not null").collect()
    assert sum(r.records_lost for r in quarantine) == records["records_lost"]
    assert all(r.raw_bytes and r.partition == 0 for r in quarantine)


def test_a_parquet_file_copied_inside_a_dump_is_refused_naming_both(history, tmp_path):
    dump = tmp_path / "dump"
    shutil.copytree(history / "parquet", dump)
    part = next(dump.rglob("*.parquet"))
    shutil.copy(part, part.with_name("part-00000-copy.parquet"))
    with pytest.raises(UserError, match="read twice") as error:
        check_parquet_files(str(dump))
    assert "part-00000-copy.parquet" in str(error.value) and part.name in str(error.value)


@pytest.mark.spark
def test_decode_counts_unreadable_stretches_and_records_lost_like_run(spark, history, tmp_path, capsys):
    root = copy_segments(history, tmp_path)
    clean = len(offsets_on_disk(root))
    segment = sorted((root / "__consumer_offsets-2").glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    start = batch_extents(bytes(data))[2][0] + 1
    data[start:start + 2048] = bytes(2048)
    segment.write_bytes(bytes(data))
    out = tmp_path / "out"
    code = main(["decode", "--input", str(root), "--input-format", "segments", "--output", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    numbers = {name: int(re.search(rf"^{name}: +(\d+)", printed, re.M).group(1))
               for name in ("rows read", "decoded", "quarantined", "unreadable")}
    read, decoded, quarantined = numbers["rows read"], numbers["decoded"], numbers["quarantined"]
    lost = int(re.search(r"records_lost (\d+)", printed).group(1))
    assert read == decoded + quarantined
    assert lost > 0 and read + lost == clean
    unreadable = spark.read.parquet(str(out / "quarantine")).filter("read_error_code is not null")
    assert unreadable.count() == int(numbers["unreadable"]) >= 1
    assert unreadable.agg({"records_lost": "sum"}).first()[0] == lost


# -- a Parquet file damaged behind an intact footer ------------------------------------------------------------

def damage_a_data_page(dump: Path) -> Path:
    """Zero 512 bytes inside the ``value`` column's first data page of one file; its footer stays intact."""
    import pyarrow.parquet as pq

    victim = sorted(dump.rglob("*.parquet"))[1]
    row_group = pq.ParquetFile(victim).metadata.row_group(0)
    value = next(row_group.column(i) for i in range(row_group.num_columns)
                 if row_group.column(i).path_in_schema == "value")
    data = bytearray(victim.read_bytes())
    start = value.data_page_offset + 40
    data[start:start + 512] = bytes(512)
    victim.write_bytes(bytes(data))
    pq.ParquetFile(victim).metadata  # noqa: B018 - the footer still parses
    return victim


@pytest.mark.parametrize("command", ["decode", "run"])
def test_a_parquet_file_damaged_behind_its_footer_is_one_line_naming_it_without_a_java_trace(history, tmp_path,
                                                                                             command):
    import subprocess
    import sys

    dump = tmp_path / "dump"
    shutil.copytree(history / "parquet", dump)
    victim = damage_a_data_page(dump)
    argv = [sys.executable, "-m", "offsets_audit.cli", command, "--input", str(dump), "--input-format", "parquet",
            "--output", str(tmp_path / "out")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert not [line for line in lines if "at org.apache" in line or "Traceback" in line]
    errors = [line for line in lines if line.startswith("offsets-audit: error")]
    assert len(errors) == 1 and str(victim) in errors[0] and "row group 1" in errors[0]
    assert "move it out of the dump folder" in errors[0]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_file_damaged_after_a_clean_check_is_checked_again(history, tmp_path):
    """Each file's row groups are read once per process (the preflight and the read share it), keyed by its size
    and modification time: a file rewritten since is read again."""
    import os

    dump = tmp_path / "dump"
    shutil.copytree(history / "parquet", dump)
    assert check_parquet_files(str(dump)) == len(list(dump.rglob("*.parquet")))
    victim = damage_a_data_page(dump)
    os.utime(victim, ns=(0, 0))  # a different modification time, whatever the clock's resolution
    with pytest.raises(UserError, match="row group 1 of 1"):
        check_parquet_files(str(dump))


def test_row_group_check_follows_verify_row_groups(history, tmp_path, monkeypatch, capsys):
    """``verifyRowGroups``: ``false`` checks footers only; ``auto`` reads row groups only up to the size limit and
    says on stderr when it did not (a second full read on the driver would not scale); ``true`` at any size."""
    from offsets_audit.sources import parquet as parquet_source
    from offsets_audit.sources import preflight

    dump = tmp_path / "dump"
    shutil.copytree(history / "parquet", dump)
    damage_a_data_page(dump)
    files = len(list(dump.rglob("*.parquet")))
    assert check_parquet_files(str(dump), row_groups=False) == files
    monkeypatch.setattr(parquet_source, "ROW_GROUP_CHECK_AUTO_MAX_BYTES", 1)
    assert check_parquet_files(str(dump)) == files
    assert "only footers are checked" in capsys.readouterr().err
    with pytest.raises(UserError, match="row group 1 of 1"):
        preflight({"kind": "parquet", "path": str(dump), "verifyRowGroups": "true"})
    with pytest.raises(UserError, match="verifyRowGroups"):
        preflight({"kind": "parquet", "path": str(dump), "verifyRowGroups": "sometimes"})


def test_preflight_says_how_many_bytes_the_read_takes(history, tmp_path):
    """``preflight`` returns the bytes of the planned segment ranges and of a local dump's files (what a local
    session is sized by, ``spark_session.get_spark``), and None for a live source."""
    from offsets_audit.sources.segments_spark import planned_bytes, plan

    segments = history / "segments"
    assert preflight({"kind": "segments", "path": str(segments)}) == planned_bytes(plan(str(segments))[0]) == sum(
        f.stat().st_size for f in segments.rglob("*.log"))
    dump = tmp_path / "dump"
    shutil.copytree(history / "parquet", dump)
    (dump / "_SUCCESS").write_text("")
    assert preflight({"kind": "parquet", "path": str(dump)}) == sum(
        f.stat().st_size for f in dump.rglob("*.parquet"))
    assert preflight({"kind": "kafka", "kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "__consumer_offsets"}) \
        is None
