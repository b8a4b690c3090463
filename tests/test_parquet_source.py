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

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def golden_rows(golden):
    lines = [json.loads(line) for line in (golden / "records" / "records.jsonl").read_text().splitlines() if line]
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
