"""``kafka-segments`` Spark source: the same records as the pure reader, as SOURCE_SCHEMA rows."""

from __future__ import annotations

import datetime as dt
import marshal
import shutil
import struct

import pytest

from offsets_audit.codec.spark import (COMMIT_AFTER_COMMIT_COLUMN, COMMIT_MID_RUN_COLUMN, DECODED_RECORD_COLUMN,
                                      MARK_COLUMNS)
from offsets_audit.sources.schema import SOURCE_SCHEMA, TIMESTAMP_TYPE_IDS
from offsets_audit.sources.segments import read_segment
from offsets_audit.sources.segments_spark import SegmentsReader, read_arrow
from segments_golden import collected_cases

SEGMENT_CASES = [c for c in collected_cases() if c.log.parent.name == "segments"]
UTC = dt.timezone.utc


def expected_row(record: dict, path: str, position: int, topic: str = "__consumer_offsets") -> dict:
    timestamp = None
    if record["timestamp"] != -1:
        timestamp = dt.datetime.fromtimestamp(record["timestamp"] / 1000, tz=UTC)
    return {
        "key": record["key"], "value": record["value"], "topic": topic, "partition": record["partition"],
        "offset": record["offset"], "timestamp": timestamp,
        "timestampType": TIMESTAMP_TYPE_IDS[record["timestamp_type"]], "producer_id": record["producer_id"],
        "producer_epoch": record["producer_epoch"], "is_transactional": record["is_transactional"],
        "is_control": record["is_control"], "control_type": record["control_type"],
        "coordinator_epoch": record["coordinator_epoch"], "batch_base_offset": record["batch_base_offset"],
        "batch_last_offset": record["batch_last_offset"], "batch_magic": record["batch_magic"],
        "compression": record["compression"], "source_file": path, "file_position": position,
        "read_error_code": None, "read_error_message": None, "records_lost": None, "raw_bytes": None,
    }


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    """The golden segments laid out as a broker log dir: __consumer_offsets-<manifest partition>/<file>.log."""
    root = tmp_path_factory.mktemp("logs")
    for case in SEGMENT_CASES:
        folder = root / f"__consumer_offsets-{case.partition}"
        folder.mkdir()
        shutil.copy(case.log, folder / "00000000000000000000.log")
        (folder / "00000000000000000000.index").write_bytes(b"\x00" * 16)
    return root


def expected_rows(log_dir) -> list[dict]:
    rows = []
    for case in SEGMENT_CASES:
        path = str(log_dir / f"__consumer_offsets-{case.partition}" / "00000000000000000000.log")
        positions = {}
        from offsets_audit.sources.segments import iter_batches

        for batch in iter_batches(path):
            positions[(batch.base_offset, batch.last_offset)] = batch.position
        for record in case.expected_records():
            rows.append(expected_row(record, path, positions[(record["batch_base_offset"], record["batch_last_offset"])]))
    return rows


def sort_key(row: dict):
    return (row["source_file"], row["file_position"], row["offset"] if row["offset"] is not None else -1)


def test_arrow_batches_hold_every_golden_record(log_dir):
    rows = []
    for case in SEGMENT_CASES:
        path = str(log_dir / f"__consumer_offsets-{case.partition}" / "00000000000000000000.log")
        for batch in read_arrow(path, case.partition, rows_per_batch=7):
            assert batch.num_rows <= 7 + 62
            rows.extend(batch.to_pylist())
    assert sorted(rows, key=sort_key) == sorted(expected_rows(log_dir), key=sort_key)


def test_quarantine_rows_carry_the_error_and_no_record(tmp_path, golden):
    path = tmp_path / "00000000000000000000.log"
    data = (golden / "segments" / "v2-none-00000000000000000000.log").read_bytes()
    path.write_bytes(data[:-10])
    rows = [r for b in read_arrow(str(path), 3) for r in b.to_pylist()]
    bad = [r for r in rows if r["read_error_code"] is not None]
    assert len(bad) == 1
    assert bad[0]["read_error_code"] == "truncated_batch"
    assert bad[0]["key"] is None and bad[0]["value"] is None and bad[0]["offset"] is None
    assert bad[0]["source_file"] == str(path) and bad[0]["partition"] == 3
    assert str(path) in bad[0]["read_error_message"]
    position = bad[0]["file_position"]
    assert bad[0]["raw_bytes"] == data[position:len(data) - 10]
    # the tail of the partition: the truncated header's own claim says what was lost
    (delta,) = struct.unpack_from(">i", data, position + 23)
    assert bad[0]["records_lost"] == delta + 1
    assert bad[0]["batch_last_offset"] - bad[0]["batch_base_offset"] == delta
    good = [r for r in rows if r["read_error_code"] is None]
    assert len(good) == len(list(read_segment(path)))


