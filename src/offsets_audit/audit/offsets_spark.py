"""The offset rules (``rules/offsets.py``) as Spark SQL over the resolved commit log: commits stay columns.

Inputs: the replay's commit log (``replay.commit_log``, hash-partitioned by group id), the group events' times
and the ``GroupTimeline`` rows the per-group audit walk emits (the group's context after each change, and
per (topic id, partition) ownership intervals [from, to) once per assignment change). Only finding rows
(few) come back to Python, to be worded by the same functions as the pure rules.

* ``offset_committed_backwards``: the commit log's lag per key (``previous_committed_offset``: the previous
  applied commit since the key's last tombstone), with "the group had members" from the context in force.
* ``offset_commit_by_non_owner``: applied commits of consumer groups with members, whose topic id is known
  (the settings' ``topic_ids`` or the first commit of the group naming it), matched to the ownership interval of
  their (group, topic id, partition) by one sorted pass per key.
* ``transactional_offset_pending_too_long``: the first transactional commit of a producer per key and
  transaction, against the group's clock (every event of the group: group records, commits, markers) before its
  resolution; otherwise the end of the log.

Positions are (``__consumer_offsets`` partition, offset); within one offset the group's events come before the
commit's own (the replay emits a simple group's creation first), so a context row at the same offset applies.
"""
from __future__ import annotations

import json
from typing import Mapping

import pandas as pd

from offsets_audit.plans import cached_leaf, cast_to
from offsets_audit.replay.commit_log import ResolvedCommits, below_stored_commit, run_commit
from offsets_audit.settings import RuleSettings

from .model import FINDING_ROW_DDL, Finding
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
    positions and times only: the group's clock for the pending rule (``ResolvedCommits.events``)."""
    return _resolved(commit_log).events()


def _resolved(commit_log) -> ResolvedCommits:
    """``commit_log`` as the rules read it: a ``ResolvedCommits`` as it is, a whole log (a DataFrame) wrapped."""
    return commit_log if isinstance(commit_log, ResolvedCommits) else ResolvedCommits.of_log(commit_log)


def offset_findings(commit_log, group_times, timeline, rules: Mapping[str, RuleSettings],
                    topic_ids: Mapping[str, str], end_time_ms: int | None,
                    *, cached: list | None = None, members_context=None, hot_blocks_only: bool = True,
                    clock_blocks=None):
    """Finding rows (``audit.model.FINDING_ROW_DDL``) of the enabled offset rules.

    ``rules``: every rule id's settings (``Settings.rules``); ``topic_ids``: topic name -> id known beforehand
    (``Settings.topic_ids``). ``commit_log``: the resolved log, whole (a ``COMMIT_LOG_DDL`` DataFrame) or as a ``ResolvedCommits``;
    ``group_times``: (group_id, partition, offset, timestamp) of every group event; ``timeline``: the walk's
    rows (``group_id``, ``kind`` = context|ownership, ``TIMELINE_DDL`` columns). With ``cached`` (a list), the
    intermediates the rules' plan reads several times (the pending rule's tracked transactions, clock blocks and
    suspects) are persisted, appended to it for the caller to unpersist once the findings are computed, and planned
    over as leaves; without it nothing is persisted and each reader plans and computes them again.

    ``members_context``: when ``timeline``'s context rows leave the members out (``GroupTimeline(members=False)``),
    a function from a DataFrame of group ids to those groups' timeline rows with the members; the non-owner rule's
    candidates take their context in force from it.

    ``hot_blocks_only``: the pending rule tracks only the transactions that can fire (``_judged``), a few stages
    more that pay for themselves over a log's every transaction; off for a commit log of a few transactions (the
    incremental audit's micro-batches), where those stages only add jobs.

    ``clock_blocks``: the pending rule's clock bound per block (``clock_blocks``' rows), when the caller has it
    from an aggregate it runs anyway (the job's record tallies); without it the rule aggregates ``group_times`` and
    the commit log's events."""
    from pyspark.sql import functions as F

    commit_log = _resolved(commit_log)
    parts = []
    if rules["offset_committed_backwards"].enabled or rules["offset_commit_by_non_owner"].enabled:
        parts.append(_commit_rules(commit_log, timeline, rules, topic_ids, members_context=members_context,
                                   cached=cached))
    if rules["transactional_offset_pending_too_long"].enabled:
        parts.append(_pending_rule(commit_log, group_times, timeline, rules, end_time_ms, cached=cached,
                                   hot_blocks_only=hot_blocks_only, clock_blocks=clock_blocks))
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    candidates = parts[0]
    for p in parts[1:]:
        candidates = candidates.unionByName(p)
    severities = {rule: rules[rule].severity for rule in OFFSET_RULES}

    def word(batches):
        columns = [c.split()[0] for c in FINDING_ROW_DDL.split(", ")]
        for pdf in batches:
            rows = [_word(r, severities, rules) for r in pdf.to_dict("records")]
            yield pd.DataFrame([f.to_dict() for f in rows], columns=columns)

    return candidates.select(*[c.split()[0] for c in _CANDIDATE_DDL.split(", ")]).mapInPandas(word, FINDING_ROW_DDL) \
        .filter(F.col("rule").isNotNull())


