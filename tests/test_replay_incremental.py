"""The incremental replay (Structured Streaming, state in a checkpoint) gives the batch replay's tables, also when
a run is killed mid-way and started again; the segments stream reader only ever reads complete batches."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
TABLES = ("group_state", "members", "group_events", "target_assignments", "offsets")
#: About half of the simulated log per micro-batch, so transactions straddle micro-batches.
MAX_BYTES_PER_TRIGGER = 320_000


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> Path:
    from offsets_audit.simulate import simulate

    out = tmp_path_factory.mktemp("incremental-sim")
    # seed 7: consumer, classic, simple, transactional and streams groups; several segments per partition.
    simulate(out, groups=6, hours=0.2, seed=7, partitions=3, segment_bytes=64 * 1024, formats=("segments", "parquet"))
    return out


# -- the stream reader (no Spark) -------------------------------------------------------------------------------

def _all_rows(reader, start, end):
    return [row for part in reader.partitions(start, end) for batch in reader.read(part) for row in batch.to_pylist()]


def _whole_file_rows(path):
    from offsets_audit.sources.segments import partition_of
    from offsets_audit.sources.segments_spark import read_arrow

    return [row for batch in read_arrow(path, partition_of(path)) for row in batch.to_pylist()]


def test_active_segment_is_read_up_to_its_last_complete_batch(simulated, tmp_path):
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from offsets_audit.sources.segments_stream import SegmentsStreamReader, batch_ends

    source = sorted((simulated / "segments" / "__consumer_offsets-1").glob("*.log"))[0]
    folder = tmp_path / "__consumer_offsets-1"
    folder.mkdir()
    active = folder / source.name
    data = source.read_bytes()
    ends = list(batch_ends(str(source), 0, len(data)))
    cut = ends[len(ends) // 2] + 20  # mid-way through a batch being appended
    active.write_bytes(data[:cut])
    reader = SegmentsStreamReader({"path": str(tmp_path)})
    first = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert first["files"][str(active)] == ends[len(ends) // 2]
    active.write_bytes(data)  # the broker finished the batch and appended more
    second = reader.latestOffset(first, ReadAllAvailable())
    assert second["files"][str(active)] == len(data)
    rows = _all_rows(reader, reader.initialOffset(), first) + _all_rows(reader, first, second)
    assert rows == _whole_file_rows(str(active))


def test_rolled_segment_is_read_to_its_end_including_a_damaged_tail(simulated, tmp_path):
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from offsets_audit.sources.segments_stream import SegmentsStreamReader

    segments = sorted((simulated / "segments" / "__consumer_offsets-1").glob("*.log"))[:2]
    folder = tmp_path / "__consumer_offsets-1"
    folder.mkdir()
    rolled = folder / segments[0].name
    rolled.write_bytes(segments[0].read_bytes()[:-7])
    shutil.copy(segments[1], folder / segments[1].name)
    reader = SegmentsStreamReader({"path": str(tmp_path)})
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert end["files"][str(rolled)] == rolled.stat().st_size
    rows = [r for r in _all_rows(reader, reader.initialOffset(), end) if r["source_file"] == str(rolled)]
    assert rows == _whole_file_rows(str(rolled)) and rows[-1]["read_error_code"] == "truncated_batch"


def test_read_limits_split_the_log_into_micro_batches_that_cover_it_once(simulated):
    from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxFiles

    from offsets_audit.sources.segments import list_segments
    from offsets_audit.sources.segments_stream import SegmentsStreamReader

    expected = sorted((r["partition"], r["offset"]) for path, _ in list_segments(simulated / "segments")
                      for r in _whole_file_rows(path))
    for limit in (ReadMaxFiles(2), ReadMaxBytes(MAX_BYTES_PER_TRIGGER)):
        # one task per file's new bytes, or packed into a few input partitions as the incremental run reads them
        for packed in ({}, {"minPartitions": "2"}):
            reader = SegmentsStreamReader({"path": str(simulated / "segments"), **packed})
            reader.prepareForTriggerAvailableNow()
            start, seen, batches = reader.initialOffset(), [], 0
            while (end := reader.latestOffset(start, limit)) != start:
                if packed:
                    assert len(reader.partitions(start, end)) <= 3  # about minPartitions, as Spark packs files
                seen += [(r["partition"], r["offset"]) for r in _all_rows(reader, start, end)]
                start, batches = end, batches + 1
            assert sorted(seen) == expected and batches >= 2


# -- the fold, micro-batch by micro-batch (no Spark) ---------------------------------------------------------------

def _group_frames(root):
    """Each group's fold input rows (as ``fold_input`` selects them) of the log under ``root``, in pandas."""
    import pandas as pd

    from offsets_audit.codec.spark import decode_batch
    from offsets_audit.sources.segments import list_segments
    from offsets_audit.sources.segments_spark import read_arrow

    frames = [decode_batch(b).to_pandas() for path, part in list_segments(root) for b in read_arrow(path, part)]
    rows = pd.concat(frames, ignore_index=True)
    rows = rows[~rows["is_control"].fillna(False).astype(bool) & rows["error_code"].isna() & rows["group_id"].notna()]
    rows = rows[~rows["record_type"].isin([0, 1]) | rows["value"].notna()].copy()
    rows["timestamp_ms"] = rows["timestamp"].astype("int64") // 1_000_000
    return {group_id: frame for group_id, frame in rows.groupby("group_id")}


