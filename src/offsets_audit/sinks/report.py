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
    html_text = render_report({"run_id": run_id, "summary": summary, "findings": findings, "rebalances": rebalances,
                               "latency_summary": latency,
                               "timelines": {g: timelines[g] for g in worst if g in timelines}})
    return write_text_file(spark, output.path, f"report/{run_id}.html", html_text)
