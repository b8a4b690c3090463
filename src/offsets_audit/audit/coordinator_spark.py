"""Spark edge of the coordinator load: ``coordinator_load(...)`` maps ``audit.coordinator_load`` over partitions.

The recorded target assignments (``target_assignments``) are joined with their re-runs (``assignor_audit``'s
``rerun`` rows and their thread-CPU time, a column of the stage's DataFrame, not of the written table), the groups
of each ``__consumer_offsets`` partition (``group_state``) are added beside them, and one ``applyInArrow`` per
partition runs the pure core: the partition's minutes, its ``coordinator_partition_hogged`` findings, and each
group's mean estimated time per run, which the what-if (run in the audit's per-group walk) multiplies by the runs
each candidate interval gives. The rows are a few per partition-minute: the work is the walk over the recorded
assignments, which the job has already grouped once by group for the re-runs.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from offsets_audit.plans import by_group
from offsets_audit.settings import Settings

from .coordinator_load import (
    LOAD_DDL,
    RUN_COLUMNS,
    HoggedThresholds,
    TimeFactors,
    group_run_ms,
    hogged_findings,
    measured_factors,
    partition_load,
    runs_of,
)
from .interval_whatif import DEFAULT_CANDIDATES_MS, Budget
from .rules.registry import default_rule_settings

_OUTPUT_DDL = "partition int, kind string, group_id string, run_ms double, payload string"
#: The event a group's mean estimated time per run travels as into the per-group walk (``audit.spark``).
RUN_COST_EVENT = "coordinator_run_cost"


@dataclass(frozen=True)
class CoordinatorOptions:
    """What the coordinator-load and what-if stages are configured with: the per-assignor time factors, the
    hogged rule's switch, severity and thresholds, the candidate intervals and the recommendation's budget."""

    factors: TimeFactors
    hogged_enabled: bool = True
    hogged_severity: str = "warning"
    thresholds: HoggedThresholds = HoggedThresholds()
    candidates_ms: tuple[int, ...] = DEFAULT_CANDIDATES_MS
    budget: Budget = Budget()
    what_if: bool = True


def coordinator_options(settings: Settings) -> CoordinatorOptions:
    """The options of a run's settings (``coordinator_load:`` and ``rules.coordinator_partition_hogged``)."""
    section = settings.coordinator_load
    rules = settings.rules or default_rule_settings()
    rule = rules["coordinator_partition_hogged"]
    return CoordinatorOptions(
        factors=measured_factors().with_overrides(section.time_factors),
        hogged_enabled=rule.enabled, hogged_severity=rule.severity,
        thresholds=HoggedThresholds(**{name: int(rule.threshold(name)) for name in
                                       ("min_group_share_pct", "min_busy_ms", "min_neighbours")}),
        candidates_ms=tuple(section.candidate_intervals_ms) or DEFAULT_CANDIDATES_MS,
        budget=Budget(max_share=section.budget_pct / 100, max_added_heartbeats=section.max_added_heartbeats),
        what_if=section.what_if)


def _partition_core(options: CoordinatorOptions, schema):
    """The applyInArrow body: one partition's runs and groups through the pure core."""
    import pyarrow as pa

    def run(table: pa.Table) -> pa.Table:
        if table.num_rows == 0:
            return schema.empty_table()
        columns = {name: table.column(name).to_pylist() for name in ("kind", *RUN_COLUMNS)}
        rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
        partition = rows[0]["partition"]
        neighbours = sorted({r["group_id"] for r in rows if r["group_id"] is not None})
        runs = runs_of([r for r in rows if r["kind"] == "run"], options.factors)
        load = partition_load(runs, groups_on_partition=len(neighbours))
        out: list[dict] = [{"kind": "load", "payload": json.dumps(row)} for row in load]
        if options.hogged_enabled:
            findings = hogged_findings(load, runs, neighbours, options.thresholds, options.hogged_severity)
            out += [{"kind": "finding", "group_id": f.group_id, "payload": json.dumps(f.to_dict())} for f in findings]
        out += [{"kind": "cost", "group_id": gid, "run_ms": ms} for gid, ms in sorted(group_run_ms(runs).items())]
        values = {f.name: [r.get(f.name) for r in out] for f in schema}
        values["partition"] = [partition] * len(out)
        return pa.Table.from_arrays([pa.array(values[f.name], type=f.type) for f in schema], schema=schema)

    return run