def test_large_segments_are_split_at_batch_boundaries(log_dir):
    reader = SegmentsReader({"path": str(log_dir), "maxBytesPerPartition": "4096"})
    ranges = reader.partitions()
    assert len(ranges) > len(SEGMENT_CASES)
    rows = [r for p in ranges for b in reader.read(p) for r in b.to_pylist()]
    assert sorted(rows, key=sort_key) == sorted(expected_rows(log_dir), key=sort_key)


def test_bad_options_are_user_errors(log_dir):
    from offsets_audit.errors import UserError

    with pytest.raises(UserError, match="maxbytesperpartition"):
        SegmentsReader({"path": str(log_dir), "maxBytesPerPartition": "lots"})
    with pytest.raises(UserError, match="needs a path"):
        SegmentsReader({})


@pytest.mark.spark
def test_spark_reads_the_golden_log_dir(spark, log_dir):
    from chispa import assert_df_equality

    from offsets_audit.sources import register

    register(spark)
    df = spark.read.format("kafka-segments").load(str(log_dir))
    assert df.schema == SOURCE_SCHEMA
    expected = spark.createDataFrame(expected_rows(log_dir), SOURCE_SCHEMA)
    assert_df_equality(df, expected, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.spark
def test_spark_options_partition_topic_and_split(spark, log_dir):
    from offsets_audit.sources import register

    register(spark)
    one = str(log_dir / f"__consumer_offsets-{SEGMENT_CASES[0].partition}")
    df = (spark.read.format("kafka-segments").option("partition", "42").option("topic", "offsets-copy")
          .option("maxBytesPerPartition", "1000").load(one))
    assert df.rdd.getNumPartitions() > 1
    rows = df.select("topic", "partition", "offset").collect()
    assert {(r.topic, r.partition) for r in rows} == {("offsets-copy", 42)}
    assert sorted(r.offset for r in rows) == [r["offset"] for r in SEGMENT_CASES[0].expected_records()]


@pytest.mark.spark
def test_spark_wrong_path_fails_naming_it(spark, tmp_path):
    from offsets_audit.sources import register

    register(spark)
    with pytest.raises(Exception, match="no-such-log-dir"):
        spark.read.format("kafka-segments").load(str(tmp_path / "no-such-log-dir")).collect()


@pytest.mark.spark
def test_spark_turns_unreadable_bytes_into_quarantine_rows(spark, tmp_path, golden):
    from offsets_audit.sources import register

    register(spark)
    folder = tmp_path / "__consumer_offsets-5"
    folder.mkdir()
    data = bytearray((golden / "segments" / "v2-gzip-00000000000000000000.log").read_bytes())
    data[100] ^= 0xFF  # inside the first batch's gzip payload
    (folder / "00000000000000000000.log").write_bytes(bytes(data[:-5]))
    rows = spark.read.format("kafka-segments").load(str(tmp_path)).collect()
    errors = sorted((r.read_error_code, r.file_position, r.partition) for r in rows if r.read_error_code)
    assert [(code, position) for code, position, _ in errors][0] == ("crc_mismatch", 0)
    assert [code for code, _, _ in errors] == ["crc_mismatch", "truncated_batch"]
    assert {partition for _, _, partition in errors} == {5}
    assert all(r.key is None and r.offset is None for r in rows if r.read_error_code)


def test_small_segments_are_packed_in_plan_order_each_range_once(log_dir):
    from offsets_audit.sources.segments_spark import OPEN_COST_BYTES, PackedRanges, pack_ranges

    unpacked = SegmentsReader({"path": str(log_dir), "maxBytesPerPartition": "4096"}).partitions()
    for min_partitions in (1, 2, 3, len(unpacked), 10 * len(unpacked)):
        packed = pack_ranges(unpacked, max_bytes=1 << 30, min_partitions=min_partitions)
        assert all(isinstance(p, PackedRanges) and p.ranges for p in packed)
        assert [r.value for p in packed for r in p.ranges] == [r.value for r in unpacked]
        assert len(packed) <= len(unpacked)
    # The cap: a pack never holds more than max_bytes (counting each range's open cost) unless one range does.
    capped = pack_ranges(unpacked, max_bytes=OPEN_COST_BYTES + 4096, min_partitions=1)
    assert len(capped) == len(unpacked)


def test_packed_read_yields_the_same_rows_as_one_task_per_range(log_dir):
    # maxBytesPerPartition caps a pack too, so the default here (each golden segment is one range).
    options = {"path": str(log_dir)}
    one_each = SegmentsReader(options)
    packed = SegmentsReader({**options, "minPartitions": "2"})
    assert len(packed.partitions()) < len(one_each.partitions())

    def rows(reader):
        return [r for p in reader.partitions() for b in reader.read(p) for r in b.to_pylist()]

    assert rows(packed) == rows(one_each)
    assert sorted(rows(packed), key=sort_key) == sorted(expected_rows(log_dir), key=sort_key)


def test_bad_min_partitions_is_a_user_error(log_dir):
    from offsets_audit.errors import UserError

    with pytest.raises(UserError, match="minpartitions"):
        SegmentsReader({"path": str(log_dir), "minPartitions": "-1"})


def _with_a_damaged_segment(tmp_path, log_dir, golden):
    """A copy of the golden log dir plus a segment with a flipped byte and a cut tail (two unreadable stretches)."""
    root = tmp_path / "logs"
    shutil.copytree(log_dir, root)
    folder = root / "__consumer_offsets-49"
    folder.mkdir()
    data = bytearray((golden / "segments" / "v2-gzip-00000000000000000000.log").read_bytes())
    data[100] ^= 0xFF
    (folder / "00000000000000000000.log").write_bytes(bytes(data[:-5]))
    return root


def test_the_decoding_reader_reads_batches_of_the_decoders_size_unless_told(log_dir):
    """``kafka-segments+decoded`` reads Arrow batches of ``COALESCE_ROWS`` (the decoder would join smaller ones,
    copying them); a ``rowsPerBatch`` option still sets them."""
    from offsets_audit.codec.source import DecodedSegmentsDataSource
    from offsets_audit.codec.spark import COALESCE_ROWS
    from offsets_audit.sources.segments_spark import DEFAULT_ROWS_PER_BATCH

    assert DEFAULT_ROWS_PER_BATCH < COALESCE_ROWS
    assert DecodedSegmentsDataSource({"path": str(log_dir)}).reader(None).inner.rows_per_batch == COALESCE_ROWS
    told = DecodedSegmentsDataSource({"path": str(log_dir), "rowsPerBatch": "500", "decodedRecord": "true"})
    assert told.reader(None).inner.rows_per_batch == 500
    assert SegmentsReader({"path": str(log_dir)}).rows_per_batch == DEFAULT_ROWS_PER_BATCH


@pytest.mark.spark
@pytest.mark.parametrize("with_decoded_record", [False, True])
def test_segments_decoded_where_read_equal_decode_of_the_read(spark, tmp_path, log_dir, golden, with_decoded_record):
    """``read_decoded`` reads segments through ``kafka-segments+decoded`` (one Python pass): its rows equal
    ``decode(read(...))``'s, schema and column order included, on the golden log dir plus a damaged segment."""
    from chispa import assert_df_equality

    from offsets_audit.codec.source import read_decoded
    from offsets_audit.codec.spark import decode
    from offsets_audit.sources import read

    root = _with_a_damaged_segment(tmp_path, log_dir, golden)
    source = {"kind": "segments", "path": str(root)}

    fused = read_decoded(spark, source, with_decoded_record=with_decoded_record)
    assert "MapInArrow" not in fused._jdf.queryExecution().executedPlan().toString()
    expected = decode(read(spark, source), with_decoded_record=with_decoded_record)
    if with_decoded_record:  # the marks for the fold and the digest: the reader's alone (the tests below)
        assert tuple(fused.columns[-len(MARK_COLUMNS):]) == MARK_COLUMNS
        fused = fused.drop(*MARK_COLUMNS)
    assert fused.schema == expected.schema
    assert_df_equality(fused, expected, ignore_row_order=True)
    assert fused.filter("read_error_code is not null").count() == 2


@pytest.mark.spark
@pytest.mark.parametrize("with_decoded_record", [False, True])
def test_a_compact_read_is_the_same_log_once_compacted(spark, tmp_path, log_dir, golden, with_decoded_record):
    """``read_decoded(..., compact=True)``, the job's read when it does not write the ``decoded`` table: decoded rows
    come without the columns ``compact`` drops (their JSON texts never built), quarantine rows whole; ``compact`` of
    it equals ``compact`` of the full read, through the segments reader and through ``decode`` (``mapInArrow``)
    alike, on the golden log dir plus a damaged segment and an undecodable record."""
    from chispa import assert_df_equality

    from offsets_audit.codec.source import read_decoded
    from offsets_audit.codec.spark import compact, decode
    from offsets_audit.sources import read
    from offsets_audit.sources.segment_writer import SegmentWriter

    root = _with_a_damaged_segment(tmp_path, log_dir, golden)
    writer = SegmentWriter.create(root, 48)
    writer.append_batch([(b"\x00\x63garbage", b"\x00\x00")], 1_700_000_000_000)  # an unknown record type
    writer.flush()
    source = {"kind": "segments", "path": str(root)}

    full = read_decoded(spark, source, with_decoded_record=with_decoded_record)
    lean = read_decoded(spark, source, with_decoded_record=with_decoded_record, compact=True)
    assert lean.schema == full.schema
    decoded = lean.filter("error_code is null and read_error_code is null")
    assert decoded.count() > 0
    assert decoded.filter("key_json is not null or value_json is not null or source_file is not null").count() == 0
    quarantined = lean.filter("error_code is not null or read_error_code is not null")
    assert quarantined.filter("source_file is null").count() == 0 and quarantined.count() >= 3
    # ``decoded_record`` is ``marshal``-ed: the same record, but its bytes flag the strings the JSON form also held
    # (marshal marks objects referenced more than once), so it is compared as the record it holds
    assert_df_equality(compact(lean).drop(DECODED_RECORD_COLUMN), compact(full).drop(DECODED_RECORD_COLUMN),
                       ignore_row_order=True)
    if with_decoded_record:
        def records(df):
            rows = [(r["partition"], r["offset"], r["read_error_code"] or "",
                     None if r[DECODED_RECORD_COLUMN] is None else marshal.loads(r[DECODED_RECORD_COLUMN]))
                    for r in df.select("partition", "offset", "read_error_code", DECODED_RECORD_COLUMN).collect()]
            return sorted(rows, key=lambda row: tuple(-1 if v is None else v for v in row[:3]))

        assert records(lean) == records(full)
    raw = read(spark, source)
    assert_df_equality(compact(decode(raw, json_text=False)), compact(decode(raw)), ignore_row_order=True)


def _mark_batch(rows):
    """A decoded batch with the columns the marks read, from (partition, batch base offset, file position, offset,
    group, record type, value, error code) rows: each an offset commit of (topic t, partition 0)."""
    import pyarrow as pa

    columns = list(zip(*rows))
    types = [pa.int32(), pa.int64(), pa.int64(), pa.int64(), pa.string(), pa.int32(), pa.binary(), pa.string()]
    names = ["partition", "batch_base_offset", "file_position", "offset", "group_id", "record_type", "value",
             "error_code"]
    n = len(rows)
    value = pa.StructArray.from_arrays([pa.array(columns[3], pa.int64()), pa.nulls(n, pa.string())],
                                       names=["offset", "topic_id"])
    extra = {"is_control": pa.array([False] * n), "topic_name": pa.array(["t"] * n),
             "topic_partition": pa.array([0] * n, pa.int32()),
             "timestamp": pa.array(list(columns[3]), pa.timestamp("us", tz="UTC")),
             "producer_id": pa.array([-1] * n, pa.int64()), "offset_commit_value": value}
    return pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(columns, types)] + list(extra.values()),
                                      names=names + list(extra))