def test_fold_carried_through_the_state_store_equals_one_pass(simulated):
    """Cutting a group's records into micro-batches, with ``GroupFold`` stored as bytes between them, gives the
    batch replay's rows (the processor's logic without Spark)."""
    from offsets_audit.replay.fold import GroupFold
    from offsets_audit.replay.streaming import fold_frame, ordered_group_rows, state_rows
    from offsets_audit.replay.spark import _fold_groups

    for group_id, frame in _group_frames(simulated / "segments").items():
        in_log_order = frame.drop(columns=["record_type"]).sort_values(["partition", "offset"], kind="stable")
        expected = pd.concat(_fold_groups((group_id,), iter([in_log_order])))
        stored, got, step = None, [], max(1, len(frame) // 3)
        for start in range(0, len(frame), step):
            fold = GroupFold.from_bytes(stored) if stored else GroupFold(group_id)
            got += fold_frame(fold, ordered_group_rows(frame.iloc[start:start + step]))
            final = state_rows(fold)
            stored = fold.to_bytes()
        got += final
        assert _canonical(got) == _canonical(expected.itertuples(index=False, name=None)), group_id


def _canonical(rows):
    import json

    return sorted((kind, repr(json.loads(payload))) for kind, _, payload in rows)


# -- the Spark job ------------------------------------------------------------------------------------------------

def _config(simulated: Path, output: Path, kind: str = "segments"):
    from offsets_audit.config import load_settings

    options = {"maxBytesPerTrigger": MAX_BYTES_PER_TRIGGER} if kind == "segments" else {"maxFilesPerTrigger": 1}
    return load_settings(None, {
        "run_id": "incremental-test",
        "source": {"kind": kind, "path": str(simulated / kind), "options": options},
        "output": {"path": str(output)},
    })


@pytest.fixture(scope="module")
def uninterrupted(spark, simulated, tmp_path_factory):
    from offsets_audit.incremental import run_incremental

    root = tmp_path_factory.mktemp("incremental-run")
    summary = run_incremental(spark, _config(simulated, root / "out"), str(root / "checkpoint"), progress=False)
    return summary, read_tables(spark, str(root / "out")), audit_rows(spark, str(root / "out"))


AUDIT_TABLES = ("findings", "provisional_findings", "rebalances", "provisional_rebalances", "assignor_audit",
                "latency_summary")


def audit_rows(spark, output: str) -> dict:
    """The audit tables of the last run under ``output`` as sorted JSON rows."""
    import json

    from offsets_audit import sinks

    run_id = sinks.complete_runs(spark, output)[-1]["run_id"]
    return {name: sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str)
                         for r in sinks.read_table(spark, output, name, run_id, "parquet").collect())
            for name in AUDIT_TABLES}