def _kept(df, cached: list | None):
    """``df`` read several times by a rule's plan: with ``cached`` (``offset_findings``) persisted, appended to it
    and planned over as a leaf (its cache), not as its lineage once per reader; without it ``df`` itself."""
    if cached is None:
        return df
    df = df.persist()
    cached.append(df)
    return cached_leaf(df)


def _at_or_after(partition, offset, from_partition, from_offset):
    """Position (``partition``, ``offset``) is at or after (``from_partition``, ``from_offset``); a null bound
    sorts first (the group's start)."""
    return (from_partition.isNull() | (partition > from_partition) | (
        (partition == from_partition) & (from_offset.isNull() | (offset >= from_offset))))


def _in_force(rows, timeline):
    """``rows`` (positioned at ``partition``, ``offset``) with the group's context in force there (its
    ``TIMELINE_DDL`` context columns): one sorted pass per group over the context rows and ``rows``, which are
    few (the rules' candidates), not the commit log."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    context = timeline.filter(F.col("kind") == "context").select(
        "group_id", "partition", "offset", "seq", F.struct(
            "group_type", "has_members", "has_modern_members", "group_epoch", "assignment_epoch", "member_evidence",
            "members_json").alias("_ctx"))
    stream = rows.withColumn("seq", F.lit(None).cast("int")).withColumn("_rank", F.lit(1)).unionByName(
        context.withColumn("_rank", F.lit(0)), allowMissingColumns=True)
    by_group = Window.partitionBy("group_id").orderBy(
        F.col("partition").asc_nulls_first(), F.col("offset").asc_nulls_first(), "_rank", "seq") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return (stream.withColumn("_in_force", F.last("_ctx", ignorenulls=True).over(by_group))
            .filter(F.col("_rank") == 1).select(*rows.columns, "_in_force.*"))


def _owned_intervals(timeline):
    """Per (group, topic id, partition) the intervals [from, to) of the log in which a member owned it: each
    ownership row holds until the next row of its key (``GroupTimeline``); few rows, one per assignment change."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_key = Window.partitionBy("group_id", "topic_id", "topic_partition").orderBy("partition", "offset", "seq")
    return (timeline.filter(F.col("kind") == "ownership")
            .select("group_id", "topic_id", "topic_partition", "owned", F.col("partition").alias("_from_p"),
                    F.col("offset").alias("_from_o"), F.lead("partition").over(by_key).alias("_to_p"),
                    F.lead("offset").over(by_key).alias("_to_o"))
            .filter(F.col("owned")).drop("owned"))


