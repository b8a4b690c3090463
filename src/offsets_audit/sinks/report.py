"""The HTML report of one run, written beside its tables: reads back what the sinks wrote (under a path or by
name), keeps what the page shows (a few thousand rows at most) and writes ``<output.path>/report/<run_id>.html``
with ``offsets_audit.audit.report.render_report``."""

from __future__ import annotations

import datetime as _dt
import json

from offsets_audit.audit.report import render_report, worst_groups
from offsets_audit.sinks import Output, write_text_file


def _rows(df) -> list[dict]:
    return [] if df is None else [r.asDict(recursive=True) for r in df.collect()]


def write_report(spark, output: Output, run_id: str, summary: dict) -> str:
    """Read this run's findings / rebalances / latency / events (with their known schemas, empty when the run had
    none) and write ``<output.path>/report/<run_id>.html``."""
    from pyspark.sql import functions as F

    findings_df = output.read_table(spark, "findings", run_id)
    rebalances_df = output.read_table(spark, "rebalances", run_id)
    findings = []
    for row in _rows(findings_df):
        t = row.get("time")
        row["time"] = None if t is None else int(t.replace(tzinfo=t.tzinfo or _dt.timezone.utc).timestamp() * 1000)
        findings.append(row)
    rebalances = _rows(rebalances_df)
    latency = _rows(output.read_table(spark, "latency_summary", run_id))
    timelines: dict[str, list[dict]] = {}
    events_df = output.read_table(spark, "group_events", run_id)
    worst = worst_groups(findings, [r for r in rebalances if r.get("group_type") != "classic"])
    if events_df is not None and worst:
        wanted = events_df.filter(F.col("group_id").isin(worst) & F.col("event").isin(
            "group_epoch_bumped", "target_assignment_computed", "member_epoch_advanced"))
        for row in wanted.orderBy("partition", "offset").limit(20_000).collect():
            event = row.asDict()
            event["details"] = json.loads(event["details"] or "{}")
            timelines.setdefault(event["group_id"], []).append(event)
    load, load_totals = _coordinator_load(output.read_table(spark, "coordinator_load", run_id))
    whatif = _whatif(output.read_table(spark, "assignment_interval_whatif", run_id))
    html_text = render_report({"run_id": run_id, "summary": summary, "findings": findings, "rebalances": rebalances,
                               "latency_summary": latency, "coordinator_load": load,
                               "coordinator_load_totals": load_totals,
                               "assignment_interval_whatif": whatif,
                               "timelines": {g: timelines[g] for g in worst if g in timelines}})
    return write_text_file(spark, output.path, f"report/{run_id}.html", html_text)


#: the busiest partition-minutes the report reads (its chart and table show fewer)
LOAD_ROWS_READ = 500


def _coordinator_load(df) -> tuple[list[dict], dict]:
    """The busiest partition-minutes by estimated time, and the run's totals over every row."""
    if df is None:
        return [], {}
    from pyspark.sql import functions as F

    totals = df.agg(F.sum("assignor_runs").alias("runs"), F.countDistinct("partition").alias("partitions")).first()
    top = df.orderBy(F.col("estimated_ms").desc_nulls_last(), "partition", "minute_start_time").limit(LOAD_ROWS_READ)
    return _rows(top), {"runs": totals["runs"], "partitions": totals["partitions"]}


def _whatif(df) -> list[dict]:
    """The cluster's rows, and the recorded and recommended rows of the groups with the most recorded assignor time."""
    if df is None:
        return []
    from pyspark.sql import functions as F

    from offsets_audit.audit.report import WHATIF_GROUPS_LISTED

    recorded = df.filter((F.col("level") == "group") & (F.col("candidate") == "recorded"))
    top = (recorded.orderBy(F.col("coordinator_ms").desc_nulls_last(), F.col("runs").desc(), "group_id")
           .limit(WHATIF_GROUPS_LISTED).select("group_id"))
    chosen = df.filter((F.col("level") == "group") & (F.col("candidate") == "recorded") | F.col("recommended")) \
        .join(top, "group_id", "left_semi")
    return _rows(df.filter(F.col("level") == "cluster")) + _rows(chosen)
