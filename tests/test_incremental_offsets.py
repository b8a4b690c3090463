"""The incremental offset rules (``audit.offsets_resumed``) against the batch ones, micro-batch by micro-batch.

Kafka's consumer-group history with the offset faults of ``test_offsets_parity.transactional_tail`` (backwards
commits, a commit by no owner, aborted, cleared and replaced transactions, transactions pending too long, one
never resolved) is cut into micro-batches of a few records, as the ``records`` query would read it, each resolved
against the offsets snapshot before it (``resolve_commits``, ``commit_log_of_batch``); runs of two micro-batches
then judge their commits with the state the previous run left. The findings of every run plus the last run's
provisional ones are the batch run's offset findings, ids included. Markers, tombstones and the second commit
of a replaced transaction land in other micro-batches and other runs than the commits they decide.
"""
from __future__ import annotations

import json
import os

import pytest

from replay_support import source_df
from test_offsets_parity import transactional_tail

#: Many small Spark jobs (about 2 minutes on 2 cores; 9 before its runs planned over cached leaves): with the
#: other long parity runs, behind OFFSETS_AUDIT_FULL_PARITY=1. The default suite covers the offset rules across
#: runs in test_incremental_parity.
pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(not os.environ.get("OFFSETS_AUDIT_FULL_PARITY"),
                                 reason="set OFFSETS_AUDIT_FULL_PARITY=1 for the micro-batch offset-rule parity")]

TOPIC_IDS = {"orders": "tdSMm_pWjo9nwTbCqMDntA", "payments": "YEmEmknrDMNB0wEESWyKEA"}


def _records():
    from replay_support import HISTORIES, load_expected

    rows = load_expected(HISTORIES / "history-consumer-group-00000000000000000000.expected.jsonl")
    for r in rows:
        r["partition"] = 0
    return rows + transactional_tail(0, rows[-1]["offset"] + 1, rows[-1]["timestamp"])


def _rows(df):
    return sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str) for r in df.collect())


@pytest.mark.parametrize("per_batch", [7])
def test_runs_of_micro_batches_find_what_one_batch_run_finds(spark, per_batch):
    from pyspark.sql import functions as F

    from offsets_audit.audit.offsets_resumed import OFFSET_STATE_DDLS, empty_state, resumed_offset_findings
    from offsets_audit.audit.offsets_spark import OFFSET_RULES, TIMELINE_DDL, commit_events
    from offsets_audit.audit.spark import EVENT_COLUMNS, audit, walk_groups
    from offsets_audit.codec.spark import decode, split
    from offsets_audit.config import load_settings
    from offsets_audit.replay import spark as replay_spark
    from offsets_audit.replay.commit_log import offsets_snapshot, resolve_commits
    from offsets_audit.replay.streaming import commit_log_of_batch
    from offsets_audit.replay.spark import OFFSETS_STATE_DDL

    config = load_settings().replace(topic_ids=TOPIC_IDS)
    records = _records()
    decoded, _ = split(decode(source_df(spark, records)))
    decoded = decoded.persist()
    tables = replay_spark.replay(decoded)
    expected = audit(tables, None, config).findings.filter(F.col("rule").isin(*OFFSET_RULES))
    rules = {r["rule"] for r in expected.select("rule").distinct().collect()}
    assert rules == set(OFFSET_RULES)

    # The batch walk's timeline and events, cut by position: the resumable walk emits the same rows
    # (tests/test_incremental_audit_state.py).
    events = tables.group_events.select(*EVENT_COLUMNS).filter(F.col("group_id").isNotNull()).persist()
    clock = events.select("group_id", "partition", "offset", "timestamp").unionByName(
        commit_events(replay_spark.offset_commits(decoded)))
    end = clock.agg(F.max("timestamp")).first()[0]
    walked = walk_groups(events, config, end)
    columns = ["group_id", "kind", *[c.split()[0] for c in TIMELINE_DDL.split(", ")]]
    first_event = events.groupBy("group_id").agg(F.min("offset").alias("_first"))
    timeline = (walked.filter(F.col("kind").isin("context", "ownership")).select(*columns)
                .join(first_event, "group_id")
                .withColumn("_at", F.coalesce(F.col("offset"), F.col("_first"))).persist())

    # Micro-batches of ``per_batch`` records over the tail and a little before it; runs of two micro-batches.
    tail_start = len(records) - 19
    cuts = [0, tail_start - 4] + list(range(tail_start, len(records), per_batch)) + [len(records)]
    cuts = sorted(set(cuts))
    offsets = [r["offset"] for r in records] + [records[-1]["offset"] + 1]
    bounds = [(offsets[a], offsets[b]) for a, b in zip(cuts, cuts[1:])]
    snapshot, state = None, empty_state(spark)
    found, provisional = [], None
    for run in range(0, len(bounds), 2):
        logs = []
        for batch_id in range(run, min(run + 2, len(bounds))):
            low, high = bounds[batch_id]
            batch = decoded.filter((F.col("offset") >= low) & (F.col("offset") < high))
            log = resolve_commits(batch, snapshot)
            snapshot = spark.createDataFrame(offsets_snapshot(log).collect(), OFFSETS_STATE_DDL)
            rows = commit_log_of_batch(log).withColumn("batch", F.lit(batch_id).cast("long"))
            logs.append(spark.createDataFrame(rows.collect(), rows.schema))
        run_log = logs[0] if len(logs) == 1 else logs[0].unionByName(logs[1])
        low, high = bounds[run][0], bounds[min(run + 1, len(bounds) - 1)][1]
        in_run = (F.col("offset") >= low) & (F.col("offset") < high)
        run_events = events.filter(in_run).select("group_id", "partition", "offset", "timestamp")
        run_timeline = timeline.filter((F.col("_at") >= low) & (F.col("_at") < high)).select(*columns)
        cached: list = []  # what the run persists, freed once its outputs are written, as the job does
        completed, provisional, state = resumed_offset_findings(run_log, run_events, run_timeline, state,
                                                                    config.rules, config.topic_ids, end,
                                                                    cached=cached)
        # the run's outputs and the state the next run reads back from storage, as the checkpoint does
        found.append(spark.createDataFrame(completed.collect(), completed.schema))
        provisional = spark.createDataFrame(provisional.collect(), provisional.schema)
        state = {name: spark.createDataFrame(df.collect(), OFFSET_STATE_DDLS[name]) for name, df in state.items()}
        for df in cached:
            df.unpersist()
    got = found[0]
    for df in found[1:] + [provisional]:
        got = got.unionByName(df)
    got = got.withColumn("time", F.timestamp_millis(F.col("time")))
    assert _rows(got) == _rows(expected)