def _commit_rules(commit_log: ResolvedCommits, timeline, rules: Mapping[str, RuleSettings],
                  topic_ids: Mapping[str, str], *, members_context=None,
                  cached: list | None = None):
    """Backwards commits and commits by a non-owner: applied commits in the context in force.

    The commit log is only scanned: backwards commits are a filter (the log carries each key's previous
    applied commit), and a commit is owned when its position falls in one of its key's owned intervals (a
    broadcast range join against the ownership rows). Only the few commits left, the rules' candidates, are
    sorted with the context rows for the context in force; with ``members_context`` (``offset_findings``) the
    non-owner candidates with their groups' context rows with the members."""
    from pyspark.sql import functions as F

    with_members = bool(rules["offset_committed_backwards"].threshold("only_with_members"))
    backwards = below_stored_commit()
    where = _where(F.col("partition"), F.col("offset"))
    common = [F.col("group_id"), F.col("group_type"), F.col("time"), F.col("topic"), F.col("topic_partition")]
    rows = []
    non_owner_in_force = None
    if rules["offset_committed_backwards"].enabled:
        # Every applied commit below the stored one is a row of the log (its digest keeps them all).
        rows.append(commit_log.rows.filter(~F.col("carried") & F.col("applied")).filter(backwards).select(
            "group_id", "topic", "topic_partition", "committed_offset", "topic_id", "previous_committed_offset",
            _where(F.col("previous_partition"), F.col("previous_offset")).alias("previous_where"),
            F.col("record_partition").alias("partition"), F.col("effective_at").alias("offset"),
            F.when(F.col("outcome") == "txn_committed", F.col("resolved_timestamp")).otherwise(F.col("timestamp"))
            .alias("time"), F.lit("offset_committed_backwards").alias("rule")))
    if rules["offset_commit_by_non_owner"].enabled:
        # Only groups that ever had modern (KIP-848) members can fail the rule; the context in force decides.
        modern = timeline.filter((F.col("kind") == "context") & (F.col("group_type") == "consumer")
                                 & F.col("has_modern_members")).select("group_id").distinct()
        # A topic's id: the config's, else the first commit of the group that named it (up to this commit).
        known = dict(topic_ids)
        first_id = commit_log.first_topic_ids(modern)
        # Without configured ids only a commit of a (group, topic) some commit of it named can be judged, and
        # ``first_id`` holds the modern groups' only: one inner join of the commits where there were two (the
        # groups, then the names). A configured topic is judged from the group's first commit: a left join.
        # The packed runs of commits (``ResolvedCommits.applied_runs``) come a row per run, judged whole where that
        # gives each of its commits' verdict, else commit by commit (below); the other commits one to a row.
        of_groups = modern if known else None
        configured = F.create_map(*[x for k, v in known.items() for x in (F.lit(k), F.lit(v))]) if known else None

        def with_first_ids(df):
            return df.drop("topic_id").join(F.broadcast(first_id), ["group_id", "topic"], "left" if known else "inner") \
                .select("*", F.lit(None).cast("long").alias("previous_committed_offset"),
                        F.lit(None).cast("string").alias("previous_where"))

        def topic_id_at(offset):
            seen = F.when(_at_or_after(F.col("partition"), offset, F.col("_first.p"), F.col("_first.o")),
                          F.col("_first.id"))
            return F.coalesce(configured[F.col("topic")], seen) if configured is not None else seen

        def judged(df):  # the commits whose topic id is known where they were committed
            return df.withColumn("topic_id", topic_id_at(F.col("offset"))).filter(F.col("topic_id").isNotNull())

        owned = _owned_intervals(timeline)

        def inside(offset):
            return (F.col("c.group_id") == F.col("i.group_id")) & (F.col("c.topic_id") == F.col("i.topic_id")) & (
                F.col("c.topic_partition") == F.col("i.topic_partition")) & _at_or_after(
                F.col("c.partition"), offset, F.col("i._from_p"), F.col("i._from_o")) & ~(
                F.col("i._to_p").isNotNull() & _at_or_after(F.col("c.partition"), offset, F.col("i._to_p"),
                                                             F.col("i._to_o")))

        commits = judged(with_first_ids(commit_log.applied(of_groups, runs_apart=True))).drop("_first")
        runs = commit_log.applied_runs(of_groups)
        if runs is not None:
            # A run's commits lie in one partition between its first and last, its topic's id known at each when
            # at its first (none matches an interval while it is not), at none when not at its last. Owned, all of
            # them, when its first and last lie in one owned interval of its key; the other runs (the key's owner
            # changed or it had none meanwhile, the id first named inside it) are judged commit by commit.
            runs = with_first_ids(runs).withColumn("topic_id", topic_id_at(F.col("offset"))).filter(
                topic_id_at(F.col("_last")).isNotNull())
            unsettled = runs.alias("c").join(F.broadcast(owned.alias("i")),
                                             inside(F.col("c.offset")) & inside(F.col("c._last")), "left_anti")
            commits = commits.unionByName(judged(_commits_of_runs(unsettled)).drop("_first"))
        not_owned = commits.alias("c").join(F.broadcast(owned.alias("i")), inside(F.col("c.offset")), "left_anti") \
            .withColumn("rule", F.lit("offset_commit_by_non_owner"))
        if members_context is None:
            rows.append(not_owned)
        else:
            not_owned = _kept(not_owned, cached)  # read twice: for its groups, then itself
            non_owner_in_force = _in_force(not_owned, members_context(not_owned.select("group_id").distinct()))
    if not rows and non_owner_in_force is None:
        return None
    stream = None
    for df in rows:
        stream = df if stream is None else stream.unionByName(df, allowMissingColumns=True)
    if stream is not None:
        stream = _in_force(stream, timeline)
    if non_owner_in_force is not None:
        stream = non_owner_in_force if stream is None else stream.unionByName(non_owner_in_force,
                                                                                        allowMissingColumns=True)
    had_members = F.coalesce(F.col("has_members"), F.lit(False)) if with_members else F.lit(True)
    modern_member = (F.col("group_type") == "consumer") & F.coalesce(F.col("has_modern_members"), F.lit(False))
    if stream is None:
        return None
    found = stream.filter(F.when(F.col("rule") == "offset_committed_backwards", had_members).otherwise(modern_member))
    is_backwards = F.col("rule") == "offset_committed_backwards"

    def only(column, rule_is):
        return F.when(rule_is, F.col(column))

    return _complete(found.select(
        "rule", *common, only("previous_committed_offset", is_backwards).alias("old_offset"),
        only("committed_offset", is_backwards).alias("new_offset"), only("previous_where", is_backwards)
        .alias("previous_where"), only("committed_offset", ~is_backwards).alias("committed_offset"),
        *[only(c, ~is_backwards).alias(c) for c in ("topic_id", "group_epoch", "assignment_epoch", "members_json",
                                                      "member_evidence")],
        where.alias("where")))


