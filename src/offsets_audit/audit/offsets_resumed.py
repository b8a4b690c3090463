"""The offset rules of an incremental run: this run's commits against the state the earlier runs left.

The batch audit runs the offset rules (``offsets_spark.offset_findings``) over the whole resolved commit log and
the whole timeline of every group. An incremental run has only what is new (the commit-log rows its records
micro-batches added, ``replay.streaming.commit_log_of_batch``, and the timeline rows its fold micro-batches
emitted) plus a small state the previous run left (``OFFSET_STATE_DDLS``), and feeds the same SQL:

* ``offset_committed_backwards``: the lag per key is already right: each micro-batch resolves its commits against
  the offsets snapshot before it (the last applied commit since the key's last tombstone), so
  ``previous_committed_offset`` of a key's first new commit is the earlier run's winner. "Had members" comes
  from the group's context in force, seeded with the context at the end of the previous run.
* ``offset_commit_by_non_owner``: the same context seed, the ownership in force at the end of the previous run
  (the owned (topic id, partition) of each group), and the first topic id each group's commits named
  (``topic_ids``): a topic named before this run keeps its earlier id.
* ``transactional_offset_pending_too_long``: the rule tracks the first commit of each (key, producer)
  transaction until its marker (or the tombstone clearing it). Transactions still open at the end of a run are
  kept (``open_txn``: first commit, last pending commit, whether it already fired); this run's transactions are
  rebuilt from its commits (a commit replaced by a later one of its producer belongs to the transaction of the
  first commit after it that was not replaced), an open one continues the earlier run's, and each transaction
  not fired before is judged once against this run's clock. One still open at the end of the run that would
  fire only because the log ends here is provisional (``GroupAudit.finish``'s counterpart): the next run
  replaces it.

So the findings of runs 1..n plus the provisional ones of run n are the batch run's, ids included
(``tests/test_incremental_parity.py``). Cost: this run's commits, timeline rows and transactions plus the state
(O(groups + keys with an open transaction + topics per group)), never the history.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

from offsets_audit.settings import RuleSettings

from .offsets_spark import TIMELINE_DDL, commit_events, offset_findings

#: The state one run leaves for the next (``PATH/offset_rules/run=<run_id>/<name>`` in the checkpoint).
OFFSET_STATE_DDLS = {
    # kind = context (the group's context at the end of the run, seq -2), ownership (an owned (topic id,
    # partition), seq -2), start (the group's first context row, seq -1: the group type the pending rule reports)
    "timeline": "group_id string, kind string, " + TIMELINE_DDL,
    "topic_ids": "group_id string, topic string, record_partition int, record_offset long, topic_id string",
    "open_txn": ("group_id string, topic string, topic_partition int, producer_id long, first_partition int, "
                 "first_offset long, first_timestamp long, last_partition int, last_offset long, fired boolean"),
}
_TIMELINE_COLUMNS = ["group_id", "kind", *[c.split()[0] for c in TIMELINE_DDL.split(", ")]]
_KEY = ["group_id", "topic", "topic_partition", "producer_id"]
#: Before every position of the log (the seeds of a run come first in the rules' per-group windows).
_NEVER = -(2 ** 62)


def empty_state(spark) -> dict:
    """The state before the first run."""
    return {name: spark.createDataFrame([], ddl) for name, ddl in OFFSET_STATE_DDLS.items()}


def _only(rules: Mapping[str, RuleSettings], *kept: str) -> dict[str, RuleSettings]:
    """``rules`` with every offset rule but ``kept`` switched off."""
    from .offsets_spark import OFFSET_RULES

    return {**rules, **{r: dataclasses.replace(rules[r], enabled=rules[r].enabled and r in kept) for r in OFFSET_RULES}}


def resumed_offset_findings(run_log, group_times, timeline, state: dict, rules: Mapping[str, RuleSettings],
                                topic_ids: Mapping[str, str], end_time_ms: int | None, *,
                                cached: list | None = None):
    """``(findings, provisional, next_state)``: finding rows (``model.FINDING_ROW_DDL``) of the offset rules
    completed by this run, those that hold only because the log ends at ``end_time_ms``, and the state for the
    next run.

    ``run_log``: this run's commit-log rows (``COMMIT_LOG_DDL`` plus ``batch``; None when it has none);
    ``group_times``: (group_id, partition, offset, timestamp) of this run's group events; ``timeline``: this run's
    timeline rows (``group_id``, ``kind`` = context|ownership, ``TIMELINE_DDL``); ``state``: the previous run's
    (``OFFSET_STATE_DDLS``; ``empty_state`` for the first run). What it persists (read by the findings and by
    ``next_state``) is appended to ``cached``, for the caller to unpersist once both are written; without it
    nothing is persisted."""
    from pyspark.sql import functions as F

    spark = timeline.sparkSession
    if run_log is None:
        from offsets_audit.replay.commit_log import COMMIT_LOG_DDL

        run_log = spark.createDataFrame([], COMMIT_LOG_DDL + ", batch long")
    # A pending commit carried in from an earlier micro-batch and decided in this one is this run's news at its
    # marker (applied there, a tick of the group's clock); its record was counted where it was read.
    news = run_log.withColumn("was_carried", F.col("carried")).withColumn("carried", F.lit(False))
    seeds = state["timeline"]
    findings = []

    commit_rules = _only(rules, "offset_committed_backwards", "offset_commit_by_non_owner")
    seeded_ids = state["topic_ids"].select(
        "group_id", "topic", "record_partition", "record_offset", "topic_id", F.lit(False).alias("carried"),
        F.lit(False).alias("applied"), F.lit("committed").alias("outcome"))
    commit_timeline = timeline.unionByName(seeds.filter(F.col("kind").isin("context", "ownership")))
    found = offset_findings(news.unionByName(seeded_ids, allowMissingColumns=True), group_times, commit_timeline,
                            commit_rules, topic_ids, end_time_ms, cached=cached)
    if found is not None:
        findings.append(found)

    transactions = _transactions(news, state["open_txn"])
    pending_rule = _only(rules, "transactional_offset_pending_too_long")
    provisional = None
    early = None
    if pending_rule["transactional_offset_pending_too_long"].enabled:
        judged = _as_commit_log(transactions.filter(~F.col("fired")))
        clock = group_times.unionByName(commit_events(news).filter(F.col("group_id").isNotNull()))
        starts = timeline.filter((F.col("kind") == "context") & (F.col("seq") == -1)).unionByName(
            seeds.filter(F.col("kind") == "start").withColumn("kind", F.lit("context")))
        # A row per transaction already, a micro-batch's few: the pending rule's hot-block prefilter would add jobs.
        early = offset_findings(judged, clock, starts, pending_rule, topic_ids, _NEVER, cached=cached,
                                hot_blocks_only=False)
        if cached is not None:
            early = early.persist()
            cached.append(early)
        at_end = offset_findings(judged, clock, starts, pending_rule, topic_ids, end_time_ms, cached=cached,
                                 hot_blocks_only=False)
        provisional = at_end.join(early.select("id"), "id", "left_anti")
        findings.append(early)
    result = None
    for df in findings:
        result = df if result is None else result.unionByName(df)
    next_state = {
        "timeline": _next_timeline(seeds, timeline),
        "topic_ids": _next_topic_ids(news, state["topic_ids"]),
        "open_txn": _next_open(transactions, early),
    }
    return result, provisional, next_state


def _transactions(news, open_txn):
    """Every transaction this run's commits belong to or an earlier run left open: its key and producer, first
    commit (position, time), last commit, resolution (``resolved_offset``, None while open), ``open`` and
    ``fired`` (the rule already reported it)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    txn = news.filter(F.col("outcome").startswith("txn_"))
    commit = Window.partitionBy("group_id", "topic", "topic_partition", "record_partition", "record_offset")
    # A commit's last word in this run: the newest micro-batch that decided it (its record time from the
    # micro-batch that read it; none for a commit read by an earlier run).
    latest = (txn.withColumn("_ts", F.max(F.when(~F.col("was_carried"), F.col("timestamp"))).over(commit))
              .withColumn("_last", F.max("batch").over(commit))
              .filter(F.col("batch") == F.col("_last"))
              .select(*_KEY, "record_partition", "record_offset", F.col("_ts").alias("timestamp"), "outcome",
                      "resolved_offset"))
    # A replaced commit belongs to the transaction of the first commit of its (key, producer) after it that
    # was not replaced (the pending map holds one commit per key and producer until the marker).
    later_first = Window.partitionBy(*_KEY).orderBy(F.col("record_partition").desc(), F.col("record_offset").desc()) \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    ends = F.when(F.col("outcome") != "txn_replaced", F.struct(
        F.col("record_partition").alias("p"), F.col("record_offset").alias("o"), "resolved_offset", "outcome"))
    members = latest.withColumn("_end", F.last(ends, ignorenulls=True).over(later_first))
    earlier = open_txn.select(*_KEY, F.col("last_partition").alias("record_partition"),
                              F.col("last_offset").alias("record_offset"),
                              F.struct("first_partition", "first_offset", "first_timestamp", "fired").alias("_earlier"))
    members = members.join(earlier, [*_KEY, "record_partition", "record_offset"], "left")
    first_new = F.min_by(F.struct(F.col("record_partition").alias("first_partition"),
                                  F.col("record_offset").alias("first_offset"),
                                  F.col("timestamp").alias("first_timestamp")),
                         F.when(F.col("timestamp").isNotNull(), F.col("record_offset")))
    touched = (members.groupBy(*_KEY, "_end")
               .agg(first_new.alias("_new"), F.max("_earlier").alias("_earlier"),
                    F.max(F.struct("record_partition", "record_offset")).alias("_newest"))
               .select(*_KEY,
                       F.coalesce(F.col("_earlier.first_partition"), F.col("_new.first_partition")).alias("first_partition"),
                       F.coalesce(F.col("_earlier.first_offset"), F.col("_new.first_offset")).alias("first_offset"),
                       F.coalesce(F.col("_earlier.first_timestamp"), F.col("_new.first_timestamp")).alias("first_timestamp"),
                       F.coalesce(F.col("_end.p"), F.col("_newest.record_partition")).alias("last_partition"),
                       F.coalesce(F.col("_end.o"), F.col("_newest.record_offset")).alias("last_offset"),
                       F.col("_end.resolved_offset").alias("resolved_offset"),
                       F.coalesce(F.col("_end.outcome"), F.lit("txn_pending")).alias("outcome"),
                       F.coalesce(F.col("_earlier.fired"), F.lit(False)).alias("fired"))
               .filter(F.col("first_offset").isNotNull()))
    untouched = open_txn.join(latest.select(*_KEY, F.col("record_partition").alias("last_partition"),
                                            F.col("record_offset").alias("last_offset")),
                              [*_KEY, "last_partition", "last_offset"], "left_anti") \
        .withColumn("resolved_offset", F.lit(None).cast("long")).withColumn("outcome", F.lit("txn_pending"))
    every = touched.unionByName(untouched.select(*touched.columns))
    return every.withColumn("open", F.col("outcome") == "txn_pending")


