"""The offset rules (``rules/offsets.py``) as Spark SQL over the resolved commit log: commits stay columns.

Inputs: the replay's commit log (``replay.commit_log``, hash-partitioned by group id), the group events' times
and the ``GroupTimeline`` rows the per-group audit walk emits (the group's context after each change, and
per (topic id, partition) ownership intervals [from, to) once per assignment change). Only finding rows
(few) come back to Python, to be worded by the same functions as the pure rules.

* ``offset_committed_backwards``: the commit log's lag per key (``previous_committed_offset``: the previous
  applied commit since the key's last tombstone), with "the group had members" from the context in force.
* ``offset_commit_by_non_owner``: applied commits of consumer groups with members, whose topic id is known
  (the config's ``_topic_ids`` or the first commit of the group naming it), matched to the ownership interval of
  their (group, topic id, partition) by one sorted pass per key.
* ``transactional_offset_pending_too_long``: the first transactional commit of a producer per key and
  transaction, against the group's clock (every event of the group: group records, commits, markers) before its
  resolution; otherwise the end of the log.

Positions are (``__consumer_offsets`` partition, offset); within one offset the group's events come before the
commit's own (the replay emits a simple group's creation first), so a context row at the same offset applies.
"""
from __future__ import annotations

import json

import pandas as pd

from .model import FINDING_ROW_DDL, Finding
from .rules.base import ZERO_UUID
from .rules.offsets import commit_by_non_owner, committed_backwards, pending_too_long

#: Rows the per-group audit walk emits besides findings and rebalances (``engine.GroupTimeline``).
TIMELINE_DDL = (
    "partition int, offset long, seq int, group_type string, has_members boolean, has_modern_members boolean, "
    "group_epoch int, assignment_epoch int, member_evidence array<string>, members_json string, topic_id string, "
    "topic_partition int, owned boolean"
)
#: Candidate findings computed in SQL, worded on the executors (``_word``).
_CANDIDATE_DDL = (
    "rule string, group_id string, group_type string, time long, topic string, topic_partition int, "
    "old_offset long, new_offset long, previous_where string, where string, committed_offset long, topic_id string, "
    "group_epoch int, assignment_epoch int, members_json string, member_evidence array<string>, producer_id long, "
    "pending_ms long"
)
OFFSET_RULES = ("offset_committed_backwards", "offset_commit_by_non_owner", "transactional_offset_pending_too_long")


def _where(partition, offset):
    from pyspark.sql import functions as F

    return F.concat_ws(":", partition.cast("string"), offset.cast("string"))


def commit_events(commit_log):
    """The offset events of the log (the pure replay's ``offset_committed`` ... ``txn_offset_aborted``) as
    positions and times only: the group's clock for the pending rule."""
    from pyspark.sql import functions as F

    log = commit_log.filter(~F.col("carried"))
    at_record = log.select("group_id", F.col("record_partition").alias("partition"),
                           F.col("record_offset").alias("offset"), "timestamp")
    at_marker = log.filter(F.col("outcome").isin("txn_committed", "txn_aborted")).select(
        "group_id", F.col("record_partition").alias("partition"), F.col("resolved_offset").alias("offset"),
        F.col("resolved_timestamp").alias("timestamp"))
    return at_record.unionByName(at_marker)


def offset_findings(commit_log, group_times, timeline, settings: dict, config: dict, end_time_ms: int | None,
                    *, cached: list | None = None):
    """Finding rows (``audit.model.FINDING_ROW_DDL``) of the enabled offset rules.

    ``group_times``: (group_id, partition, offset, timestamp) of every group event; ``timeline``: the walk's
    rows (``group_id``, ``kind`` = context|ownership, ``TIMELINE_DDL`` columns). With ``cached`` (a list), the
    intermediates the rules' plan reads several times (the pending rule's clock) are persisted and appended to
    it, for the caller to unpersist once the findings are computed; without it nothing is persisted."""
    from pyspark.sql import functions as F

    parts = []
    if settings["offset_committed_backwards"]["enabled"] or settings["offset_commit_by_non_owner"]["enabled"]:
        parts.append(_commit_rules(commit_log, timeline, settings, config))
    if settings["transactional_offset_pending_too_long"]["enabled"]:
        parts.append(_pending_rule(commit_log, group_times, timeline, settings, end_time_ms, cached=cached))
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    candidates = parts[0]
    for p in parts[1:]:
        candidates = candidates.unionByName(p)
    severities = {rule: settings[rule]["severity"] for rule in OFFSET_RULES}

    def word(batches):
        columns = [c.split()[0] for c in FINDING_ROW_DDL.split(", ")]
        for pdf in batches:
            rows = [_word(r, severities, settings) for r in pdf.to_dict("records")]
            yield pd.DataFrame([f.to_dict() for f in rows], columns=columns)

    return candidates.select(*[c.split()[0] for c in _CANDIDATE_DDL.split(", ")]).mapInPandas(word, FINDING_ROW_DDL) \
        .filter(F.col("rule").isNotNull())