def _commits_of_runs(runs):
    """``ResolvedCommits.applied_runs`` rows (and columns added since) with each run replaced by its commits' rows:
    each one's ``committed_offset``, ``offset`` and ``time``, the rest the run's; without ``_last`` and ``_run``."""
    from pyspark.sql import functions as F

    from offsets_audit.codec.packing import elements

    commit = run_commit(F.col("_commit"))
    own = {"committed_offset": commit["committed_offset"], "offset": commit["record_offset"],
           "time": commit["timestamp"]}
    exploded = runs.select("*", F.explode(elements(F.col("_run"))).alias("_commit"))
    return exploded.select(*[own[c].alias(c) if c in own else F.col(c) for c in runs.columns
                             if c not in ("_last", "_run")])


#: Below this many decoded records a batch audit tracks every transaction (``hot_blocks_only`` off): the hot-block
#: prefilter (``_judged``) adds a few query stages, a fixed cost on every audit of a small log, and saves the
#: per-transaction aggregate over a log's every transaction, which only a log of millions of records makes dear.
HOT_BLOCKS_MIN_RECORDS = 1_000_000
#: The pending rule's coarse clock: the group's latest time per block of ``2 ** BLOCK_BITS`` offsets of a partition.
BLOCK_BITS = 8
#: A resolved transaction spanning more blocks than this is bounded by a range join instead of one row per block.
_MAX_SPAN = 64


