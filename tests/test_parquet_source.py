"""Parquet dumps and the single source entry point ``offsets_audit.sources.read``."""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from offsets_audit.errors import UserError
from offsets_audit.sources import option_text, read, spark_kafka_available
from offsets_audit.sources.parquet import missing_columns
from offsets_audit.sources.schema import KAFKA_COLUMNS, SOURCE_SCHEMA
from golden_files import read_golden

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def golden_rows(golden):
    lines = [json.loads(line) for line in read_golden(golden / "records" / "records.jsonl").splitlines() if line]
    start = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
    rows = []
    for i, r in enumerate(lines):
        row = dict.fromkeys(SOURCE_SCHEMA.fieldNames())
        row.update(key=base64.b64decode(r["key_b64"]),
                   value=None if r["value_b64"] is None else base64.b64decode(r["value_b64"]),
                   topic="__consumer_offsets", partition=i % 3, offset=i // 3,
                   timestamp=start + dt.timedelta(seconds=i), timestampType=0)
        rows.append(row)
    return rows


@pytest.fixture(scope="module")
def golden_df(spark, golden_rows):
    return spark.createDataFrame([tuple(r.values()) for r in golden_rows], SOURCE_SCHEMA)


def test_required_columns_are_key_value_partition_offset():
    assert missing_columns(["key", "offset", "topic"]) == ["value", "partition"]
    assert missing_columns(SOURCE_SCHEMA.fieldNames()) == []


def test_a_dump_in_source_schema_reads_back_unchanged(spark, golden_df, tmp_path):
    path = str(tmp_path / "dump")
    golden_df.write.partitionBy("partition").parquet(path)
    df = read(spark, {"kind": "parquet", "path": path})
    assert df.schema == SOURCE_SCHEMA
    assert_df_equality(df, golden_df, ignore_row_order=True)


def test_a_dump_of_spark_kafka_columns_gets_null_batch_columns(spark, golden_df, tmp_path):
    path = str(tmp_path / "kafka-columns")
    golden_df.select(*KAFKA_COLUMNS).write.parquet(path)
    df = read(spark, {"kind": "parquet", "path": path})
    assert df.schema == SOURCE_SCHEMA
    assert_df_equality(df, golden_df, ignore_row_order=True)


def test_extra_columns_are_kept_after_source_schema(spark, golden_df, tmp_path):
    path = str(tmp_path / "extra")
    golden_df.select("key", "value", "partition", "offset", F.lit("eu-1").alias("cluster")).write.parquet(path)
    df = read(spark, {"kind": "parquet", "path": path})
    assert df.columns == SOURCE_SCHEMA.fieldNames() + ["cluster"]
    assert df.where("cluster = 'eu-1' and topic is null and timestamp is null").count() == golden_df.count()


def test_missing_required_columns_are_named_with_the_fix(spark, golden_df, tmp_path):
    path = str(tmp_path / "no-offsets")
    golden_df.select("key", "value").write.parquet(path)
    with pytest.raises(UserError, match="has no columns partition, offset.*offsets-audit dump"):
        read(spark, {"kind": "parquet", "path": path})


