"""Live Kafka source against a real Apache Kafka broker (the tests' own, or ``KAFKA_BOOTSTRAP``): every golden
coordinator record produced to explicit partitions comes back byte for byte, through the pure core and
through ``spark.read.format("kafka-python")``."""

from __future__ import annotations

import base64
import json

import pytest

from broker import create_topic, free_port, kafka_bootstrap, produce, unique_topic  # noqa: F401 (fixture)
from offsets_audit.errors import UserError
from offsets_audit.sources import read
from offsets_audit.sources.kafka import KafkaUnreachableError, OffsetRange, plan_ranges, read_range
from offsets_audit.sources.schema import SOURCE_SCHEMA
from golden_files import read_golden

pytestmark = pytest.mark.broker
PARTITIONS = 3


@pytest.fixture(scope="module")
def golden_topic(kafka_bootstrap, golden):
    """A 3-partition topic holding every golden record (record i on partition i % 3); returns what was placed."""
    lines = [json.loads(line) for line in read_golden(golden / "records" / "records.jsonl").splitlines() if line]
    records = [(i % PARTITIONS, base64.b64decode(r["key_b64"]),
                None if r["value_b64"] is None else base64.b64decode(r["value_b64"])) for i, r in enumerate(lines)]
    topic = unique_topic()
    create_topic(kafka_bootstrap, topic, PARTITIONS)
    placed = produce(kafka_bootstrap, topic, records)
    expected = sorted((p, o, key, value) for (p, o), (_, key, value) in zip(placed, records))
    assert any(value is None for *_, value in expected), "golden data should include tombstones"
    return {"bootstrap": kafka_bootstrap, "topic": topic, "expected": expected}


def base_options(golden_topic, **extra):
    return {"kafka.bootstrap.servers": golden_topic["bootstrap"], "subscribe": golden_topic["topic"], **extra}


def read_all(options):
    return sorted((r["partition"], r["offset"], r["key"], r["value"])
                  for offset_range in plan_ranges(options) for r in read_range(options, offset_range))


def test_end_offsets_equal_the_records_produced(golden_topic):
    ranges = plan_ranges(base_options(golden_topic))
    per_partition = {p: sum(1 for q, *_ in golden_topic["expected"] if q == p) for p in range(PARTITIONS)}
    assert {r.partition: (r.start, r.end) for r in ranges} == {p: (0, n) for p, n in per_partition.items()}


def test_core_reads_every_golden_record_earliest_to_latest(golden_topic):
    assert read_all(base_options(golden_topic)) == golden_topic["expected"]


def test_core_reads_the_same_records_when_long_ranges_are_split(golden_topic):
    options = base_options(golden_topic, maxRecordsPerPartition="7")
    assert all(r.size <= 7 for r in plan_ranges(options))
    assert read_all(options) == golden_topic["expected"]


def test_core_reads_exactly_the_per_partition_json_offsets(golden_topic):
    topic = golden_topic["topic"]
    options = base_options(golden_topic, startingOffsets=json.dumps({topic: {"0": 5, "1": -2, "2": 70}}),
                           endingOffsets=json.dumps({topic: {"0": 20, "1": 3, "2": -1}}))
    bounds = {0: (5, 20), 1: (0, 3), 2: (70, 10**9)}
    expected = [r for r in golden_topic["expected"] if bounds[r[0]][0] <= r[1] < bounds[r[0]][1]]
    assert read_all(options) == expected


def test_core_rows_carry_topic_and_a_create_time_timestamp(golden_topic):
    options = base_options(golden_topic)
    (row,) = list(read_range(options, OffsetRange(golden_topic["topic"], 1, 0, 1)))
    assert row["topic"] == golden_topic["topic"]
    assert row["timestampType"] == 0 and row["timestamp"].year >= 2024


def test_dead_bootstrap_gives_one_line_error():
    dead = f"127.0.0.1:{free_port()}"
    options = {"kafka.bootstrap.servers": dead, "fetchRetries": "2", "retryBackoffMs": "50",
               "kafka.request.timeout.ms": "1000"}
    with pytest.raises(KafkaUnreachableError) as caught:
        plan_ranges(options)
    assert str(caught.value).splitlines() == [str(caught.value)]
    assert str(caught.value).startswith(f"could not reach Kafka at {dead} after 2 tries")


def spark_rows(df):
    return sorted((r["partition"], r["offset"], None if r["key"] is None else bytes(r["key"]),
                   None if r["value"] is None else bytes(r["value"])) for r in df.collect())


@pytest.mark.spark
def test_spark_kafka_python_source_reads_every_golden_record(spark, golden_topic):
    df = spark.read.format("kafka-python").options(**base_options(golden_topic, maxRecordsPerPartition="50",
                                                                 rowsPerBatch="16")).load()
    assert df.schema == SOURCE_SCHEMA
    assert spark_rows(df) == golden_topic["expected"]


@pytest.mark.spark
def test_spark_kafka_python_source_reads_per_partition_json_offsets(spark, golden_topic):
    topic = golden_topic["topic"]
    df = (spark.read.format("kafka-python")
          .options(**base_options(golden_topic))
          .option("startingOffsets", json.dumps({topic: {"0": 10, "1": -2, "2": -2}}))
          .option("endingOffsets", json.dumps({topic: {"0": -1, "1": 2, "2": 1}}))
          .load())
    bounds = {0: (10, 10**9), 1: (0, 2), 2: (0, 1)}
    assert spark_rows(df) == [r for r in golden_topic["expected"] if bounds[r[0]][0] <= r[1] < bounds[r[0]][1]]


@pytest.mark.spark
def test_read_entry_point_reads_kafka_through_kafka_python_here(spark, golden_topic):
    df = read(spark, {"kind": "kafka", **base_options(golden_topic)})
    assert df.schema == SOURCE_SCHEMA
    assert spark_rows(df) == golden_topic["expected"]


@pytest.mark.spark
def test_read_entry_point_fixes_end_offsets_when_the_read_is_planned(spark, kafka_bootstrap):
    topic = unique_topic()
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, [(0, b"k1", b"v1"), (1, b"k2", None)])
    df = read(spark, {"kind": "kafka", "kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic})
    produce(kafka_bootstrap, topic, [(0, b"k3", b"v3"), (1, b"k4", b"v4")])
    assert spark_rows(df) == [(0, 0, b"k1", b"v1"), (1, 0, b"k2", None)]


@pytest.mark.spark
def test_read_entry_point_with_a_dead_bootstrap_fails_on_the_driver_with_one_line(spark):
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(UserError, match=f"^could not reach Kafka at {dead} after 1 try"):
        read(spark, {"kind": "kafka", "kafka.bootstrap.servers": dead, "fetchRetries": 1,
                     "kafka.request.timeout.ms": 1000})