def _pending_rule(commit_log: ResolvedCommits, group_times, timeline, rules: Mapping[str, RuleSettings],
                  end_time_ms: int | None, *,
                  cached: list | None = None, hot_blocks_only: bool = True, clock_blocks=None):
    """Transactional commits pending longer than ``max_pending_ms``: the first event of the group (in log order)
    later than the limit, before the commit's marker (or the tombstone that cleared it), else the log's end.

    Most transactions resolve long before the limit, and a block's latest time bounds every event in it: a
    transaction none of whose blocks (from its first commit to its resolution, or to the log's end while open)
    holds a time past its threshold cannot fire early. Only the others (suspects, none on a healthy cluster) are
    searched for among their groups' events (one scan against the broadcast suspects); the clock is aggregated,
    never sorted.

    A block's time is the latest of every group's events in it, not only the transaction's group: a bound for each
    group's own, and a few thousand rows (one per ``2 ** BLOCK_BITS`` offsets of a partition), joined by broadcast.
    A bound too high can only make a suspect, which the search then judges exactly. On a healthy cluster none arises:
    records are written in time order, so a partition's block holds no time much past its transactions' commits, and
    an open transaction past its threshold is a finding anyway."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    limit = int(rules["transactional_offset_pending_too_long"].threshold("max_pending_ms"))
    txn = commit_log.rows.filter(~F.col("carried") & F.col("outcome").startswith("txn_")
                                 & F.col("timestamp").isNotNull())
    events = commit_log.events().unionByName(group_times).filter(F.col("timestamp").isNotNull())
    blocks = clock_blocks if clock_blocks is not None else events.groupBy(
        F.col("partition").alias("record_partition"), block_of(F.col("offset")).alias("_block")).agg(
        F.max("timestamp").alias("_top"))
    # Read several times below (``_kept``), as ``tracked`` and ``suspects`` are.
    blocks = _kept(blocks, cached)
    transaction = ["group_id", "topic", "topic_partition", "producer_id", "resolved_offset", "record_partition"]
    # The rule tracks one commit per (producer, key) until its resolution: the first of each transaction. A
    # marker (or clearing tombstone) sits in its commits' partition, so a transaction is one of the partition's
    # too, and its first commit is its least record offset: scalar aggregates, hashed (a ``min_by`` of a struct
    # would sort every transactional commit of the log). Only the transactions that can fire are tracked
    # (``_judged``): the open ones, and the resolved ones with a commit in a block whose transactions' span holds
    # a time past the earliest of them plus the limit (none on a healthy cluster).
    judged = _judged(txn, blocks, transaction, limit) if hot_blocks_only else txn
    tracked = judged.groupBy(*transaction).agg(
        F.min("record_offset").alias("record_offset"), F.min_by("timestamp", "record_offset").alias("timestamp"))
    # A key's commits left open in two partitions (a group whose records moved): the walk, in log order, tracks the
    # earlier partition's and ignores the later one while it is open.
    is_open = F.col("resolved_offset").isNull()
    first_open = F.min(F.when(is_open, F.col("record_partition"))).over(
        Window.partitionBy("group_id", "topic", "topic_partition", "producer_id"))
    tracked = (tracked.withColumn("_first_open", first_open)
               .filter(~is_open | (F.col("record_partition") == F.col("_first_open"))).drop("_first_open")
               .withColumn("_threshold", F.col("timestamp") + F.lit(limit)))
    tracked = _kept(tracked, cached)
    # Suspects: a block from the commit's to its resolution's (or any later one while open) is past the threshold.
    first_block, last_block = F.shiftright("record_offset", BLOCK_BITS), F.shiftright("resolved_offset", BLOCK_BITS)
    short = F.col("resolved_offset").isNotNull() & (last_block - first_block < _MAX_SPAN)
    position = ["group_id", "record_partition", "record_offset"]  # one commit record: one tracked row at most
    in_span = (tracked.filter(short).withColumn("_block", F.explode(F.sequence(first_block, last_block)))
               .join(F.broadcast(blocks), ["record_partition", "_block"])
               .filter(F.col("_top") > F.col("_threshold")).select(*position))
    rest = tracked.filter(~short).alias("t")
    # A later partition's events come after the marker in log order: they matter to an open transaction only.
    late = blocks.alias("b").join(F.broadcast(rest), (F.col("b._top") > F.col("t._threshold")) & (
        (F.col("t.resolved_offset").isNull() & (F.col("b.record_partition") > F.col("t.record_partition"))) | (
            (F.col("b.record_partition") == F.col("t.record_partition"))
            & (F.col("b._block") >= F.shiftright("t.record_offset", BLOCK_BITS)) & (
                F.col("t.resolved_offset").isNull()
                | (F.col("b._block") <= F.shiftright("t.resolved_offset", BLOCK_BITS))))))
    suspects = _kept(in_span.unionByName(late.select(*[F.col(f"t.{c}") for c in position])).distinct(), cached)
    # A transaction that is no suspect cannot fire before its resolution: only an open one can fire, at the end.
    # (Nearly every tracked transaction resolves: the resolved ones that are no suspects go no further.)
    cleared = tracked.filter(F.col("resolved_offset").isNull()).join(suspects, position, "left_anti")
    # Persisted, the suspects are known by one small job: none is the common case on a healthy log.
    no_search = cached is not None and suspects.isEmpty()
    probes = tracked.join(suspects, position, "left_semi")
    # The clock of the groups whose transactions are judged below: the suspects', and without the log's end the
    # open transactions' too (their group's last event ends them).
    groups = probes.select("group_id")
    if end_time_ms is None:
        groups = groups.unionByName(cleared.select("group_id"))
    clock = events.join(F.broadcast(groups.distinct()), "group_id", "left_semi")
    if no_search:  # no suspect: no event to search for, and the plan of the search is not even built
        found = cleared.withColumn("_first", F.lit(None).cast(clock.select(_tick()).schema[0].dataType))
    else:
        searched = _first_late_events(probes, clock)
        found = searched.unionByName(cleared.withColumn(
            "_first", F.lit(None).cast(searched.schema["_first"].dataType)).select(*searched.columns))
    # the marker (or clearing tombstone) sits in the commit's partition, at ``resolved_offset``
    before_resolution = F.col("resolved_offset").isNull() | ~_at_or_after(
        F.col("_first.partition"), F.col("_first.offset"), F.col("record_partition"), F.col("resolved_offset"))
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


def block_of(offset):
    """The clock block of a record offset (a column): its offset's ``2 ** BLOCK_BITS`` block in its partition."""
    from pyspark.sql import functions as F

    return F.shiftright(offset, BLOCK_BITS)