def _commit_rules(commit_log, timeline, settings: dict, config: dict):
    """Backwards commits and commits by a non-owner: applied commits in the context in force."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    applied = commit_log.filter(~F.col("carried") & F.col("applied")).select(
        "group_id", "topic", "topic_partition", "committed_offset", "topic_id", "previous_committed_offset",
        _where(F.col("previous_partition"), F.col("previous_offset")).alias("previous_where"),
        F.col("record_partition").alias("partition"), F.col("effective_at").alias("offset"),
        F.when(F.col("outcome") == "txn_committed", F.col("resolved_timestamp")).otherwise(F.col("timestamp"))
        .alias("time"))
    with_members = bool(settings["offset_committed_backwards"]["only_with_members"])
    backwards = F.col("previous_committed_offset").isNotNull() & F.col("committed_offset").isNotNull() & (
        F.col("committed_offset") < F.col("previous_committed_offset"))
    non_owner_rule = settings["offset_commit_by_non_owner"]["enabled"]
    keep = backwards if not non_owner_rule else F.lit(True)
    applied = applied.filter(keep)

    # The context in force at each commit: one sorted pass per group over context rows and commits.
    context = timeline.filter(F.col("kind") == "context").select(
        "group_id", "partition", "offset", "seq", F.struct(
            "group_type", "has_members", "has_modern_members", "group_epoch", "assignment_epoch", "member_evidence",
            "members_json").alias("_ctx"))
    stream = applied.withColumn("seq", F.lit(None).cast("int")).withColumn("_rank", F.lit(1)).unionByName(
        context.withColumn("_rank", F.lit(0)), allowMissingColumns=True)
    by_group = Window.partitionBy("group_id").orderBy(
        F.col("partition").asc_nulls_first(), F.col("offset").asc_nulls_first(), "_rank", "seq") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    commits = (stream.withColumn("_in_force", F.last("_ctx", ignorenulls=True).over(by_group))
               .filter(F.col("_rank") == 1).select(*applied.columns, "_in_force.*"))
    where = _where(F.col("partition"), F.col("offset"))
    common = [F.col("group_id"), F.col("group_type"), F.col("time"), F.col("topic"), F.col("topic_partition")]
    out = []
    if settings["offset_committed_backwards"]["enabled"]:
        had_members = F.coalesce(F.col("has_members"), F.lit(False)) if with_members else F.lit(True)
        out.append(commits.filter(backwards & had_members).select(
            F.lit("offset_committed_backwards").alias("rule"), *common,
            F.col("previous_committed_offset").alias("old_offset"), F.col("committed_offset").alias("new_offset"),
            "previous_where", where.alias("where")))
    if non_owner_rule:
        candidates = commits.filter((F.col("group_type") == "consumer") & F.col("has_modern_members"))
        # A topic's id: the config's, else the first commit of the group that named it (up to this commit).
        known = dict(config.get("_topic_ids") or {})
        first_id = (commit_log.filter(~F.col("carried") & F.col("topic_id").isNotNull()
                                      & (F.col("topic_id") != ZERO_UUID) & (F.col("topic_id") != "")
                                      & ~F.col("outcome").isin("deleted"))
                    .groupBy("group_id", "topic")
                    .agg(F.min_by(F.struct(F.col("record_partition").alias("p"), F.col("record_offset").alias("o"),
                                           F.col("topic_id").alias("id")),
                                  F.struct("record_partition", "record_offset")).alias("_first")))
        candidates = candidates.drop("topic_id").join(F.broadcast(first_id), ["group_id", "topic"], "left")
        configured = F.create_map(*[x for k, v in known.items() for x in (F.lit(k), F.lit(v))]) if known else None
        seen = F.when((F.col("_first.p") < F.col("partition")) | (
            (F.col("_first.p") == F.col("partition")) & (F.col("_first.o") <= F.col("offset"))), F.col("_first.id"))
        topic_id = F.coalesce(configured[F.col("topic")], seen) if configured is not None else seen
        candidates = candidates.withColumn("topic_id", topic_id).filter(F.col("topic_id").isNotNull()).drop("_first")
        # Ownership in force: one sorted pass per (group, topic id, partition).
        ownership = timeline.filter(F.col("kind") == "ownership").select(
            "group_id", "topic_id", "topic_partition", "partition", "offset", "seq", "owned")
        stream = candidates.withColumn("seq", F.lit(None).cast("int")).withColumn("_rank", F.lit(1)) \
            .withColumn("owned", F.lit(None).cast("boolean")).unionByName(
                ownership.withColumn("_rank", F.lit(0)), allowMissingColumns=True)
        by_key = Window.partitionBy("group_id", "topic_id", "topic_partition").orderBy(
            F.col("partition").asc_nulls_first(), F.col("offset").asc_nulls_first(), "_rank", "seq") \
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        not_owned = (stream.withColumn("_owned", F.last("owned", ignorenulls=True).over(by_key))
                     .filter((F.col("_rank") == 1) & ~F.coalesce(F.col("_owned"), F.lit(False))))
        out.append(not_owned.select(
            F.lit("offset_commit_by_non_owner").alias("rule"), *common, "committed_offset", "topic_id",
            "group_epoch", "assignment_epoch", "members_json", "member_evidence", where.alias("where")))
    result = out[0]
    for df in out[1:]:
        result = result.unionByName(df, allowMissingColumns=True)
    return _complete(result)


def _pending_rule(commit_log, group_times, timeline, settings: dict, end_time_ms: int | None, *,
                  cached: list | None = None):
    """Transactional commits pending longer than ``max_pending_ms``: the first event of the group (in log order)
    later than the limit, before the commit's marker (or the tombstone that cleared it), else the log's end."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    limit = int(settings["transactional_offset_pending_too_long"]["max_pending_ms"])
    txn = commit_log.filter(~F.col("carried") & F.col("outcome").startswith("txn_") & F.col("timestamp").isNotNull())
    # The rule tracks one commit per (producer, key) until its resolution: the first of each transaction.
    tracked = (txn.groupBy("group_id", "topic", "topic_partition", "producer_id", "resolved_offset")
               .agg(F.min_by(F.struct("record_partition", "record_offset", "timestamp"), F.col("record_offset"))
                    .alias("p"))
               .select("group_id", "topic", "topic_partition", "producer_id", "resolved_offset", "p.*"))
    if cached is not None:
        # Read four times below (the groups, the positions, the probes, the skewed ones): one aggregate.
        tracked = tracked.persist()
        cached.append(tracked)
    groups = tracked.select("group_id").distinct()
    clock = commit_events(commit_log).unionByName(group_times).filter(F.col("timestamp").isNotNull()) \
        .join(F.broadcast(groups), "group_id", "left_semi")
    # Running maximum of the clock per group in log order: the first event later than a threshold is where the
    # running maximum first exceeds it, unless an event before the commit already did (handled apart below).
    in_order = Window.partitionBy("group_id").orderBy("partition", "offset").rowsBetween(
        Window.unboundedPreceding, Window.currentRow)
    clock = clock.withColumn("_max", F.max("timestamp").over(in_order))
    if cached is not None:
        # The clock (every event of the groups with transactional commits, the bulk of the log when producers
        # commit offsets transactionally) is read by the running maximum at each commit, the descending pass,
        # the skewed search and the log's end: unpersisted, each read was a scan, shuffle and sort of it again.
        clock = clock.persist()
        cached.append(clock)
    ticks = clock.select("group_id", "partition", "offset", "_max")
    # The running maximum at the commit itself (the commit is one of the clock's events).
    positions = tracked.select("group_id", F.col("record_partition").alias("partition"),
                               F.col("record_offset").alias("offset")).distinct()
    at_commit = ticks.join(F.broadcast(positions), ["group_id", "partition", "offset"]) \
        .groupBy("group_id", F.col("partition").alias("record_partition"), F.col("offset").alias("record_offset")) \
        .agg(F.max("_max").alias("_max_at"))
    probes = tracked.join(at_commit, ["group_id", "record_partition", "record_offset"], "left") \
        .withColumn("_threshold", F.col("timestamp") + F.lit(limit))
    simple = probes.filter(F.coalesce(F.col("_max_at"), F.lit(-(2 ** 62))) <= F.col("_threshold"))
    # First tick whose running maximum exceeds the threshold: descending order, the last tick seen before the probe.
    stream = ticks.select("group_id", F.col("_max").alias("_key"), F.lit(0).alias("_probe"),
                          F.struct("partition", "offset", F.col("_max").alias("time")).alias("_tick")) \
        .unionByName(simple.select("group_id", F.col("_threshold").alias("_key"), F.lit(1).alias("_probe"),
                                   F.struct(*[F.col(c) for c in simple.columns]).alias("_p")),
                     allowMissingColumns=True)
    down = Window.partitionBy("group_id").orderBy(F.col("_key").desc(), F.col("_probe").desc(),
                                                  F.col("_tick.partition").desc(), F.col("_tick.offset").desc()) \
        .rowsBetween(Window.unboundedPreceding, -1)
    found = (stream.withColumn("_first", F.last("_tick", ignorenulls=True).over(down))
             .filter(F.col("_probe") == 1).select("_p.*", "_first"))
    # Rare: an event before the commit is already later than its threshold (clock skew); search directly.
    skewed = probes.filter(F.col("_max_at") > F.col("_threshold"))
    events = clock.select(F.col("group_id").alias("_g"), F.struct("partition", "offset", F.col("timestamp").alias("time"))
                          .alias("_tick"))
    matched = (events.join(F.broadcast(skewed), (skewed.group_id == events._g) & (F.col("_tick.time") > F.col("_threshold")) & (
        (F.col("_tick.partition") > F.col("record_partition")) | (
            (F.col("_tick.partition") == F.col("record_partition")) & (F.col("_tick.offset") > F.col("record_offset")))))
        .groupBy("group_id", "record_partition", "record_offset", "producer_id", "topic", "topic_partition")
        .agg(F.min("_tick").alias("_first")))
    direct = skewed.join(matched, ["group_id", "record_partition", "record_offset", "producer_id", "topic",
                                   "topic_partition"], "left")
    found = found.unionByName(direct.select(*found.columns))
    before_resolution = F.col("resolved_offset").isNull() | (F.col("_first.partition") < F.col("record_partition")) | (
        (F.col("_first.partition") == F.col("record_partition")) & (F.col("_first.offset") < F.col("resolved_offset")))
    if end_time_ms is None:
        last = clock.groupBy("group_id").agg(F.max("timestamp").alias("_end"))
        found = found.join(last, "group_id", "left")
        end = F.col("_end")
    else:
        end = F.lit(int(end_time_ms))
    group_types = timeline.filter((F.col("kind") == "context") & (F.col("seq") == -1)).select("group_id", "group_type")
    found = found.join(F.broadcast(group_types), "group_id", "left")
    fires_early = F.col("_first").isNotNull() & before_resolution
    fires_at_end = ~fires_early & F.col("resolved_offset").isNull() & ((end - F.col("timestamp")) > F.lit(limit))
    time = F.when(fires_early, F.col("_first.time")).otherwise(end)
    return _complete(found.filter(fires_early | fires_at_end).select(
        F.lit("transactional_offset_pending_too_long").alias("rule"), "group_id",
        "group_type", time.alias("time"), "topic", "topic_partition",
        "producer_id", (time - F.col("timestamp")).alias("pending_ms"),
        _where(F.col("record_partition"), F.col("record_offset")).alias("where")))


