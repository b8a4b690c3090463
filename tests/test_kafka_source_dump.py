"""``offsets-audit dump``: a Parquet dump of a live topic or of log segments reads back as the same records;
progress lines for long jobs."""

from __future__ import annotations

import base64
import io
import json

import pytest

from broker import create_topic, kafka_bootstrap, produce, unique_topic  # noqa: F401 (fixture)
from offsets_audit.cli import main
from offsets_audit.sources import read
from offsets_audit.sources.progress import SparkProgress, StageSnapshot, format_line
from offsets_audit.sources.schema import SOURCE_SCHEMA
from offsets_audit.sources.segment_writer import SegmentWriter
from golden_files import read_golden


def golden_records(golden):
    lines = [json.loads(line) for line in read_golden(golden / "records" / "records.jsonl").splitlines() if line]
    return [(base64.b64decode(r["key_b64"]), None if r["value_b64"] is None else base64.b64decode(r["value_b64"]))
            for r in lines]


def rows_of(df):
    return sorted((r["partition"], r["offset"], bytes(r["key"]), None if r["value"] is None else bytes(r["value"]))
                  for r in df.collect())


def test_progress_line_shows_records_rate_and_tasks():
    line = format_line("dump", 4.0, 12000, [StageSnapshot(3, 9, 5, 2, None)])
    assert line == "dump: 12,000 records (3,000 records/s) | stage 3: 5/9 tasks, 2 running | 4s"
    assert format_line("dump", 0.0, None, []) == "dump: | 0s"


@pytest.mark.spark
def test_progress_prints_lines_while_a_job_runs_and_a_final_count(spark, tmp_path):
    def slow(batches):
        import time

        for batch in batches:
            time.sleep(0.5)
            yield batch

    stream = io.StringIO()
    with SparkProgress(spark, "copy", interval_s=0.3, stream=stream) as progress:
        spark.range(0, 40, numPartitions=2).mapInArrow(slow, "id long").write.parquet(str(tmp_path / "out"))
    lines = stream.getvalue().splitlines()
    assert progress.lines_printed == len(lines) >= 2
    assert all(line.startswith("copy") for line in lines)
    assert lines[-1].startswith("copy done: 40 records")


@pytest.mark.spark
def test_progress_is_silent_for_jobs_shorter_than_one_interval(spark):
    stream = io.StringIO()
    with SparkProgress(spark, "quick", interval_s=30, stream=stream):
        spark.range(3).count()
    assert stream.getvalue() == ""


@pytest.mark.spark
def test_dump_of_log_segments_reads_back_every_record(spark, golden, tmp_path, capsys):
    records = golden_records(golden)
    expected = []
    for partition in (0, 1):
        mine = records[partition::2]
        with SegmentWriter.create(tmp_path / "logs", partition) as writer:
            for i in range(0, len(mine), 10):
                writer.append_batch(mine[i:i + 10], timestamp=1_754_000_000_000, compression="gzip")
        expected += [(partition, offset, key, value) for offset, (key, value) in enumerate(mine)]
    output = str(tmp_path / "dump")
    assert main(["dump", "--segments", str(tmp_path / "logs"), "--output", output]) == 0
    assert f"wrote {len(records)} records" in capsys.readouterr().out
    df = read(spark, {"kind": "parquet", "path": output})
    assert df.schema == SOURCE_SCHEMA
    assert rows_of(df) == sorted(expected)
    assert df.where("compression = 'gzip' and batch_magic = 2").count() == len(records)


@pytest.mark.spark
def test_dump_refuses_an_existing_output_without_overwrite(tmp_path, capsys):
    (tmp_path / "dump").mkdir()
    (tmp_path / "dump" / "part.parquet").write_bytes(b"x")
    assert main(["dump", "--segments", str(tmp_path), "--output", str(tmp_path / "dump")]) == 2
    assert "already exists; choose a new directory or add --overwrite" in capsys.readouterr().err


def test_dump_never_prints_a_secret_from_a_malformed_kafka_option(capsys):
    assert main(["dump", "--bootstrap-server", "b:1", "--output", "/tmp/x",
                 "--kafka-option", "kafka.sasl.password"]) == 2
    assert main(["dump", "--bootstrap-server", "b:1", "--output", "/tmp/x",
                 "--kafka-option", "kafka.sasl.jaas.config"]) == 2
    err = capsys.readouterr().err
    assert "kafka.sasl.password=***" in err


@pytest.mark.broker
@pytest.mark.spark
def test_dump_of_a_live_topic_reads_back_every_record(spark, golden, kafka_bootstrap, tmp_path, capsys):
    records = golden_records(golden)
    topic = unique_topic()
    create_topic(kafka_bootstrap, topic, 2)
    placed = produce(kafka_bootstrap, topic, [(i % 2, key, value) for i, (key, value) in enumerate(records)])
    output = str(tmp_path / "dump")
    assert main(["dump", "--bootstrap-server", kafka_bootstrap, "--topic", topic, "--output", output,
                 "--max-records-per-partition", "100"]) == 0
    assert f"wrote {len(records)} records from {topic}" in capsys.readouterr().out
    df = read(spark, {"kind": "parquet", "path": output})
    assert rows_of(df) == sorted((p, o, key, value) for (p, o), (key, value) in zip(placed, records))
    assert {r["topic"] for r in df.select("topic").distinct().collect()} == {topic}
