"""``spark.readStream.format("kafka-python")``: a live cluster read in micro-batches where Spark's own kafka stream is
not on the classpath, as the incremental run falls back to it (the batch run falls back to the batch reader).
Every record comes back once, in micro-batches bounded by ``maxOffsetsPerTrigger``; a later run on the same
checkpoint reads only what was produced since."""

from __future__ import annotations

import pytest

from broker import create_topic, kafka_bootstrap, produce, unique_topic  # noqa: F401 (fixture)

pytestmark = [pytest.mark.broker, pytest.mark.spark]


def _drain(spark, bootstrap: str, topic: str, checkpoint: str, **options) -> tuple[list, list[int]]:
    """One ``Trigger.AvailableNow`` run of the stream: (rows read, rows per micro-batch)."""
    from offsets_audit.sources import register

    register(spark)
    rows: list = []
    sizes: list[int] = []

    def each(batch, _):
        got = [(r["partition"], r["offset"], bytes(r["key"]), None if r["value"] is None else bytes(r["value"]))
               for r in batch.collect()]
        rows.extend(got)
        sizes.append(len(got))

    stream = (spark.readStream.format("kafka-python").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).options(**options).load())
    stream.writeStream.foreachBatch(each).option("checkpointLocation", checkpoint) \
        .trigger(availableNow=True).start().awaitTermination()
    return sorted(rows), sizes


def test_the_stream_reads_every_record_once_and_then_only_new_ones(spark, kafka_bootstrap, tmp_path):
    topic = unique_topic("stream")
    create_topic(kafka_bootstrap, topic, 2)
    first = [(i % 2, f"k{i}".encode(), None if i == 3 else f"v{i}".encode()) for i in range(7)]
    placed = produce(kafka_bootstrap, topic, first)
    rows, sizes = _drain(spark, kafka_bootstrap, topic, str(tmp_path / "ck"), maxOffsetsPerTrigger="3")
    assert rows == sorted((p, o, k, v) for (p, o), (_, k, v) in zip(placed, first))
    assert len(sizes) >= 3 and max(sizes) <= 3

    more = [(1, b"k7", b"v7"), (0, b"k8", b"v8")]
    placed = produce(kafka_bootstrap, topic, more)
    rows, _ = _drain(spark, kafka_bootstrap, topic, str(tmp_path / "ck"))
    assert rows == sorted((p, o, k, v) for (p, o), (_, k, v) in zip(placed, more))


def test_the_incremental_read_falls_back_to_it_without_sparks_kafka_source(spark, kafka_bootstrap):
    from offsets_audit.replay.streaming import read_stream
    from offsets_audit.sources import spark_kafka_available

    if spark_kafka_available(spark):
        pytest.skip("Spark's kafka source is on this classpath")
    # Spark's own kafka stream would fail here with "Failed to find data source: kafka"
    df = read_stream(spark, {"kind": "kafka", "kafka.bootstrap.servers": kafka_bootstrap, "subscribe": "x"})
    assert df.isStreaming and df.columns[:2] == ["key", "value"]