def clock_blocks(tallies):
    """The pending rule's clock bound from a tally of the decoded log (``job._tallies``: per ``record_name``,
    ``error_code``, ``unreadable``, ``partition`` and ``_block`` = ``block_of(offset)``, the latest record time
    ``_top`` in epoch ms): per (``record_partition``, ``_block``) the latest time of any decoded record there.

    Every event of the rule's clock (a group record's, an offset commit's, a marker's) is a decoded record at its own
    position and time, so this is at least the events' own latest time in each block: a bound, and a bound too high
    only makes a suspect, which the search judges exactly (``_pending_rule``). A quarantined record's time is
    left out: corrupt bytes could hold any time, and no event comes of it."""
    from pyspark.sql import functions as F

    return (tallies.filter(F.col("error_code").isNull() & ~F.col("unreadable") & F.col("_top").isNotNull())
            .groupBy(F.col("partition").alias("record_partition"), "_block").agg(F.max("_top").alias("_top")))


def _judged(txn, blocks, transaction: list[str], limit: int):
    """The transactional commits (``txn``) of the transactions the pending rule must judge: every commit of each
    open transaction, and of each resolved one with a commit in a "hot" start block.

    A resolved transaction fires early only if an event in its span (from its first commit's block to its
    resolution's) is later than its first commit's time plus ``limit``. Per block of offsets where its commits
    start, the earliest of their times and the last block their transactions resolve in bound every such
    transaction whose first commit is there: its first commit is no earlier than that earliest time, and its span
    lies within the block's. So where no block of that span has an event past the earliest time plus ``limit``
    (``blocks``' latest time per block), none of the transactions starting in the block can fire, and the rule's
    result is the same without them. A start block whose transactions span more than ``_MAX_SPAN`` blocks is hot
    as it is. Per block, not per transaction: a few thousand rows where a healthy log has a transaction every few
    records, and none hot."""
    from functools import reduce

    from pyspark.sql import functions as F

    resolved = txn.filter(F.col("resolved_offset").isNotNull()).withColumn(
        "_start", F.shiftright("record_offset", BLOCK_BITS))
    starts = resolved.groupBy("record_partition", "_start").agg(
        F.min("timestamp").alias("_earliest"), F.max(F.shiftright("resolved_offset", BLOCK_BITS)).alias("_last"))
    near = F.col("_last") - F.col("_start") < _MAX_SPAN
    hot = (starts.filter(near).withColumn("_block", F.explode(F.sequence("_start", "_last")))
           .join(F.broadcast(blocks), ["record_partition", "_block"])
           .filter(F.col("_top") > F.col("_earliest") + F.lit(limit)).select("record_partition", "_start")
           .unionByName(starts.filter(~near).select("record_partition", "_start")).distinct())
    hot_transactions = resolved.join(F.broadcast(hot), ["record_partition", "_start"], "left_semi").select(
        *transaction).distinct().alias("h")
    same = reduce(lambda a, b: a & b, [F.col(f"c.{c}").eqNullSafe(F.col(f"h.{c}")) for c in transaction])
    judged = resolved.drop("_start").alias("c").join(F.broadcast(hot_transactions), same, "left_semi")
    return judged.select(*txn.columns).unionByName(txn.filter(F.col("resolved_offset").isNull()))