def test_commits_after_commits_per_kafka_batch_or_per_segment_and_group():
    """The fold's mark, by hand: per Kafka batch (a range read batch by batch) or per segment (a whole segment) and
    group, in offset order, among the records the fold reads (a commit tombstone is not one), a commit after a
    commit; a group record ends a run; equal offsets (a damaged batch) are not marked. A batch without a column the
    marks read is not marked."""
    from offsets_audit.codec.spark import mark_batch, mark_range

    rows = [  # partition, batch base offset, file position, offset, group, record type, value, error code
        (0, 10, 0, 11, "a", 1, b"v", None),   # rows out of offset order: the mark sorts them
        (0, 10, 0, 10, "a", 1, b"v", None),
        (0, 10, 0, 12, "b", 1, b"v", None),
        (0, 10, 0, 13, "a", 1, b"v", None),
        (0, 10, 0, 14, "a", 3, b"v", None),   # a group record
        (0, 10, 0, 15, "a", 1, b"v", None),
        (0, 10, 0, 16, "a", 1, None, None),   # a commit tombstone: not read by the fold
        (0, 10, 0, 17, "a", 1, b"v", None),
        (0, 10, 0, 18, "a", 1, b"v", "bad"),  # undecodable
        (0, 20, 90, 20, "a", 1, b"v", None),  # the next Kafka batch
        (0, 20, 90, 21, "a", 1, b"v", None),
        (0, 20, 90, 21, "a", 1, b"v", None),  # the same offset twice
    ]
    batch = _mark_batch(rows)
    marked = mark_batch(batch)
    assert marked.schema.names[-2:] == list(MARK_COLUMNS)
    assert marked.column(COMMIT_AFTER_COMMIT_COLUMN).to_pylist() == [
        True, False, False, True, False, False, False, True, False, False, True, False]
    assert marked.column(COMMIT_MID_RUN_COLUMN).to_pylist() == [False] * len(rows)
    [whole] = mark_range([batch])
    assert whole.column(COMMIT_AFTER_COMMIT_COLUMN).to_pylist() == [
        True, False, False, True, False, False, False, True, False, True, True, False]
    halves = mark_range([_mark_batch(rows[:6]), _mark_batch(rows[6:])])
    assert [m for b in halves for m in b.column(COMMIT_AFTER_COMMIT_COLUMN).to_pylist()] == \
        whole.column(COMMIT_AFTER_COMMIT_COLUMN).to_pylist()
    bare = mark_batch(batch.drop_columns(["file_position"]))
    assert bare.column(COMMIT_AFTER_COMMIT_COLUMN).to_pylist() == [False] * len(rows)
    assert [b.column(COMMIT_AFTER_COMMIT_COLUMN).to_pylist() for b in mark_range([batch.drop_columns(["file_position"])])] \
        == [[False] * len(rows)]


