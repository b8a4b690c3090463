"""Read throughput of the sources: records/s of the pure segment reader and of the ``kafka-segments`` Spark source.

    .venv/bin/python bench/read.py                 # ~200 MB of generated segments, both readers
    .venv/bin/python bench/read.py --mb 400 --skip-spark
    .venv/bin/python bench/read.py --skip-kafka    # without Kafka's decoder as the reference

The reference, measured in the same run over the same files: Kafka's own decoder, ``kafka-dump-log
--offsets-decoder --print-data-log`` (``DumpLogSegments`` of the default Kafka version, its jars from ``make kafka``)
writing to /dev/null. It reads AND decodes every record to JSON text, so it does more per record than
``read_segment`` (which hands out undecoded keys and values) and about what the read + decode of a job does. Its JVM's
start-up is timed on a one-batch segment and shown apart; the records/s figures leave it out. The ratio
``read_segment_vs_kafka_dump_log`` is per CPU second (the JVM's threads all counted).

Segments are generated once with ``SegmentWriter`` (cached in ``--dir``): four ``__consumer_offsets-N`` partitions,
~90% offset commits (OffsetCommit value v3) in batches of 1-20 records, the rest group-metadata-sized values and
tombstones, a few transactional batches with COMMIT/ABORT markers; codecs mixed none/lz4/zstd/snappy/gzip.

``bench_segments(args)`` is the segment part; a live-Kafka part plugs in beside it (``--kafka``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # kafka_jars, kafka_broker: Kafka's tools

CODECS = ["none"] * 8 + ["lz4"] * 4 + ["zstd"] * 3 + ["snappy"] * 3 + ["gzip"] * 2
PARTITIONS = 4


def offset_commit(group: str, topic: str, partition: int, offset: int, timestamp: int) -> tuple[bytes, bytes]:
    """An OffsetCommit key and value v3 (codec's encode_record when available, else packed by hand)."""
    try:
        from offsets_audit.codec.records import encode_record

        return encode_record(1, {"group": group, "topic": topic, "partition": partition},
                             {"offset": offset, "leaderEpoch": 7, "metadata": "", "commitTimestamp": timestamp}, 3)
    except Exception:
        g, t = group.encode(), topic.encode()
        key = struct.pack(">hh", 1, len(g)) + g + struct.pack(">h", len(t)) + t + struct.pack(">i", partition)
        value = struct.pack(">hqihq", 3, offset, 7, 0, timestamp)
        return key, value


def generate(directory: Path, megabytes: int, seed: int = 7) -> dict:
    """Write the benchmark segments (or reuse them when ``manifest.json`` says they match)."""
    from offsets_audit.sources.segment_writer import SegmentWriter

    manifest_path = directory / "manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("megabytes") == megabytes and manifest.get("seed") == seed:
            return manifest
    rng = random.Random(seed)
    groups = [f"group-{i}" for i in range(500)]
    topics = [f"topic-{i}" for i in range(40)]
    templates = {}
    target = megabytes * 1024 * 1024 // PARTITIONS
    records = batches = 0
    clock = 1754000000000
    started = time.perf_counter()
    for partition in range(PARTITIONS):
        writer = SegmentWriter.create(directory, partition, base_offset=0, partition_leader_epoch=3)
        producer_id = 1000 * (partition + 1)
        while writer.bytes_written < target:
            clock += rng.randint(0, 20)
            codec = rng.choice(CODECS)
            roll = rng.random()
            if roll < 0.9:
                group = rng.choice(groups)
                topic = rng.choice(topics)
                batch = []
                for p in range(rng.randint(1, 20)):
                    cache_key = (group, topic, p)
                    if cache_key not in templates:
                        templates[cache_key] = offset_commit(group, topic, p, 0, 0)
                    key, _ = templates[cache_key]
                    _, value = offset_commit(group, topic, p, rng.randint(0, 1 << 40), clock)
                    batch.append((key, value))
                transactional = roll < 0.02
                if transactional:
                    writer.append_batch(batch, clock, codec, producer_id, 0, transactional=True)
                    writer.append_control(rng.choice(["COMMIT", "COMMIT", "ABORT"]), producer_id, 0, 5, clock + 1)
                    producer_id += 1
                    batches += 1
                    records += 1
                else:
                    writer.append_batch(batch, clock, codec)
                records += len(batch)
            else:
                key = struct.pack(">h", 5) + rng.randbytes(40)
                value = None if rng.random() < 0.3 else struct.pack(">h", 0) + rng.randbytes(rng.randint(50, 400))
                batch = [(key, value) for _ in range(rng.randint(1, 4))]
                writer.append_batch(batch, clock, codec)
                records += len(batch)
            batches += 1
        writer.close()
    manifest = {"megabytes": megabytes, "seed": seed, "records": records, "batches": batches,
                "bytes": sum(p.stat().st_size for p in directory.rglob("*.log")),
                "generate_seconds": round(time.perf_counter() - started, 1)}
    manifest_path.write_text(json.dumps(manifest))
    return manifest


def _run_timed(command: Sequence[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child process and all its threads) of one command, output discarded."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(list(command), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[-4:])} failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def kafka_dump_log_command(segments: Sequence[Path], version: str | None = None) -> list[str]:
    """The ``java`` command line of ``kafka-dump-log --offsets-decoder --print-data-log`` over ``segments``."""
    import kafka_jars
    from kafka_broker import dump_log_invocation

    version = version or kafka_jars.DEFAULT_KAFKA_VERSION
    return kafka_jars.java_command(*dump_log_invocation(version, segments), version=version)


def kafka_decode(segments: Sequence[Path], records: int, version: str | None = None) -> dict:
    """Kafka's own decoder over ``segments`` (``records`` data and control records in all), timed.

    The JVM's start-up (class loading of the tool and its decoders) is what the same command costs on a segment of
    one small batch; it is timed first and taken out of the records/s figures, which are per wall second and per
    CPU second of the JVM (its JIT and GC threads included)."""
    from offsets_audit.sources.segment_writer import SegmentWriter

    with tempfile.TemporaryDirectory(prefix="kafka-decode-") as tmp:
        with SegmentWriter.create(tmp, 0) as writer:
            writer.append_batch([offset_commit("group-0", "topic-0", 0, 1, 1754000000000)], 1754000000000)
        startup_wall, startup_cpu = _run_timed(kafka_dump_log_command([writer.path], version))
    wall, cpu = _run_timed(kafka_dump_log_command(segments, version))
    decode_wall, decode_cpu = max(wall - startup_wall, 1e-9), max(cpu - startup_cpu, 1e-9)
    return {"kafka_dump_log_records_per_s": round(records / decode_wall),
            "kafka_dump_log_records_per_cpu_s": round(records / decode_cpu),
            "kafka_dump_log_s": round(wall, 2), "kafka_dump_log_cpu_s": round(cpu, 2),
            "kafka_jvm_startup_s": round(startup_wall, 2), "kafka_jvm_startup_cpu_s": round(startup_cpu, 2)}


def print_kafka(reference: dict) -> None:
    print(f"Kafka's decoder (kafka-dump-log): {reference['kafka_dump_log_records_per_s']:>12,.0f} records/s, "
          f"{reference['kafka_dump_log_records_per_cpu_s']:,.0f} per JVM CPU second "
          f"({reference['kafka_dump_log_s']:.1f} s, of which JVM start-up {reference['kafka_jvm_startup_s']:.1f} s)")


def bench_segments(args, figures: dict | None = None) -> None:
    """The segment part: fills ``figures`` with what it prints."""
    figures = {} if figures is None else figures
    from offsets_audit.sources.segments import list_segments, read_segment

    directory = Path(args.dir)
    manifest = generate(directory, args.mb)
    print(f"segments: {manifest['records']:,} records in {manifest['batches']:,} batches, "
          f"{manifest['bytes'] / 1e6:.0f} MB under {directory} (generated in {manifest['generate_seconds']} s)")

    started, cpu_started = time.perf_counter(), time.process_time()
    count = 0
    quarantine: list = []
    for path, partition in list_segments(directory):
        for _ in read_segment(path, partition, quarantine):
            count += 1
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    assert count == manifest["records"] and not quarantine, (count, quarantine[:1])
    figures.update(records=count, batches=manifest["batches"], megabytes=round(manifest["bytes"] / 1e6, 1),
                   read_segment_records_per_s=round(count / seconds),
                   read_segment_records_per_cpu_s=round(count / cpu_seconds),
                   read_segment_mb_per_s=round(manifest["bytes"] / 1e6 / seconds, 1))
    print(f"read_segment (1 thread):       {count / seconds:>12,.0f} records/s  "
          f"({manifest['bytes'] / 1e6 / seconds:.0f} MB/s, {seconds:.1f} s); {count / cpu_seconds:,.0f} per CPU second")
    if not getattr(args, "skip_kafka", False):
        reference = kafka_decode([path for path, _ in list_segments(directory)], count)
        figures.update(reference)
        # per CPU second: the machine's other work stretches wall times of both sides unevenly
        figures["read_segment_vs_kafka_dump_log"] = round(
            figures["read_segment_records_per_cpu_s"] / reference["kafka_dump_log_records_per_cpu_s"], 3)
        print_kafka(reference)

    if args.skip_spark:
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from offsets_audit.sources import register
    from offsets_audit.spark_session import get_spark

    spark = get_spark("bench-read", master=f"local[{args.cores}]", extra_conf={"spark.ui.enabled": "false"})
    register(spark)
    df = spark.read.format("kafka-segments").option("maxBytesPerPartition", str(args.split_mb * 1024 * 1024)) \
        .load(str(directory))
    started = time.perf_counter()
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS value_bytes").collect()[0]
    seconds = time.perf_counter() - started
    assert row.n == manifest["records"], row
    figures.update(spark_master=f"local[{args.cores}]", kafka_segments_records_per_s=round(row.n / seconds),
                   kafka_segments_mb_per_s=round(manifest["bytes"] / 1e6 / seconds, 1),
                   kafka_segments_input_partitions=df.rdd.getNumPartitions())
    print(f"kafka-segments (local[{args.cores}]):   {row.n / seconds:>12,.0f} records/s  "
          f"({manifest['bytes'] / 1e6 / seconds:.0f} MB/s, {seconds:.1f} s, "
          f"{df.rdd.getNumPartitions()} input partitions)")
    if "kafka_dump_log_records_per_s" in figures:
        figures["kafka_segments_vs_kafka_dump_log"] = round(
            figures["kafka_segments_records_per_s"] / figures["kafka_dump_log_records_per_s"], 3)
    spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/offsets-audit-bench-segments", help="where segments are generated")
    parser.add_argument("--mb", type=int, default=200, help="approximate size of the generated segments")
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    parser.add_argument("--split-mb", type=int, default=128, help="kafka-segments maxBytesPerPartition in MB")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--skip-kafka", action="store_true", help="leave out Kafka's decoder (the reference)")
    parser.add_argument("--kafka", action="store_true", help="also benchmark the live Kafka source (if available)")
    args = parser.parse_args(argv)
    figures: dict = {}
    bench_segments(args, figures)
    if args.kafka:
        from read_kafka import bench_kafka  # bench/read_kafka.py: the live-Kafka part

        bench_kafka(args, figures)
    from results import record  # bench/ is this script's folder, first on sys.path

    record("read", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