def _tick():
    """A clock event's position and time (``_first_late_events``' ``_first`` is the first late one's)."""
    from pyspark.sql import functions as F

    return F.struct("partition", "offset", F.col("timestamp").alias("time")).alias("_tick")


def _first_late_events(tracked, clock):
    """``tracked`` (few rows: the suspects) with ``_first``: the first event of its group after the commit (in log
    order) whose time is past ``_threshold`` (``partition``, ``offset``, ``time``), or null. ``clock``: the
    groups' events, scanned once against the broadcast suspects."""
    from pyspark.sql import functions as F

    probes = tracked.alias("t")
    events = clock.select(F.col("group_id").alias("_g"), _tick())
    # strictly after the commit: the commit is not at or after the tick
    later = (F.col("_g") == F.col("t.group_id")) & (F.col("_tick.time") > F.col("t._threshold")) & ~_at_or_after(
        F.col("t.record_partition"), F.col("t.record_offset"), F.col("_tick.partition"), F.col("_tick.offset"))
    position = ["group_id", "record_partition", "record_offset"]
    matched = (events.join(F.broadcast(probes), later)
               .groupBy(*[F.col(f"t.{c}").alias(c) for c in position]).agg(F.min("_tick").alias("_first")))
    return tracked.join(matched, position, "left").select(*tracked.columns, "_first")


def _complete(df):
    from pyspark.sql import types as T

    return cast_to(df, T._parse_datatype_string(_CANDIDATE_DDL))


def _word(row: dict, severities: dict, rules: Mapping[str, RuleSettings]) -> Finding:
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
        limit = int(rules[rule].threshold("max_pending_ms"))
        message, evidence, details, key = pending_too_long(topic, partition, plain(row["producer_id"]),
                                                           plain(row["pending_ms"]), limit, row["where"])
    if key is not None:
        details["key"] = list(key)
    return Finding(rule=rule, severity=severities[rule], group_id=row["group_id"], group_type=plain(row["group_type"]),
                   time=plain(row["time"]), message=message, evidence=[e for e in dict.fromkeys(evidence) if e],
                   details=details)
