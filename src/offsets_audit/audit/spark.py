"""Spark edge of the audit: ``audit(tables, config, decoded=None) -> {findings, rebalances, latency_summary}``.

The replay's ``group_events`` (plus offset-commit events derived from the decoded records, which the
batch replay keeps Spark-native) go through the pure ``audit_group`` once per group with
``groupBy("group_id").applyInPandas``; latency percentiles are Spark aggregates (exact ``percentile``,
the same linear interpolation as ``latency.percentile``); ``assignor_audit`` rows that do not match
become ``assignor_mismatch`` findings with ``mapInPandas``.
"""
from __future__ import annotations

import json

import pandas as pd

from .engine import audit_group
from .latency import LATENCY_METRICS, PERCENTILES, REBALANCE_COLUMNS
from .rules.assignor import assignor_findings
from .rules.registry import rule_settings

FINDINGS_DDL = ("id string, group_id string, group_type string, rule string, severity string, time timestamp, "
                "message string, evidence array<string>, details string")
_FINDING_ROW_DDL = ("id string, group_id string, group_type string, rule string, severity string, time long, "
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
_OUTPUT_DDL = "kind string, payload string"
EVENT_COLUMNS = ("partition", "offset", "timestamp", "group_id", "group_type", "event", "member_id", "details")

#: Within one record the replay emits group creation before the record's own events.
_EVENT_RANK = {"replay_anomaly": 0, "group_created": 1, "group_type_changed": 1}


def _audit_groups(config: dict, end_time_ms: int | None):
    settings = rule_settings(config)

    def run(pdf: pd.DataFrame) -> pd.DataFrame:
        pdf = pdf.assign(_rank=pdf["event"].map(lambda e: _EVENT_RANK.get(e, 2)))
        pdf = pdf.sort_values(["partition", "offset", "_rank"], kind="stable")
        events = pdf[list(EVENT_COLUMNS)].to_dict("records")
        findings, rebalances = audit_group(events, config, settings=settings, end_time_ms=end_time_ms)
        out = [("finding", json.dumps(f.to_dict())) for f in findings]
        out += [("rebalance", json.dumps(r)) for r in rebalances]
        return pd.DataFrame(out, columns=["kind", "payload"])

    return run


def offset_events(decoded_df):
    """Offset-commit events (docs/replay.md layout) from decoded records, for the offset rules.

    Plain commits -> ``offset_committed``; tombstones -> ``offset_expired_or_deleted``; transactional
    commits -> ``txn_offset_pending`` plus, at their producer's next marker on that partition,
    ``txn_offset_committed`` / ``txn_offset_aborted`` (``OffsetMetadataManager.replayEndTransactionMarker``).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ok = decoded_df.filter(F.col("error_code").isNull())
    commits = ok.filter(F.col("record_type").isin(0, 1) & ~F.coalesce(F.col("is_control"), F.lit(False))).select(
        F.col("partition").cast("int").alias("partition"), F.col("offset").cast("long").alias("offset"),
        (F.unix_micros(F.col("timestamp")) / 1000).cast("long").alias("timestamp"), "group_id",
        F.col("topic_name").alias("topic"), F.col("topic_partition").alias("topic_partition"),
        F.coalesce(F.col("producer_id"), F.lit(-1)).alias("producer_id"),
        F.col("value").isNull().alias("is_tombstone"),
        F.get_json_object("value_json", "$.offset").cast("long").alias("committed_offset"),
        F.get_json_object("value_json", "$.topicId").alias("topic_id"),
    )

    def details(*extra):
        return F.to_json(F.struct(F.col("topic"), F.col("topic_partition").alias("partition"),
                                  F.col("committed_offset"), F.col("topic_id"),
                                  F.col("offset").alias("record_offset"), F.col("producer_id"), *extra))

    def shape(df, event):
        return df.select("partition", "offset", "timestamp", "group_id",
                         F.lit(None).cast("string").alias("group_type"), F.lit(event).alias("event"),
                         F.lit(None).cast("string").alias("member_id"), "details")

    plain = commits.filter(~F.col("is_tombstone") & (F.col("producer_id") == -1)).withColumn("details", details())
    gone = commits.filter("is_tombstone").withColumn("details", details())
    txn = commits.filter(~F.col("is_tombstone") & (F.col("producer_id") != -1))
    markers = decoded_df.filter(F.coalesce(F.col("is_control"), F.lit(False))).select(
        F.col("partition").cast("int").alias("partition"), "producer_id",
        F.col("offset").cast("long").alias("marker_offset"), "control_type",
        (F.unix_micros(F.col("timestamp")) / 1000).cast("long").alias("marker_time"))
    resolved = (txn.join(markers, ["partition", "producer_id"])
                .filter(F.col("marker_offset") > F.col("offset"))
                .withColumn("_rank", F.row_number().over(
                    Window.partitionBy("partition", "offset").orderBy("marker_offset")))
                .filter("_rank = 1")
                .withColumn("details", details(F.lit(True).alias("applied")))
                .select(F.col("partition"), F.col("marker_offset").alias("offset"), F.col("marker_time").alias("timestamp"),
                        "group_id", "details",
                        F.when(F.col("control_type") == "COMMIT", F.lit("txn_offset_committed"))
                        .otherwise(F.lit("txn_offset_aborted")).alias("event")))
    return (shape(plain, "offset_committed")
            .unionByName(shape(gone, "offset_expired_or_deleted"))
            .unionByName(shape(txn.withColumn("details", details()), "txn_offset_pending"))
            .unionByName(resolved.select("partition", "offset", "timestamp", "group_id",
                                         F.lit(None).cast("string").alias("group_type"), "event",
                                         F.lit(None).cast("string").alias("member_id"), "details")))


def latency_summary(rebalances):
    """p50/p95/p99/max of the latency metrics per (group, day), (group type, day) and group type."""
    from pyspark.sql import functions as F

    def level(name, keys):
        aggs = [F.count(F.lit(1)).alias("rebalances"),
                F.sum(F.col("complete").cast("int")).cast("long").alias("complete")]
        for metric in LATENCY_METRICS:
            qs = ", ".join(str(q) for _, q in PERCENTILES)
            aggs.append(F.expr(f"percentile({metric}, array({qs}))").alias(f"_{metric}"))
            aggs.append(F.max(metric).cast("double").alias(f"{metric}_max"))
        df = rebalances.groupBy(*keys).agg(*aggs)
        for metric in LATENCY_METRICS:
            for i, (name_q, _) in enumerate(PERCENTILES):
                df = df.withColumn(f"{metric}_{name_q}", F.col(f"_{metric}")[i])
            df = df.drop(f"_{metric}")
        for key in ("group_type", "group_id", "day"):
            if key not in keys:
                df = df.withColumn(key, F.lit(None).cast("string"))
        columns = ["level", "group_type", "group_id", "day", "rebalances", "complete"]
        columns += [f"{m}_{q}" for m in LATENCY_METRICS for q in [n for n, _ in PERCENTILES] + ["max"]]
        return df.withColumn("level", F.lit(name)).select(*columns)

    return (level("group_day", ["group_type", "group_id", "day"])
            .unionByName(level("group_type_day", ["group_type", "day"]))
            .unionByName(level("group_type", ["group_type"])))


def _assignor_mismatches(assignor_audit, config: dict):
    from pyspark.sql import functions as F

    settings = rule_settings(config)
    if assignor_audit is None or not settings["assignor_mismatch"]["enabled"] or "match" not in assignor_audit.columns:
        return None

    def run(batches):
        for pdf in batches:
            rows = [{k: (None if _isnull(v) else _plain(v)) for k, v in r.items()} for r in pdf.to_dict("records")]
            found = [f.to_dict() for f in assignor_findings(rows, settings)]
            yield pd.DataFrame(found, columns=[c.split()[0] for c in _FINDING_ROW_DDL.split(", ")])

    mismatched = assignor_audit.filter(F.col("match") == F.lit(False))
    json_safe = [F.to_json(F.col(c)).alias(c) if dict(mismatched.dtypes)[c].startswith(("struct", "map", "array"))
                 else F.col(c) for c in mismatched.columns]
    return mismatched.select(*json_safe).mapInPandas(run, _FINDING_ROW_DDL)


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


def audit(tables: dict, config: dict, decoded=None) -> dict:
    """Findings, rebalances and latency summary from the replay tables (and the decoded records)."""
    from pyspark.sql import functions as F

    rule_settings(config)  # a config mistake fails here, on the driver, with the key it names
    events = tables["group_events"].select(*EVENT_COLUMNS)
    if decoded is not None:
        events = events.unionByName(offset_events(decoded))
    events = events.filter(F.col("group_id").isNotNull())
    end_time_ms = events.agg(F.max("timestamp")).first()[0]
    out = events.groupBy("group_id").applyInPandas(_audit_groups(config, end_time_ms), _OUTPUT_DDL).cache()

    findings = (out.filter(F.col("kind") == "finding").select(F.from_json("payload", _FINDING_ROW_DDL).alias("f"))
                .select("f.*"))
    mismatches = _assignor_mismatches(tables.get("assignor_audit"), config)
    if mismatches is not None:
        findings = findings.unionByName(mismatches)
    findings = findings.withColumn("time", F.timestamp_millis(F.col("time")))
    rebalances = (out.filter(F.col("kind") == "rebalance").select(F.from_json("payload", REBALANCES_DDL).alias("r"))
                  .select("r.*"))
    rebalances = rebalances.select(*[c for c in REBALANCE_COLUMNS])
    return {"findings": findings, "rebalances": rebalances, "latency_summary": latency_summary(rebalances),
            "rebalance_causes": rebalance_causes(rebalances)}


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
    members = rebalances.select("group_id", "group_type", "group_epoch", "bump_offset", "day",
                                F.explode("cause_members").alias("m"))
    per_client = (members.select("group_id", "group_type", "group_epoch", "bump_offset", "day",
                                 F.col("m.client_id").alias("client_id"), F.col("m.client_host").alias("client_host"))
                  .dropDuplicates(["group_id", "group_type", "group_epoch", "bump_offset", "day", "client_id",
                                   "client_host"])
                  .groupBy("client_id", "client_host", "day")
                  .agg(F.count(F.lit(1)).alias("rebalances"), F.countDistinct("group_id").alias("groups"))
                  .select(F.lit("client_day").alias("level"), F.lit(None).cast("string").alias("group_type"),
                          F.lit(None).cast("string").alias("group_id"), "day", F.lit(None).cast("string").alias("cause"),
                          "client_id", "client_host", "rebalances", "groups"))
    return per_cause.unionByName(per_client)