@pytest.mark.spark
def test_the_reader_marks_the_commits_the_fold_and_the_digest_do_without(spark, tmp_path):
    """The reader's marks on a simulated log (commit batches of one group, group records between):

    * ``commit_after_commit``: a decoded commit whose group's previous record (of those the fold reads) in its
      segment is a commit, or in its Kafka batch where a segment is read in two ranges; equal to that definition
      computed with a window;
    * ``commit_mid_run``: only in whole segments, on most commits;

    and neither changes the fold's tables or the commit log's digest."""
    from chispa import assert_df_equality
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from offsets_audit.codec.source import read_decoded
    from offsets_audit.codec.spark import OFFSET_COMMIT_TYPE_IDS, split, tombstone
    from offsets_audit.replay import spark as replay_spark
    from offsets_audit.replay.commit_log import resolve_commits

    from offsets_audit.simulate import simulate
    from replay_support import planned_as_a_small_log

    info = simulate(tmp_path / "sim", groups=6, hours=0.2, seed=11, partitions=3)
    path = str(tmp_path / "sim" / "segments")
    # planned and run as the job plans a log this small
    with planned_as_a_small_log(spark, info["records"]):
        for options, per in (({}, ["source_file"]), ({"maxBytesPerPartition": 20_000}, ["batch_base_offset", "file_position"])):
            marked = read_decoded(spark, {"kind": "segments", "path": path, **options},
                                  with_decoded_record=True).cache()
            is_commit = F.col("record_type").isin(*OFFSET_COMMIT_TYPE_IDS)
            read = (~F.coalesce(F.col("is_control"), F.lit(False)) & F.col("error_code").isNull()
                    & F.col("group_id").isNotNull() & ~(is_commit & tombstone(marked)))
            within = Window.partitionBy("partition", *per, "group_id").orderBy("offset")
            expected = marked.filter(read).withColumn("_expected", is_commit & F.coalesce(
                F.lag(is_commit).over(within), F.lit(False)))
            assert expected.filter(F.col("_expected") != F.col(COMMIT_AFTER_COMMIT_COLUMN)).count() == 0
            assert marked.filter(~read & F.col(COMMIT_AFTER_COMMIT_COLUMN)).count() == 0
            marks, commits = marked.filter(COMMIT_AFTER_COMMIT_COLUMN).count(), marked.filter(is_commit).count()
            mid = marked.filter(COMMIT_MID_RUN_COLUMN).count()
            if options:  # ranges of a segment: marks per Kafka batch, none mid-run
                assert marks > commits / 3 and mid == 0, (marks, commits, mid)  # 2,399 of 5,891 commits here
            else:
                assert marks > commits * 0.8 and mid > commits / 2, (marks, commits, mid)
            decoded, _ = split(marked)
            with_mark, without = replay_spark.replay(decoded), replay_spark.replay(decoded.drop(*MARK_COLUMNS))
            for name in ("group_state", "members", "group_events", "target_assignments"):
                assert_df_equality(with_mark[name], without[name], ignore_row_order=True, ignore_nullable=True)
            assert_df_equality(resolve_commits(decoded, digest=True), resolve_commits(decoded.drop(*MARK_COLUMNS), digest=True),
                               ignore_row_order=True)
            with_mark.release()
            without.release()
            marked.unpersist()


