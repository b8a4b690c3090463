"""Spark edge of the audit: ``audit(replay_tables, assignor_audit, settings) -> AuditTables``.

The replay's ``group_events`` go through the pure ``audit_group`` once per group with
``groupBy("group_id").applyInArrow`` (``walk_groups``), which also emits each group's timeline (context and ownership
intervals); the offset rules run as Spark SQL over the resolved commit log against that timeline
(``offsets_spark``), so offset commits never become Python objects; latency percentiles are Spark aggregates (exact ``percentile``,
the same linear interpolation as ``latency.percentile``); ``assignor_audit`` rows that do not match
become ``assignor_mismatch`` findings with ``mapInPandas``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from offsets_audit.replay.spark import ReplayTables, StageTables, cached_intermediates, table
from offsets_audit.plans import by_group, cached_leaf
from offsets_audit.settings import Settings
from offsets_audit.workers import fewer_collections

from .coordinator_load import LOAD_DDL
from .coordinator_spark import RUN_COST_EVENT, CoordinatorOptions, coordinator_options, cost_events, partition_rows
from .engine import GroupTimeline, audit_group
from .interval_whatif import WHATIF_COLUMNS, WHATIF_DDL, what_if_rows_of_group
from .gaps import GAP_COLUMNS_DDL
from .model import FINDING_ROW_DDL, Event
from .offsets_spark import HOT_BLOCKS_MIN_RECORDS, TIMELINE_DDL, offset_findings
from .latency import LATENCY_METRICS, PERCENTILES, REBALANCE_COLUMNS
from .rules.assignor import assignor_findings
from .rules.registry import default_rule_settings

FINDINGS_DDL = ("id string, group_id string, group_type string, rule string, severity string, time timestamp, "
                "message string, evidence array<string>, details string")
REBALANCES_DDL = (
    "group_id string, group_type string, group_epoch int, bump_partition int, bump_offset long, bump_time long, "
    "assignment_epoch int, assignment_timestamp long, assignment_offset long, assignment_time long, "
    "converged_time long, time_to_assignment_ms long, convergence_ms long, assigning_ms long, "
    "reconciling_ms long, members int, members_changed int, partitions_moved int, bumps_in_batch int, "
    "assignment_interval_ms int, complete boolean, day string, causes array<string>, "
    "cause_members array<struct<member_id:string,instance_id:string,client_id:string,client_host:string,"
    "rack_id:string,process_id:string,causes:array<string>>>"
)
REBALANCE_CAUSES_DDL = ("level string, group_type string, group_id string, day string, cause string, "
                        "client_id string, client_host string, rebalances bigint, groups bigint")


def _latency_summary_ddl() -> str:
    """``latency_summary``: one row per level (group_day, group_type_day, group_type)."""
    fields = ["level string", "group_type string", "group_id string", "day string", "rebalances bigint",
              "complete bigint", "causes array<struct<cause:string,rebalances:bigint>>"]
    fields += [f"{metric}_{q} double" for metric in LATENCY_METRICS
               for q in [name for name, _ in PERCENTILES] + ["max"]]
    return ", ".join(fields)


LATENCY_SUMMARY_DDL = _latency_summary_ddl()

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class AuditTables(StageTables):
    """What the audit hands to the sinks. ``findings`` as written carries ``audit.gaps``' columns
    (``audit(..., quarantined=...)`` adds them)."""

    findings: DataFrame = table(FINDINGS_DDL + ", " + GAP_COLUMNS_DDL)
    rebalances: DataFrame = table(REBALANCES_DDL)
    latency_summary: DataFrame = table(LATENCY_SUMMARY_DDL)
    rebalance_causes: DataFrame = table(REBALANCE_CAUSES_DDL)
    coordinator_load: DataFrame = table(LOAD_DDL)
    assignment_interval_whatif: DataFrame = table(WHATIF_DDL)
    cached: tuple = cached_intermediates()


_OUTPUT_DDL = "group_id string, kind string, payload string, " + TIMELINE_DDL
EVENT_COLUMNS = ("partition", "offset", "timestamp", "group_id", "group_type", "event", "member_id", "details")

#: Within one record the replay emits group creation before the record's own events: the batch audit and the
#: incremental one (``offsets_audit.incremental``) order a group's events by (partition, offset, this rank).
EVENT_RANK = {"replay_anomaly": 0, "group_created": 1, "group_type_changed": 1}


def _audit_groups(settings: Settings, end_time_ms: int | None, schema, *, members: bool = True,
                  context_only: bool = False, what_if: CoordinatorOptions | None = None):
    """The applyInArrow body: one group's events (``EVENT_COLUMNS``, any order) through ``audit_group``, out as
    ``_OUTPUT_DDL`` rows (``schema``, that DDL as Arrow, made on the driver: DDL parsing needs a SparkContext).
    ``members``: the timeline's context rows with the members (``GroupTimeline``); ``context_only``: only those
    rows, not the findings, rebalances and ownership rows. With ``what_if`` the group's assignment-interval what-if
    rows too (``interval_whatif``), its estimated time per assignor run arriving as a ``RUN_COST_EVENT`` row among
    its events (taken out before the walk).

    The columns go to Python lists once each and the events are built straight from them: no pandas frame, no
    per-row dicts (the pandas form spent about as long on frames and ``to_dict`` as the rules on the events); the
    walk runs with the worker's collector run less often (``workers.fewer_collections``)."""
    import pyarrow as pa

    names = schema.names

    def run(table: pa.Table) -> pa.Table:
        if table.num_rows == 0:
            return schema.empty_table()
        columns = {name: table.column(name).to_pylist() for name in EVENT_COLUMNS}
        kinds, partitions, offsets = columns["event"], columns["partition"], columns["offset"]
        run_ms = None
        for i in [i for i, kind in enumerate(kinds) if kind == RUN_COST_EVENT]:
            run_ms = json.loads(columns["details"][i]).get("run_ms")
        last = float("inf")  # an event without a position sorts after the others, as pandas put NaN last
        order = sorted((i for i in range(table.num_rows) if kinds[i] != RUN_COST_EVENT), key=lambda i: (
            last if partitions[i] is None else partitions[i], last if offsets[i] is None else offsets[i],
            EVENT_RANK.get(kinds[i], 2)))
        rows = list(zip(*(columns[name] for name in ("event", "group_id", "group_type", "partition", "offset",
                                                      "timestamp", "member_id", "details"))))
        with fewer_collections():
            events = [Event.of(*rows[i]) for i in order]
            timeline = GroupTimeline(members=members)
            findings, rebalances = audit_group(events, settings, end_time_ms=end_time_ms, timeline=timeline) \
                if events else ([], [])
            whatif = what_if_rows_of_group(events, settings.broker, run_ms=run_ms, end_time_ms=end_time_ms,
                                           candidates=what_if.candidates_ms, budget=what_if.budget) \
                if what_if is not None and what_if.what_if and events else []
        out = [dict(row, kind="context") for row in timeline.context]
        if not context_only:
            out += [{"kind": "finding", "payload": json.dumps(f.to_dict())} for f in findings]
            out += [{"kind": "rebalance", "payload": json.dumps(r)} for r in rebalances]
            out += [dict(row, kind="ownership") for row in timeline.ownership]
            out += [{"kind": "whatif", "payload": json.dumps(r)} for r in whatif]
        if not out:
            return schema.empty_table()
        group_id = columns["group_id"][0]
        values = {name: [row.get(name) for row in out] for name in names}
        values["group_id"] = [group_id] * len(out)
        return pa.Table.from_arrays([pa.array(values[f.name], type=f.type) for f in schema], schema=schema)

    return run


