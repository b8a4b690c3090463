"""Losses are not cluster errors: mark findings whose group's records have a gap before their evidence.

When records of a ``__consumer_offsets`` partition are quarantined (undecodable, or bytes of a segment
that could not be read), the replay of the groups on that partition misses them, and what comes right
after can look wrong (an epoch that jumps, an assignment with no bump) although Kafka's coordinator, which
had those records, did nothing wrong. So a finding gets ``data_gap = true`` when a quarantine row lies on
one of its evidence partitions before its last evidence offset there, and belongs to its group or to no
known group (an unreadable stretch of bytes could have held anyone's records). Its severity is then capped
at ``warning`` (the message says so and names the switch), unless ``check.trust_after_gap`` is set.

A quarantine row without an offset (a segment-level read error whose batch header was unreadable) is placed
at its claimed ``batch_base_offset``; with neither it is taken to lie before everything.
"""

from __future__ import annotations

#: The columns this step adds to ``findings`` (part of ``offsets_audit.tables.TABLES["findings"]``).
GAP_COLUMNS_DDL = "data_gap boolean, data_gap_quarantined long"
CAPPED_SEVERITY = "warning"
_SEVERITIES_ABOVE_CAP = ("error",)


def mark_data_gaps(findings, quarantined, config: dict):
    """``findings`` with ``data_gap`` and ``data_gap_quarantined`` (quarantine rows before its evidence)
    and, unless ``check.trust_after_gap``, severity capped at ``warning`` where ``data_gap`` is true."""
    from pyspark.sql import functions as F

    trust = bool((config.get("check") or {}).get("trust_after_gap"))
    gaps = quarantined.select(
        F.col("partition").cast("int").alias("_gap_partition"),
        F.coalesce(F.col("offset"), F.col("batch_base_offset")).cast("long").alias("_gap_offset"),
        F.col("group_id").alias("_gap_group"),
    )
    evidence = (findings.select("id", "group_id", F.explode("evidence").alias("_record"))
                .select("id", "group_id",
                        F.split("_record", ":").getItem(0).cast("int").alias("_partition"),
                        F.split("_record", ":").getItem(1).cast("long").alias("_offset"))
                .groupBy("id", "group_id", "_partition").agg(F.max("_offset").alias("_last_offset")))
    before = evidence.join(
        gaps,
        (F.col("_gap_partition") == F.col("_partition"))
        & (F.col("_gap_offset").isNull() | (F.col("_gap_offset") < F.col("_last_offset")))
        & (F.col("_gap_group").isNull() | (F.col("_gap_group") == F.col("group_id"))),
    )
    counted = before.groupBy("id").agg(F.count(F.lit(1)).alias("data_gap_quarantined"),
                                      F.min("_partition").alias("_gap_on"))
    marked = (findings.join(counted, "id", "left")
              .withColumn("data_gap_quarantined", F.coalesce(F.col("data_gap_quarantined"), F.lit(0).cast("long")))
              .withColumn("data_gap", F.col("data_gap_quarantined") > 0))
    capped = F.col("data_gap") & F.col("severity").isin(*_SEVERITIES_ABOVE_CAP) & F.lit(not trust)
    note = F.concat(
        F.lit(" [after a data gap: "), F.col("data_gap_quarantined").cast("string"),
        F.lit(" quarantined record(s) on partition "), F.col("_gap_on").cast("string"),
        F.lit(" before this evidence, so the replay may have missed records"),
        F.when(capped, F.concat(F.lit("; severity capped from "), F.col("severity"),
                                F.lit(f" to {CAPPED_SEVERITY}; set check.trust_after_gap: true to keep it")))
         .otherwise(F.lit("")),
        F.lit("]"))
    marked = (marked.withColumn("message", F.when(F.col("data_gap"), F.concat(F.col("message"), note))
                                .otherwise(F.col("message")))
              .withColumn("severity", F.when(capped, F.lit(CAPPED_SEVERITY)).otherwise(F.col("severity"))))
    columns = [c for c in findings.columns] + ["data_gap", "data_gap_quarantined"]
    return marked.select(*columns)