@pytest.mark.spark
def test_other_sources_are_decoded_after_the_read(spark, tmp_path, log_dir):
    """A Parquet dump has no Python reader to decode in: ``read_decoded`` decodes it with ``mapInArrow``."""
    from chispa import assert_df_equality

    from offsets_audit.codec.source import read_decoded

    source = {"kind": "segments", "path": str(log_dir)}
    read_decoded(spark, source).drop("decoded_record").select(*SOURCE_SCHEMA.fieldNames()) \
        .write.parquet(str(tmp_path / "dump"))
    from_dump = read_decoded(spark, {"kind": "parquet", "path": str(tmp_path / "dump")})
    assert "MapInArrow" in from_dump._jdf.queryExecution().executedPlan().toString()
    assert_df_equality(from_dump.drop("source_file"), read_decoded(spark, source).drop("source_file"),
                       ignore_row_order=True, ignore_nullable=True)


def test_a_range_is_alone_when_it_is_a_whole_segment_named_by_its_base_offset(tmp_path):
    """``alone``: only a whole segment whose name states its base offset, of a known partition, is marked across
    the segment; a range of a split segment, or a file of another name, is marked per Kafka batch."""
    from offsets_audit.sources.segments_spark import SegmentRange, alone

    named = tmp_path / "00000000000000000100.log"
    named.write_bytes(b"x" * 1000)
    other = tmp_path / "copy.log"
    other.write_bytes(b"x" * 1000)
    assert alone(SegmentRange(str(named), 3, 0, None))
    assert alone(SegmentRange(str(named), 3, 0, 1000))
    assert not alone(SegmentRange(str(named), 3, 0, 500))
    assert not alone(SegmentRange(str(named), 3, 500, None))
    assert not alone(SegmentRange(str(named), None, 0, None))
    assert not alone(SegmentRange(str(other), 3, 0, None))
    assert not alone(SegmentRange(str(tmp_path / "00000000000000000200.log"), 3, 0, 10))  # gone