def _as_commit_log(transactions):
    """One commit-log row per transaction, at its first commit: what ``offsets_spark``'s pending rule tracks."""
    from pyspark.sql import functions as F

    from offsets_audit.replay.commit_log import COMMIT_LOG_DDL

    row = transactions.select(
        "group_id", "topic", "topic_partition", "producer_id", F.col("first_partition").alias("record_partition"),
        F.col("first_offset").alias("record_offset"), F.col("first_timestamp").alias("timestamp"), "outcome",
        "resolved_offset", F.lit(False).alias("carried"))
    names = [c.split()[0] for c in COMMIT_LOG_DDL.split(", ")]
    types = dict(c.split(" ", 1) for c in COMMIT_LOG_DDL.split(", "))
    return row.select(*[(F.col(n) if n in row.columns else F.lit(None)).cast(types[n]).alias(n) for n in names])


def _next_timeline(seeds, timeline):
    """Each group's context at the end of this run, its owned (topic id, partition) and its start row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    both = seeds.unionByName(timeline.select(*_TIMELINE_COLUMNS))
    order = [F.coalesce(F.col("partition"), F.lit(-1)).desc(), F.coalesce(F.col("offset"), F.lit(_NEVER)).desc(),
             F.col("seq").desc()]
    newest_context = Window.partitionBy("group_id").orderBy(*order)
    context = (both.filter(F.col("kind") == "context").withColumn("_n", F.row_number().over(newest_context))
               .filter(F.col("_n") == 1).drop("_n"))
    newest_owner = Window.partitionBy("group_id", "topic_id", "topic_partition").orderBy(*order)
    ownership = (both.filter(F.col("kind") == "ownership").withColumn("_n", F.row_number().over(newest_owner))
                 .filter((F.col("_n") == 1) & F.col("owned")).drop("_n"))
    at_start = [F.lit(None).cast("int").alias("partition"), F.lit(None).cast("long").alias("offset")]
    rest = [c for c in _TIMELINE_COLUMNS if c not in ("group_id", "kind", "partition", "offset", "seq")]
    carried = [*at_start, F.lit(-2).alias("seq")]
    start = (seeds.filter(F.col("kind") == "start")
             .unionByName(timeline.filter((F.col("kind") == "context") & (F.col("seq") == -1))
                          .withColumn("kind", F.lit("start")))
             .dropDuplicates(["group_id"]))
    return (context.select("group_id", "kind", *carried, *rest)
            .unionByName(ownership.select("group_id", "kind", *carried, *rest))
            .unionByName(start.select(*_TIMELINE_COLUMNS)))


def _next_topic_ids(news, topic_ids):
    """Per (group, topic) the first topic id a commit named (the non-owner rule's fallback for the config's)."""
    from pyspark.sql import functions as F

    from .rules.base import ZERO_UUID

    named = news.filter(~F.col("was_carried") & F.col("topic_id").isNotNull() & (F.col("topic_id") != ZERO_UUID)
                        & (F.col("topic_id") != "") & (F.col("outcome") != "deleted")) \
        .select("group_id", "topic", "record_partition", "record_offset", "topic_id")
    both = topic_ids.unionByName(named)
    first = F.min_by(F.struct("record_partition", "record_offset", "topic_id"),
                     F.struct("record_partition", "record_offset"))
    return both.groupBy("group_id", "topic").agg(first.alias("f")).select("group_id", "topic", "f.*")


def _next_open(transactions, early):
    """The transactions still open at the end of this run, marked ``fired`` once the rule reported them."""
    from pyspark.sql import functions as F

    still_open = transactions.filter(F.col("open"))
    if early is not None:
        reported = early.select("group_id", F.col("evidence")[0].alias("_where"), F.lit(True).alias("_now"))
        where = F.concat_ws(":", F.col("first_partition").cast("string"), F.col("first_offset").cast("string"))
        still_open = still_open.withColumn("_where", where).join(reported, ["group_id", "_where"], "left") \
            .withColumn("fired", F.col("fired") | F.coalesce(F.col("_now"), F.lit(False)))
    return still_open.select(*[c.split()[0] for c in OFFSET_STATE_DDLS["open_txn"].split(", ")])