@pytest.fixture(scope="module")
def batch_tables(spark, simulated):
    from offsets_audit.codec.spark import decode, split
    from offsets_audit.replay.spark import replay
    from offsets_audit.sources import read

    decoded, _ = split(decode(read(spark, {"kind": "segments", "path": str(simulated / "segments")})))
    return replay(decoded)


def read_tables(spark, output: str) -> dict:
    """The replay tables of every incremental run under ``output`` in the batch replay's layouts: the events and
    target assignments of all runs, the state tables of the last one."""
    from offsets_audit import sinks

    runs = [m["run_id"] for m in sinks.complete_runs(spark, output)]
    tables = {}
    for name in TABLES:
        if name in ("group_events", "target_assignments"):
            frames = [sinks.read_table(spark, output, name, run_id, "parquet") for run_id in runs]
            tables[name] = frames[0]
            for df in frames[1:]:
                tables[name] = tables[name].unionByName(df)
        else:
            tables[name] = sinks.read_table(spark, output, name, runs[-1], "parquet")
    return tables


def _assert_same_tables(got: dict, expected: dict) -> None:
    from chispa import assert_df_equality

    for name in TABLES:
        assert_df_equality(got[name], expected[name].select(*got[name].columns), ignore_row_order=True,
                           ignore_nullable=True)


@pytest.mark.spark
def test_incremental_run_reads_the_log_in_several_micro_batches(uninterrupted):
    summary, _, _ = uninterrupted
    assert len(summary.incremental.batches.fold) >= 2 and len(summary.incremental.batches.records) >= 2
    assert summary.records.read == summary.records.decoded > 0


@pytest.mark.spark
def test_incremental_tables_equal_the_batch_replay(uninterrupted, batch_tables):
    _, tables, _ = uninterrupted
    _assert_same_tables(tables, batch_tables)


@pytest.mark.spark
@pytest.mark.slow
def test_parquet_dump_streamed_file_by_file_equals_the_batch_replay(spark, simulated, tmp_path, batch_tables):
    from offsets_audit.incremental import run_incremental

    summary = run_incremental(spark, _config(simulated, tmp_path / "out", "parquet"), str(tmp_path / "checkpoint"),
                              progress=False)
    assert len(summary.incremental.batches.fold) >= 2
    _assert_same_tables(read_tables(spark, str(tmp_path / "out")), batch_tables)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.full  # a kill and a resume; test_kill kills the batch run in the default suite
def test_run_killed_after_a_micro_batch_resumes_to_the_uninterrupted_tables(spark, simulated, tmp_path, uninterrupted,
                                                                              batch_tables):
    import yaml

    from offsets_audit.incremental import run_incremental

    config = _config(simulated, tmp_path / "out")
    config_file = tmp_path / "incremental.yaml"
    config_file.write_text(yaml.safe_dump({k: config.as_dict()[k] for k in ("run_id", "source", "output")}))
    checkpoint = tmp_path / "checkpoint"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    job = subprocess.Popen(
        [sys.executable, "-m", "offsets_audit.cli", "run", "--config", str(config_file), "--incremental",
         "--checkpoint", str(checkpoint)],
        env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    first_commit = checkpoint / "fold" / "commits" / "0"
    try:
        deadline = time.monotonic() + 240
        while not first_commit.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert first_commit.exists(), "the incremental job committed no micro-batch in time"
        assert job.poll() is None, "the job finished before it could be killed"
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)  # the driver and the JVM it started, at once
        job.wait()
    assert not (checkpoint / "runs.json").exists()

    summary = run_incremental(spark, config, str(checkpoint), progress=False)
    assert summary.incremental.batches.fold[0] >= 1  # the killed run's first micro-batch was not redone
    tables = read_tables(spark, str(tmp_path / "out"))
    _assert_same_tables(tables, uninterrupted[1])
    _assert_same_tables(tables, batch_tables)
    assert audit_rows(spark, str(tmp_path / "out")) == uninterrupted[2]  # the audit state survived the kill too