def test_a_segment_too_large_to_hold_is_marked_batch_by_batch(monkeypatch):
    """The reader holds a whole segment's decoded batches to mark them across it, up to ``RANGE_BYTES_LIMIT``;
    past it, and in a range that is not a whole segment, each batch is marked alone (no commit mid-run)."""
    from offsets_audit.codec import source

    batches = [_mark_batch([(0, o, o, o, "a", 1, b"v", None), (0, o, o, o + 1, "a", 1, b"v", None)])
               for o in range(0, 12, 2)]

    def marks(whole):
        out = list(source._marked(iter(batches), whole))
        return ([m for b in out for m in b.column(COMMIT_AFTER_COMMIT_COLUMN).to_pylist()],
                [m for b in out for m in b.column(COMMIT_MID_RUN_COLUMN).to_pylist()])

    after, mid = marks(True)
    assert after == [False] + [True] * 11 and mid == [False] + [True] * 9 + [False, False]
    per_batch = ([False, True] * 6, [False] * 12)
    assert marks(False) == per_batch
    monkeypatch.setattr(source, "RANGE_BYTES_LIMIT", batches[0].nbytes * 2)
    assert marks(True) == per_batch


@pytest.mark.spark
@pytest.mark.parametrize("options", [dict(), dict(with_decoded_record=True),
                                     dict(with_decoded_record=True, compact=True, pack_commits=True)],
                         ids=["plain", "decoded_record", "the_jobs_read"])
