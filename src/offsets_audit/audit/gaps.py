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


def mark_data_gaps(findings, quarantined, *, trust_after_gap: bool):
    """``findings`` with ``data_gap`` and ``data_gap_quarantined`` (quarantine rows before its evidence)
    and, unless ``trust_after_gap`` (``check.trust_after_gap``), severity capped at ``warning`` where ``data_gap`` is true."""
    from pyspark.sql import functions as F

    from offsets_audit.plans import quoted

    # SQL text: the same expressions as built column by column, in a few Py4J calls (this runs for every run's
    # findings and, in incremental runs, for the provisional ones too).
    gaps = quarantined.selectExpr("CAST(`partition` AS INT) AS _gap_partition",
                                  "CAST(coalesce(`offset`, batch_base_offset) AS BIGINT) AS _gap_offset",
                                  "group_id AS _gap_group")
    evidence = (findings.selectExpr("id", "group_id", "explode(evidence) AS _record")
                .selectExpr("id", "group_id", "CAST(split(_record, ':')[0] AS INT) AS _partition",
                            "CAST(split(_record, ':')[1] AS BIGINT) AS _offset")
                .groupBy("id", "group_id", "_partition").agg(F.expr("max(_offset) AS _last_offset")))
    before = evidence.join(gaps, F.expr(
        "_gap_partition = _partition AND (_gap_offset IS NULL OR _gap_offset < _last_offset)"
        " AND (_gap_group IS NULL OR _gap_group = group_id)"))
    counted = before.groupBy("id").agg(F.expr("count(1) AS data_gap_quarantined"), F.expr("min(_partition) AS _gap_on"))
    trust = trust_after_gap
    above = ", ".join(f"'{s}'" for s in _SEVERITIES_ABOVE_CAP)
    capped = f"(data_gap AND severity IN ({above}) AND {'false' if trust else 'true'})"
    note = ("concat(' [after a data gap: ', CAST(data_gap_quarantined AS STRING), ' quarantined record(s) on partition ', "
            "CAST(_gap_on AS STRING), ' before this evidence, so the replay may have missed records', "
            f"CASE WHEN {capped} THEN concat('; severity capped from ', severity, "
            f"' to {CAPPED_SEVERITY}; set check.trust_after_gap: true to keep it') ELSE '' END, ']')")
    changed = {"message": f"CASE WHEN data_gap THEN concat(message, {note}) ELSE message END AS message",
               "severity": f"CASE WHEN {capped} THEN '{CAPPED_SEVERITY}' ELSE severity END AS severity"}
    joined = findings.join(counted, "id", "left").selectExpr(
        *[quoted(c) for c in findings.columns], "_gap_on",
        "coalesce(data_gap_quarantined, CAST(0 AS BIGINT)) AS data_gap_quarantined")
    marked = joined.selectExpr("*", "data_gap_quarantined > 0 AS data_gap")
    return marked.selectExpr(*[changed.get(c, quoted(c)) for c in findings.columns], "data_gap", "data_gap_quarantined")


def without_gaps(findings):
    """``mark_data_gaps`` of ``findings`` when the quarantine holds no row (the caller's counts say so): no finding
    has a gap before it, so every one keeps its message and severity, ``data_gap`` false and
    ``data_gap_quarantined`` 0, with no plan over the empty quarantine."""
    return findings.selectExpr("*", "false AS data_gap", "CAST(0 AS BIGINT) AS data_gap_quarantined")
