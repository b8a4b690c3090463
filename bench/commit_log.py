"""Offset-commit columns for the commit log: parsing ``value_json`` (``from_json``, the old way) against the
codec's typed ``offset_commit_value`` (now), alternated in one local[2] SparkSession on the same decoded input.

Each round times the commit columns alone and the whole commit log (``resolve_commits``), each computed with
a noop write (every column); round 0 warms the JVM up. Checks first that both give the same rows.

    .venv/bin/python bench/commit_log.py [--dir /tmp/bench-commit-log] [--rounds 3]

Figures depend on the machine's load: compare the two lines of one round.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

#: The OffsetCommitValue fields the commit log kept when it parsed value_json.
_VALUE_JSON_DDL = "offset long, leaderEpoch int, metadata string, commitTimestamp long, topicId string"


def commit_records_from_json(decoded):
    """The commit log's commit columns as they were built before the codec typed them (the reference)."""
    from pyspark.sql import functions as F

    from offsets_audit.codec.offset_commits import OFFSET_COMMIT_TYPE_IDS

    commits = decoded.filter(F.col("error_code").isNull() & F.col("record_type").isin(*OFFSET_COMMIT_TYPE_IDS)
                             & ~F.coalesce(F.col("is_control"), F.lit(False)))
    timestamp = (F.unix_micros(F.col("timestamp")) / 1000).cast("long")
    return commits.withColumn("_v", F.from_json("value_json", _VALUE_JSON_DDL)).select(
        "group_id", F.col("topic_name").alias("topic"), F.col("topic_partition").cast("int").alias("topic_partition"),
        F.col("partition").cast("int").alias("record_partition"), F.col("offset").cast("long").alias("record_offset"),
        timestamp.alias("timestamp"), F.coalesce(F.col("producer_id"), F.lit(-1)).cast("long").alias("producer_id"),
        F.col("value").isNull().alias("is_tombstone"), F.col("_v.offset").alias("committed_offset"),
        F.coalesce(F.col("_v.leaderEpoch"), F.lit(-1)).alias("committed_leader_epoch"),
        F.coalesce(F.col("_v.metadata"), F.lit("")).alias("metadata"),
        F.col("_v.commitTimestamp").alias("commit_timestamp"), F.col("_v.topicId").alias("topic_id"))


def _seconds(df) -> float:
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/bench-commit-log", help="simulated history (kept and reused)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from offsets_audit.codec import spark as codec_spark
    from offsets_audit.replay import commit_log
    from offsets_audit.simulate import FAULT_KINDS, simulate
    from offsets_audit.sources import read
    from offsets_audit.spark_session import get_spark

    root = Path(args.dir)
    if not (root / "segments").exists():
        simulate(root, groups=100, hours=0.3, seed=11, partitions=50, faults=list(FAULT_KINDS),
                 formats=("segments",), workers=2)
    spark = get_spark("bench-commit-log", master="local[2]",
                      extra_conf={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"})
    try:
        decoded = codec_spark.decode(read(spark, {"kind": "segments", "path": str(root / "segments")})).persist()
        print(f"records {decoded.count():,}, offset commits {decoded.filter('record_type in (0, 1)').count():,}")
        typed = commit_log.commit_records
        assert sorted(commit_records_from_json(decoded).collect()) == sorted(typed(decoded).collect())
        print("the commit columns from value_json and from the typed column are equal")
        figures: dict = {"records": decoded.count(), "rounds": []}
        for round_ in range(args.rounds):
            for name, build in (("from_json (before)", commit_records_from_json), ("typed (now)", typed)):
                commit_log.commit_records = build  # resolve_commits looks it up at call time
                columns, whole = _seconds(build(decoded)), _seconds(commit_log.resolve_commits(decoded))
                print(f"round {round_}: {name:<20} commit columns {columns:6.1f} s, whole commit log {whole:6.1f} s, "
                      f"load average {os.getloadavg()[0]:.1f}", flush=True)
                figures["rounds"].append({"round": round_, "way": name.split()[0],
                                          "commit_columns_s": round(columns, 2), "commit_log_s": round(whole, 2)})
        commit_log.commit_records = typed
        from results import record  # bench/ is this script's folder, first on sys.path

        record("commit_log", figures)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