def test_a_small_log_read_by_the_driver_equals_the_tasks_read(spark, tmp_path, log_dir, golden, monkeypatch, options):
    """Below ``DRIVER_READ_MAX_BYTES`` the driver reads and decodes the segments with the reader a task runs: the
    rows, schema and column order equal the Python Data Source's read by tasks (``DRIVER_READ_MAX_BYTES`` 0), marks
    and packed commits included, on the golden log dir plus a damaged segment (quarantine rows) and an undecodable
    record; the plain source's read too. The driver's read is a local relation, planning no Python Data Source."""
    from chispa import assert_df_equality

    from offsets_audit import sources
    from offsets_audit.codec.source import read_decoded
    from offsets_audit.sources.segment_writer import SegmentWriter

    root = _with_a_damaged_segment(tmp_path, log_dir, golden)
    writer = SegmentWriter.create(root, 48)
    writer.append_batch([(b"\x00\x63garbage", b"\x00\x00")], 1_700_000_000_000)
    writer.flush()
    source = {"kind": "segments", "path": str(root)}

    def both(read):
        by_driver = read()
        with monkeypatch.context() as patched:
            patched.setattr(sources, "DRIVER_READ_MAX_BYTES", 0)
            by_tasks = read()
        return by_driver, by_tasks

    by_driver, by_tasks = both(lambda: read_decoded(spark, source, **options))
    assert "LocalTableScan" in by_driver._jdf.queryExecution().executedPlan().toString()
    assert "LocalTableScan" not in by_tasks._jdf.queryExecution().executedPlan().toString()
    assert by_driver.schema == by_tasks.schema and by_driver.columns == by_tasks.columns
    assert_df_equality(by_driver, by_tasks, ignore_row_order=True)
    assert by_driver.filter("read_error_code is not null").count() == 2
    assert by_driver.filter("error_code is not null and read_error_code is null").count() == 1
    if not options:
        plain_driver, plain_tasks = both(lambda: sources.read(spark, source))
        assert plain_driver.schema == plain_tasks.schema
        assert_df_equality(plain_driver, plain_tasks, ignore_row_order=True)


@pytest.mark.spark
def test_a_log_of_empty_segments_read_by_the_driver_is_empty_with_the_schema(spark, tmp_path, monkeypatch):
    from offsets_audit import sources
    from offsets_audit.codec.source import read_decoded

    folder = tmp_path / "__consumer_offsets-3"
    folder.mkdir()
    (folder / "00000000000000000000.log").write_bytes(b"")
    source = {"kind": "segments", "path": str(tmp_path)}
    by_driver = read_decoded(spark, source, with_decoded_record=True, compact=True, pack_commits=True)
    monkeypatch.setattr(sources, "DRIVER_READ_MAX_BYTES", 0)
    by_tasks = read_decoded(spark, source, with_decoded_record=True, compact=True, pack_commits=True)
    assert by_driver.schema == by_tasks.schema and by_driver.count() == by_tasks.count() == 0
