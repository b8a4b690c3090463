"""Read throughput of the live Kafka source: records/s of the pure kafka-python core and of ``kafka-python``.

    .venv/bin/python bench/read_kafka.py                        # a real Kafka broker (KRaft), 200k records
    .venv/bin/python bench/read_kafka.py --records 1000000 --cores 2
    KAFKA_BOOTSTRAP=broker:9092 .venv/bin/python bench/read_kafka.py   # a real cluster
    .venv/bin/python bench/read.py --kafka                      # after the segment figures

Records are the golden coordinator records cycled (offset commits, group metadata, tombstones) over four
partitions, produced in batches; each partition ends with one single-record batch.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 4


def golden_records() -> list[tuple[bytes, bytes | None]]:
    sys.path.insert(0, str(REPO / "tests"))
    from golden_files import GOLDEN, read_golden

    lines = [json.loads(line) for line in read_golden(GOLDEN / "records" / "records.jsonl").splitlines() if line]
    return [(base64.b64decode(r["key_b64"]), None if r["value_b64"] is None else base64.b64decode(r["value_b64"]))
            for r in lines]


def fill_topic(bootstrap: str, topic: str, count: int) -> int:
    """Produce ``count`` records (plus one closing record per partition); return how many were written."""
    from kafka import KafkaProducer

    sys.path.insert(0, str(REPO / "tests"))
    from broker import create_topic

    create_topic(bootstrap, topic, PARTITIONS)
    records = golden_records()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024,
                             max_request_size=8 << 20, acks=1)
    for i in range(count):
        key, value = records[i % len(records)]
        producer.send(topic, key=key, value=value, partition=i % PARTITIONS)
    producer.flush()
    for partition in range(PARTITIONS):
        producer.send(topic, key=b"closing", value=b"record", partition=partition).get(timeout=30)
    producer.close()
    return count + PARTITIONS


def bench_kafka(args, figures: dict | None = None) -> None:
    """The live-Kafka part of bench/read.py (``--kafka``); also runs alone. Fills ``figures`` with what it prints."""
    figures = {} if figures is None else figures
    from offsets_audit.sources.kafka import plan_ranges, read_range

    count = getattr(args, "records", None) or 200_000
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        broker = nullcontext(external)
    else:
        sys.path.insert(0, str(REPO / "tests"))
        from broker import real_broker

        broker = real_broker()
    with broker as bootstrap:
        topic = f"bench-coordinator-records-{int(time.time())}"
        started = time.perf_counter()
        total = fill_topic(bootstrap, topic, count)
        print(f"kafka: {total:,} records produced to {topic} ({PARTITIONS} partitions) at "
              f"{'KAFKA_BOOTSTRAP ' + external if external else 'Kafka ' + bootstrap} "
              f"in {time.perf_counter() - started:.1f} s")
        options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}

        started = time.perf_counter()
        ranges = plan_ranges(options)
        planned = sum(r.size for r in ranges)
        print(f"plan_ranges:                  {time.perf_counter() - started:>12.2f} s ({planned:,} offsets)")
        assert planned == total, (planned, total)

        started = time.perf_counter()
        read = sum(1 for offset_range in ranges for _ in read_range(options, offset_range))
        seconds = time.perf_counter() - started
        assert read == total, (read, total)
        figures.update(kafka_records=total, kafka_broker="external" if external else "kafka",
                       read_range_records_per_s=round(read / seconds))
        print(f"read_range (1 thread):        {read / seconds:>12,.0f} records/s  ({seconds:.1f} s)")

        if getattr(args, "skip_spark", False):
            return
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from offsets_audit.sources import read as read_source
        from offsets_audit.spark_session import get_spark

        cores = getattr(args, "cores", 2)
        spark = get_spark("bench-read-kafka", master=f"local[{cores}]")
        split = max(1, total // (cores * 2))
        df = read_source(spark, {"kind": "kafka", "reader": "kafka-python", **options,
                                 "maxRecordsPerPartition": split})
        started = time.perf_counter()
        row = df.selectExpr("count(*) AS n", "sum(length(value)) AS value_bytes").collect()[0]
        seconds = time.perf_counter() - started
        assert row.n == total, row
        figures.update(kafka_python_master=f"local[{cores}]", kafka_python_records_per_s=round(row.n / seconds))
        print(f"kafka-python (local[{cores}]):     {row.n / seconds:>12,.0f} records/s  ({seconds:.1f} s, "
              f"{df.rdd.getNumPartitions()} input partitions)")
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="records to produce")
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    parser.add_argument("--skip-spark", action="store_true")
    figures: dict = {}
    bench_kafka(parser.parse_args(argv), figures)
    from results import record  # bench/ is this script's folder, first on sys.path

    record("read_kafka", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