def _complete(df):
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    schema = T._parse_datatype_string(_CANDIDATE_DDL)
    return df.select(*[(F.col(f.name) if f.name in df.columns else F.lit(None)).cast(f.dataType).alias(f.name)
                       for f in schema.fields])


def _word(row: dict, severities: dict, settings: dict) -> Finding:
    """A candidate row as the pure rule words it (``rules.offsets``)."""
    rule = row["rule"]

    def plain(v):
        if v is None:
            return None
        try:
            if pd.isna(v):
                return None
        except (TypeError, ValueError):
            pass
        return v.item() if hasattr(v, "item") else v

    topic, partition = plain(row["topic"]), plain(row["topic_partition"])
    key = None
    if rule == "offset_committed_backwards":
        message, evidence, details = committed_backwards(topic, partition, plain(row["old_offset"]),
                                                         plain(row["new_offset"]), row["previous_where"], row["where"])
    elif rule == "offset_commit_by_non_owner":
        evidence_of_members = [] if row["member_evidence"] is None else [plain(x) for x in row["member_evidence"]]
        message, evidence, details = commit_by_non_owner(
            topic, partition, plain(row["committed_offset"]), row["topic_id"], plain(row["group_epoch"]),
            plain(row["assignment_epoch"]), json.loads(row["members_json"] or "{}"), evidence_of_members,
            row["where"])
    else:
        limit = int(settings[rule]["max_pending_ms"])
        message, evidence, details, key = pending_too_long(topic, partition, plain(row["producer_id"]),
                                                           plain(row["pending_ms"]), limit, row["where"])
    if key is not None:
        details["key"] = list(key)
    return Finding(rule=rule, severity=severities[rule], group_id=row["group_id"], group_type=plain(row["group_type"]),
                   time=plain(row["time"]), message=message, evidence=[e for e in dict.fromkeys(evidence) if e],
                   details=details)