def test_a_path_that_does_not_exist_is_a_user_error(spark, tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        read(spark, {"kind": "parquet", "path": str(tmp_path / "nowhere")})
    with pytest.raises(UserError, match="does not exist"):
        read(spark, {"kind": "segments", "path": str(tmp_path / "nowhere")})


@pytest.mark.parametrize("kind", ["parquet", "segments"])
def test_a_missing_path_names_the_key(spark, kind):
    with pytest.raises(UserError, match=f"the {kind} source has no path; set path"):
        read(spark, {"kind": kind})


@pytest.mark.parametrize("config", [{"kind": "csv", "path": "x"}, {"path": "x"}])
def test_an_unknown_kind_names_the_choices(spark, config):
    with pytest.raises(UserError, match="kind .* is unknown; set source kind to kafka, parquet or segments"):
        read(spark, config)


def test_an_unknown_kafka_reader_names_the_choices(spark):
    with pytest.raises(UserError, match="auto, spark or kafka-python"):
        read(spark, {"kind": "kafka", "reader": "jdbc", "kafka.bootstrap.servers": "b:1"})


def test_spark_kafka_source_is_detected_as_absent_on_this_classpath(spark):
    assert spark_kafka_available(spark) is False


def test_option_values_from_yaml_become_spark_option_text():
    assert option_text({"t": {"0": 5}}) == '{"t": {"0": 5}}'
    assert option_text(False) == "false"
    assert option_text(500) == "500"


class FakeSpark:
    """Records what ``read`` asks of ``spark.read``; ``load`` returns Spark Kafka-source rows or fails like
    a session without the kafka jar. No ``_jvm``, like Spark Connect."""

    def __init__(self, spark, has_kafka: bool):
        self.spark, self.has_kafka, self.seen = spark, has_kafka, {}
        self.settings: dict = {}

    @property
    def conf(self):
        return self

    def set(self, key, value):
        self.settings[key] = value

    @property
    def _jvm(self):
        raise AttributeError("Spark Connect has no JVM")

    @property
    def version(self):
        return self.spark.version

    @property
    def read(self):
        return self

    def format(self, name):
        self.seen["format"] = name
        return self

    def options(self, **options):
        self.seen["options"] = options
        return self

    def load(self):
        if not self.has_kafka:
            raise RuntimeError("[DATA_SOURCE_NOT_FOUND] Failed to find the data source: kafka.")
        row = (b"k", b"v", "__consumer_offsets", 3, 7, dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc), 0)
        return self.spark.createDataFrame([row], "key binary, value binary, topic string, partition int, "
                                                 "offset long, timestamp timestamp, timestampType int")


def test_spark_kafka_source_gets_the_audit_defaults_and_spark_option_names(spark, monkeypatch):
    """Spark's reader is handed the partitions and offsets the kafka-python reader's own parser resolves on the
    driver (one snapshot, an internal topic assigned rather than subscribed), the isolation level as a consumer
    setting, and the session is set to the consumer-based offset reader, the one that reads internal topics."""
    import offsets_audit.sources.kafka as kafka

    seen_options = {}

    def resolve(config):
        seen_options.update(starting=config.starting_offsets, isolation=config.isolation_level)
        return {("__consumer_offsets", 0): (5, 9), ("__consumer_offsets", 1): (0, 3)}

    monkeypatch.setattr(kafka, "resolve_offsets", resolve)
    fake = FakeSpark(spark, has_kafka=True)
    df = read(fake, {"kind": "kafka", "kafka.bootstrap.servers": "b:1", "fetchRetries": 5, "rowsPerBatch": 10,
                     "startingOffsets": {"__consumer_offsets": {"0": 5}}, "maxRecordsPerPartition": 40})
    assert fake.seen["format"] == "kafka"
    assert fake.seen["options"] == {
        "kafka.bootstrap.servers": "b:1", "kafka.isolation.level": "read_committed", "fetchOffset.numRetries": "5",
        "maxRecordsPerPartition": "40", "assign": '{"__consumer_offsets": [0, 1]}',
        "startingOffsets": '{"__consumer_offsets": {"0": 5, "1": 0}}',
        "endingOffsets": '{"__consumer_offsets": {"0": 9, "1": 3}}'}
    assert seen_options["isolation"] == "read_committed"
    assert fake.settings == {"spark.sql.streaming.kafka.useDeprecatedOffsetFetching": "true"}
    assert df.schema == SOURCE_SCHEMA
    assert df.first()["offset"] == 7


def test_without_the_kafka_jar_on_spark_connect_the_read_falls_back_to_kafka_python(spark, monkeypatch):
    import offsets_audit.sources as sources

    fake = FakeSpark(spark, has_kafka=False)
    monkeypatch.setattr(sources, "_read_kafka_python", lambda session, options: ("kafka-python", options))
    assert read(fake, {"kind": "kafka", "kafka.bootstrap.servers": "b:1"}) == (
        "kafka-python", {"kafka.bootstrap.servers": "b:1"})