def coordinator_load(target_assignments, assignor_audit, group_state, options: CoordinatorOptions):
    """``(load, findings, costs)``: the ``coordinator_load`` rows (``LOAD_DDL``), the hogged findings
    (``FINDING_ROW_DDL`` as JSON ``payload``) and each group's ``run_ms``, from one pass per partition (persist
    the result's source, ``partition_rows``, when more than one of them is computed)."""
    rows = partition_rows(target_assignments, assignor_audit, group_state, options)
    return (rows.filter("kind = 'load'").selectExpr(f"from_json(payload, '{LOAD_DDL}') AS r").select("r.*"),
            rows.filter("kind = 'finding'").select("payload"),
            rows.filter("kind = 'cost'").select("partition", "group_id", "run_ms"))


def partition_rows(target_assignments, assignor_audit, group_state, options: CoordinatorOptions):
    """The per-partition pass's ``_OUTPUT_DDL`` rows (``kind`` load, finding or cost)."""
    return partition_pass(run_rows(target_assignments, assignor_audit), group_state, options)


def run_rows(target_assignments, assignor_audit, stored=None):
    """``RUN_DDL`` rows: each recorded target assignment with its re-run's assignor, member count and thread-CPU
    time (``assignor_audit``'s ``rerun`` rows with the timing column; None or without it: not timed).

    ``stored``: run rows of earlier slices of the log (an incremental checkpoint's), given the same way: a stored
    row whose target this ``assignor_audit`` re-runs (one that waited for a topic's name) takes its re-run's
    values, as the whole log's batch run would have given it."""
    from pyspark.sql import functions as F

    from offsets_audit.assignors.rerun import TIMING_COLUMN

    targets = target_assignments.select(
        "group_id", "group_type", "partition", "offset", "timestamp", "assignment_epoch", "assignment_timestamp",
        F.expr("json_array_length(members)").cast("int").alias("num_members"),
        F.lit(None).cast("string").alias("assignor"), F.lit(None).cast("double").alias("rerun_cpu_ms"))
    if stored is not None:
        targets = stored.select(*RUN_COLUMNS).unionByName(targets)
    if assignor_audit is None or TIMING_COLUMN not in assignor_audit.columns:
        return targets.select(*RUN_COLUMNS)
    reruns = assignor_audit.filter(F.col("kind") == "rerun").select(
        "group_id", "partition", "offset", F.col("assignor").alias("r_assignor"),
        F.col("num_members").alias("r_members"), F.col(TIMING_COLUMN).alias("r_cpu"))
    joined = targets.join(reruns, ["group_id", "partition", "offset"], "left")
    return joined.select(*[
        F.coalesce("r_members", "num_members").alias("num_members") if c == "num_members" else
        F.coalesce("r_assignor", "assignor").alias("assignor") if c == "assignor" else
        F.coalesce("r_cpu", "rerun_cpu_ms").alias("rerun_cpu_ms") if c == "rerun_cpu_ms" else F.col(c)
        for c in RUN_COLUMNS])


def partition_pass(runs, group_state, options: CoordinatorOptions):
    """``_OUTPUT_DDL`` rows of ``run_rows``' rows and the groups of each partition (``group_state``): one
    ``applyInArrow`` per ``__consumer_offsets`` partition over the pure core."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    runs = runs.select(F.lit("run").alias("kind"), *RUN_COLUMNS)
    groups = group_state.filter(F.col("partition").isNotNull()).select(
        F.lit("group").alias("kind"), "group_id", *[F.lit(None).cast(t).alias(c) for c, t in (
            ("group_type", "string"),)], "partition", *[F.lit(None).cast(t).alias(c) for c, t in (
                ("offset", "long"), ("timestamp", "long"), ("assignment_epoch", "int"),
                ("assignment_timestamp", "long"), ("num_members", "int"), ("assignor", "string"),
                ("rerun_cpu_ms", "double"))])
    both = runs.unionByName(groups)
    output_type = _parse_datatype_string(_OUTPUT_DDL)
    assert isinstance(output_type, StructType)
    schema = to_arrow_schema(output_type)
    return by_group(both, "partition").groupBy("partition").applyInArrow(_partition_core(options, schema),
                                                                          _OUTPUT_DDL)


def cost_events(costs):
    """Each group's ``run_ms`` as an event row of the audit's walk (``EVENT_COLUMNS``), which takes it out of the
    events before the rules see them and hands it to the what-if."""
    from pyspark.sql import functions as F

    return costs.select(
        "partition", F.lit(None).cast("long").alias("offset"), F.lit(None).cast("long").alias("timestamp"),
        "group_id", F.lit(None).cast("string").alias("group_type"), F.lit(RUN_COST_EVENT).alias("event"),
        F.lit(None).cast("string").alias("member_id"),
        F.to_json(F.struct(F.col("run_ms").alias("run_ms"))).alias("details"))