@pytest.mark.spark
@pytest.mark.slow
def test_second_run_picks_up_grown_and_new_segments(spark, simulated, tmp_path, batch_tables):
    from offsets_audit.incremental import run_incremental

    log_dir = tmp_path / "logs"
    pending = []
    for folder in sorted((simulated / "segments").iterdir()):
        files = sorted(folder.glob("*.log"))
        (log_dir / folder.name).mkdir(parents=True)
        half = len(files) // 2
        for index, segment in enumerate(files):
            target = log_dir / folder.name / segment.name
            if index < half:
                shutil.copy(segment, target)
            elif index == half:  # the active segment, cut mid-batch
                data = segment.read_bytes()
                target.write_bytes(data[:len(data) // 2])
                pending.append((target, data[len(data) // 2:]))
            else:
                pending.append((target, segment.read_bytes()))
    config = _config(simulated, tmp_path / "out").replace(source={"path": str(log_dir), "options": {}})
    first = run_incremental(spark, config, str(tmp_path / "checkpoint"), progress=False)
    for target, data in pending:
        with open(target, "ab") as handle:
            handle.write(data)
    config = config.replace(run_id="second")
    second = run_incremental(spark, config, str(tmp_path / "checkpoint"), progress=False)
    assert first.records.read + second.records.read == sum(
        1 for _ in _rows_of_log(simulated / "segments"))
    _assert_same_tables(read_tables(spark, str(tmp_path / "out")), batch_tables)


def _rows_of_log(root):
    from offsets_audit.sources.segments import list_segments

    for path, _ in list_segments(root):
        yield from _whole_file_rows(path)


# -- offsets: transaction markers in a later micro-batch -----------------------------------------------------------

_DECODED_DDL = ("partition int, offset long, record_type int, is_control boolean, control_type string, "
                "producer_id long, group_id string, topic_name string, topic_partition int, value binary, "
                "offset_commit_value struct<offset:bigint,leader_epoch:int,metadata:string,commit_timestamp:bigint,"
                "expire_timestamp:bigint,topic_id:string>, error_code string")


def _commit(offset, topic_partition, committed, producer_id=-1):
    value = None if committed is None else (committed, 3, "", 1000 + offset, None, None)
    return (0, offset, 1, False, None, producer_id, "g", "t", topic_partition,
            None if committed is None else b"v", value, None)


def _marker(offset, producer_id, control_type):
    return (0, offset, None, True, control_type, producer_id, None, None, None, None, None, None)


#: A log where markers come after their commits, a tombstone lands between a commit and its marker, a
#: transaction aborts and one is still open at the end.
TXN_LOG = [
    _commit(0, 0, 100, producer_id=7), _commit(1, 1, 5),
    _marker(2, 7, "COMMIT"), _commit(3, 1, 50, producer_id=8),
    _commit(4, 1, None), _marker(5, 8, "COMMIT"), _commit(6, 2, 9, producer_id=9),
    _commit(7, 3, 70, producer_id=10), _marker(8, 10, "ABORT"), _commit(9, 0, 120, producer_id=11),
]


@pytest.mark.spark
@pytest.mark.parametrize("cuts", [(2, 5), (1, 4, 8)], ids=["markers-in-next-batch", "tombstone-then-marker"])
def test_offsets_merged_batch_by_batch_equal_the_whole_log_replay(spark, cuts):
    from chispa import assert_df_equality

    from offsets_audit.replay.streaming import _OFFSETS_STATE_DDL, merge_offsets, offsets_table
    from offsets_audit.replay.spark import _offsets

    snapshot = spark.createDataFrame([], _OFFSETS_STATE_DDL)
    bounds = [0, *cuts, len(TXN_LOG)]
    for start, end in zip(bounds, bounds[1:]):
        batch = spark.createDataFrame(TXN_LOG[start:end], _DECODED_DDL)
        snapshot = spark.createDataFrame(merge_offsets(snapshot, batch).collect(), _OFFSETS_STATE_DDL)
    expected = _offsets(spark.createDataFrame(TXN_LOG, _DECODED_DDL))
    got = offsets_table(snapshot)
    assert_df_equality(got, expected.select(*got.columns), ignore_row_order=True, ignore_nullable=True)
    assert {r["status"] for r in got.collect()} == {"committed", "pending"}