def walk_groups(events, settings: Settings, end_time_ms: int | None, *, members: bool = True,
                context_only: bool = False, what_if: CoordinatorOptions | None = None):
    """Each group's events through the pure walk, grouped by group id: ``_OUTPUT_DDL`` rows (findings and
    rebalances as JSON payloads, the timeline's context and ownership rows as columns); ``members`` and
    ``context_only`` as ``_audit_groups`` takes them."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    output_type = _parse_datatype_string(_OUTPUT_DDL)
    assert isinstance(output_type, StructType)
    schema = to_arrow_schema(output_type)
    return by_group(events.select(*EVENT_COLUMNS)).groupBy("group_id").applyInArrow(
        _audit_groups(settings, end_time_ms, schema, members=members, context_only=context_only, what_if=what_if),
        _OUTPUT_DDL)


def latency_summary(rebalances):
    """p50/p95/p99/max of the latency metrics per (group, day), (group type, day) and group type."""
    from pyspark.sql import functions as F

    # SQL text, one ``agg`` and one ``selectExpr``: the same expressions as built column by column, at a
    # few Py4J calls instead of a few hundred (each ``withColumn`` also analysed the plan again).
    qs = ", ".join(str(q) for _, q in PERCENTILES)
    aggs = ["count(1) AS rebalances", "CAST(sum(CAST(complete AS INT)) AS BIGINT) AS complete",
            "flatten(collect_list(CASE WHEN size(causes) > 0 THEN causes ELSE array('unknown') END)) AS _causes"]
    for metric in LATENCY_METRICS:
        aggs += [f"percentile({metric}, array({qs})) AS _{metric}", f"CAST(max({metric}) AS DOUBLE) AS {metric}_max"]
    # Rebalances per cause (summarize_latency's ``causes``): a bump with two causes counts for both.
    causes = ("transform(array_sort(array_distinct(_causes)), c -> named_struct('cause', c, "
              "'rebalances', cast(size(filter(_causes, x -> x = c)) as bigint))) AS causes")
    metrics = [column for m in LATENCY_METRICS
               for column in [f"_{m}[{i}] AS {m}_{q}" for i, (q, _) in enumerate(PERCENTILES)] + [f"{m}_max"]]

    # The three levels as grouping sets of one aggregate: one shuffle of the rebalances, not one per level.
    # ``grouping_id()`` says which set a row belongs to (a bit per key left out: group_type, group_id, day), so a
    # null in the data stays a group of its own, as a ``groupBy`` per level kept it.
    keys = ("group_type", "group_id", "day")
    levels = {0: ("group_day", keys), 2: ("group_type_day", ("group_type", "day")), 3: ("group_type", ("group_type",))}
    df = rebalances.groupingSets([list(level_keys) for _, level_keys in levels.values()], *keys).agg(
        *[F.expr(a) for a in aggs], F.expr("grouping_id()").alias("_set"))
    level = "CASE _set " + " ".join(f"WHEN {set_id} THEN '{name}'" for set_id, (name, _) in levels.items()) + \
        " END AS level"
    columns = [level, *[f"`{key}`" for key in keys], "rebalances", "complete", causes, *metrics]
    return df.selectExpr(*columns)


def _assignor_mismatches(assignor_audit, rules):
    from pyspark.sql import functions as F

    if assignor_audit is None or not rules["assignor_mismatch"].enabled or "match" not in assignor_audit.columns:
        return None

    def run(batches):
        for pdf in batches:
            rows = [{k: (None if _isnull(v) else _plain(v)) for k, v in r.items()} for r in pdf.to_dict("records")]
            found = [f.to_dict() for f in assignor_findings(rows, rules)]
            yield pd.DataFrame(found, columns=[c.split()[0] for c in FINDING_ROW_DDL.split(", ")])

    mismatched = assignor_audit.filter(F.col("match") == F.lit(False))
    json_safe = [F.to_json(F.col(c)).alias(c) if dict(mismatched.dtypes)[c].startswith(("struct", "map", "array"))
                 else F.col(c) for c in mismatched.columns]
    return mismatched.select(*json_safe).mapInPandas(run, FINDING_ROW_DDL)


def _isnull(v) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _plain(v):
    if hasattr(v, "item"):
        return v.item()
    if hasattr(v, "to_pydatetime"):
        return v.to_pydatetime()
    return v


#: ``audit``'s ``end_time_ms`` when the caller has not computed it (None is a value: a log without any time).
_UNKNOWN = object()


def _tables_of(replay_tables: ReplayTables | dict) -> ReplayTables:
    if isinstance(replay_tables, ReplayTables):
        return replay_tables
    by_name: dict[str, Any] = {name: replay_tables.get(name) for name in ReplayTables.ddls(outputs_only=False)}
    return ReplayTables(**by_name)


def log_times(replay_tables: ReplayTables | dict, decoded=None):
    """One column, ``timestamp``, whose greatest value is the log's end as the audit measures it (``end_time_ms``):
    the latest time of any group event or offset event (the digest's few rows stand for the commit records:
    ``ResolvedCommits.times``). A caller that computes the replay's tables anyway can take its maximum in the same
    Spark action (``plans.materialize``) and hand it to ``audit``."""
    from pyspark.sql import functions as F

    tables = _tables_of(replay_tables)
    times = tables.group_events.filter(F.col("group_id").isNotNull()).select("timestamp")
    commit_log = _resolved_commits(tables, decoded)
    if commit_log is not None:
        times = times.unionByName(commit_log.times())
    return times


def audit(replay_tables: ReplayTables | dict, assignor_audit=None, settings: Settings | None = None, *,
          quarantined=None, decoded=None, records: int | None = None, clock_blocks=None,
          end_time_ms=_UNKNOWN, nothing_quarantined: bool = False) -> AuditTables:
    """Findings, rebalances, latency summary and rebalance causes from the replay's tables and the assignor
    audit's rows (``None`` when the assignor audit is off).

    Group events go through the pure per-group walk (``walk_groups``, ``applyInArrow``); the offset rules run as Spark SQL
    over the replay's resolved commit log (``replay_tables.offset_commits``, or resolved here from
    ``decoded`` when the replay mode left it out); with ``quarantined`` (the codec's quarantine rows) the
    findings carry the data-gap columns (``audit.gaps``) as the ``findings`` table is written. ``records``: how
    many records the log held, when the caller knows (the job's counts): below ``HOT_BLOCKS_MIN_RECORDS`` the pending
    rule tracks every transaction, as it would judge them anyway, without the stages that leave most of them out.
    ``clock_blocks``: the pending rule's clock bound per block, from the caller's tally of the decoded log
    (``offsets_spark.clock_blocks``); without it the rule aggregates the events. ``end_time_ms``: the log's end, the
    greatest ``log_times`` of the same tables, when the caller has it; without it one Spark query computes it.
    ``nothing_quarantined``: the caller's counts show ``quarantined`` empty (no finding has a data gap then)."""
    from pyspark.sql import functions as F

    settings = settings or Settings()
    rules = settings.rules or default_rule_settings()
    tables = _tables_of(replay_tables)
    events = tables.group_events.select(*EVENT_COLUMNS).filter(F.col("group_id").isNotNull())
    commit_log = _resolved_commits(tables, decoded)
    group_times = events.select("group_id", "partition", "offset", "timestamp")
    if end_time_ms is _UNKNOWN:  # the log's end: one query over the group and offset events' times
        end_time_ms = log_times(tables, decoded).agg(F.max("timestamp")).first()[0]
    # The walk's context rows leave the members out (``GroupTimeline``): only the non-owner rule reports them, and
    # only the groups it reports are walked again with them (``with_members``), on a healthy cluster none.
    # The coordinator load: one pass per __consumer_offsets partition over the recorded assignments and their timed
    # re-runs; each group's estimated time per run joins its events for the what-if in the walk.
    options = coordinator_options(settings)
    per_partition_rows = partition_rows(tables.target_assignments, assignor_audit, tables.group_state,
                                        options).persist()
    per_partition = cached_leaf(per_partition_rows)
    walked = events
    if options.what_if:
        walked = events.unionByName(cost_events(per_partition.filter(F.col("kind") == "cost")))
    walk = walk_groups(walked, settings, end_time_ms, members=False, what_if=options).persist()
    out = cached_leaf(walk)  # every table below reads the walk's rows: planned over its cache, not its lineage
    timeline_columns = ["group_id", "kind", *[c.split()[0] for c in TIMELINE_DDL.split(", ")]]

    def with_members(group_ids):
        walked = walk_groups(events.join(group_ids, "group_id", "left_semi"), settings, end_time_ms, members=True,
                             context_only=True)
        return walked.select(*timeline_columns)

    cached = [walk, per_partition_rows]
    findings = (out.filter(F.col("kind") == "finding").select(F.from_json("payload", FINDING_ROW_DDL).alias("f"))
                .select("f.*"))
    findings = findings.unionByName(per_partition.filter(F.col("kind") == "finding")
                                    .select(F.from_json("payload", FINDING_ROW_DDL).alias("f")).select("f.*"))
    if commit_log is not None:
        timeline = out.filter(F.col("kind").isin("context", "ownership")).select(*timeline_columns)
        offsets = offset_findings(commit_log, group_times, timeline, rules, settings.topic_ids, end_time_ms,
                                  cached=cached,
                                  members_context=with_members,
                                  hot_blocks_only=records is None or records >= HOT_BLOCKS_MIN_RECORDS,
                                  clock_blocks=clock_blocks)
        if offsets is not None:
            findings = findings.unionByName(offsets)
    mismatches = _assignor_mismatches(assignor_audit, rules)
    if mismatches is not None:
        findings = findings.unionByName(mismatches)
    findings = findings.withColumn("time", F.timestamp_millis(F.col("time")))
    if quarantined is not None:
        from .gaps import mark_data_gaps, without_gaps

        findings = (without_gaps(findings) if nothing_quarantined else
                    mark_data_gaps(findings, quarantined, trust_after_gap=settings.check.trust_after_gap))
    rebalances = (out.filter(F.col("kind") == "rebalance").select(F.from_json("payload", REBALANCES_DDL).alias("r"))
                  .select("r.*"))
    rebalances = rebalances.select(*[c for c in REBALANCE_COLUMNS])
    load = (per_partition.filter(F.col("kind") == "load").select(F.from_json("payload", LOAD_DDL).alias("r"))
            .select("r.*"))
    whatif = (out.filter(F.col("kind") == "whatif").select(F.from_json("payload", WHATIF_DDL).alias("r"))
              .select("r.*"))
    return AuditTables(findings=findings, rebalances=rebalances, latency_summary=latency_summary(rebalances),
                       rebalance_causes=rebalance_causes(rebalances), coordinator_load=load,
                       assignment_interval_whatif=whatif.unionByName(whatif_cluster(whatif)), cached=tuple(cached))


def whatif_cluster(group_rows):
    """The cluster-wide rows of ``assignment_interval_whatif`` (``interval_whatif.cluster_rows`` as Spark
    aggregates): per candidate interval every group at it, and every group at its recommendation."""
    from pyspark.sql import functions as F

    sums = ("bumps", "recorded_runs", "runs", "runs_saved", "unanswered_bumps", "coordinator_ms")
    maxima = ("time_to_assignment_p95_ms", "time_to_assignment_max_ms", "added_p95_ms")
    aggs = [F.count(F.lit(1)).cast("int").alias("groups"), *[F.sum(c).alias(c) for c in sums],
            *[F.max(c).alias(c) for c in maxima]]
    types = dict(_fields_of(WHATIF_DDL))

    # Both kinds of cluster row from one aggregate (one shuffle): each group row stands once for its interval's
    # candidate row and, when recommended, once more for the "recommended" row (whose interval is none).
    kinds = F.explode(F.array(F.lit("candidate"), F.when(F.col("recommended"), F.lit("recommended")))).alias("candidate")
    rows = (group_rows.filter(F.col("level") == "group").select(kinds, "interval_ms", *sums, *maxima)
            .filter(F.col("candidate").isNotNull())
            .withColumn("interval_ms", F.when(F.col("candidate") == "candidate", F.col("interval_ms"))))
    totals = rows.groupBy("candidate", "interval_ms").agg(*aggs)
    given = set(totals.columns)
    return totals.select(*[F.col(c).cast(types[c]).alias(c) if c in given else
                           (F.lit("cluster") if c == "level" else F.lit(None)).cast(types[c]).alias(c)
                           for c in WHATIF_COLUMNS])


def _fields_of(ddl: str) -> list[tuple[str, str]]:
    return [tuple(part.split(" ", 1)) for part in ddl.split(", ")]  # type: ignore[misc]


def _resolved_commits(tables: ReplayTables, decoded):
    """The replay's resolved commit log as the offset rules read it: its digest with the decoded commit records
    (the batch replay), else the whole log, else one resolved from ``decoded``; None without any of them."""
    from offsets_audit.replay.commit_log import ResolvedCommits, commit_records, resolve_commits

    if tables.commit_digest is not None and tables.commit_records is not None:
        return ResolvedCommits.of_digest(tables.commit_digest, tables.commit_records, runs=tables.commit_runs)
    if tables.commit_digest is not None and decoded is not None:
        return ResolvedCommits.of_digest(tables.commit_digest, commit_records(decoded))
    if tables.offset_commits is not None:
        return ResolvedCommits.of_log(tables.offset_commits)
    if decoded is not None:
        return ResolvedCommits.of_log(resolve_commits(decoded))
    return None


def rebalance_causes(rebalances):
    """``rebalance_causes``: rebalances per (group, day, cause) and per (client id, client host, day).

    The Spark form of ``causes.summarize_causes`` (same rows): a client counts once per rebalance it took
    part in as a cause member, ``groups`` is how many groups it rebalanced that day.
    """
    from pyspark.sql import functions as F

    per_cause = (rebalances.select("group_type", "group_id", "day", F.explode(
        F.when(F.size("causes") > 0, F.col("causes")).otherwise(F.array(F.lit("unknown")))).alias("cause"))
        .groupBy("group_type", "group_id", "day", "cause")
        .agg(F.count(F.lit(1)).alias("rebalances"))
        .select(F.lit("group_day_cause").alias("level"), "group_type", "group_id", "day", "cause",
                F.lit(None).cast("string").alias("client_id"), F.lit(None).cast("string").alias("client_host"),
                "rebalances", F.lit(1).cast("long").alias("groups")))
    # Per client one aggregate (one shuffle): the rebalances it took part in are its distinct (group, epoch, bump)
    # triples, a set per (client, host, day), as a ``dropDuplicates`` then a count and a distinct count of the
    # groups would give in three.
    rebalance = F.struct("group_id", "group_type", "group_epoch", "bump_offset")
    per_client = (rebalances.select(rebalance.alias("_rebalance"), "group_id", "day",
                                    F.explode("cause_members").alias("m"))
                  .groupBy(F.col("m.client_id").alias("client_id"), F.col("m.client_host").alias("client_host"),
                           "day")
                  .agg(F.size(F.collect_set("_rebalance")).cast("long").alias("rebalances"),
                       F.size(F.collect_set("group_id")).cast("long").alias("groups"))
                  .select(F.lit("client_day").alias("level"), F.lit(None).cast("string").alias("group_type"),
                          F.lit(None).cast("string").alias("group_id"), "day", F.lit(None).cast("string").alias("cause"),
                          "client_id", "client_host", "rebalances", "groups"))
    return per_cause.unionByName(per_client)
