"""Assignor re-runs: a recorded target assignment that Kafka's own assignor would not have produced.

Input is the ``assignor_audit`` table (one row per recorded target assignment re-run with the group's
assignor); a row with ``match`` false becomes a finding when its confidence reaches ``min_confidence``
(the re-run may lack topic metadata, racks or HashMap order, so the assignor audit grades itself). What-if
rows and re-runs that raised are never mismatches.
"""
from __future__ import annotations

import json
from typing import Mapping

from offsets_audit.settings import RuleSettings

from ..model import Finding, finding_id

CONFIDENCE_RANK = {"low": 0, "medium": 1, "high": 2,
                   # the assignor audit's own levels (offsets_audit.assignors.inputs)
                   "inferred": 0, "partition_metadata_record": 1, "metadata_provided": 1, "metadata_verified": 2}


def assignor_findings(rows, rules: Mapping[str, RuleSettings]) -> list[Finding]:
    """``rows``: dicts of the assignor_audit table; returns ``assignor_mismatch`` findings (``rules``: every rule
    id's settings, ``Settings.rules``)."""
    rule = rules["assignor_mismatch"]
    if not rule.enabled:
        return []
    floor = CONFIDENCE_RANK.get(str(rule.thresholds.get("min_confidence", "medium")).lower(), 1)
    out = []
    for row in rows:
        if row.get("match") in (True, None) or row.get("kind", "rerun") not in ("rerun", None) or row.get("error"):
            continue
        confidence = str(row.get("confidence") or "low").lower()
        if CONFIDENCE_RANK.get(confidence, 0) < floor:
            continue
        evidence = []
        if row.get("partition") is not None and row.get("offset") is not None:
            evidence.append(f"{int(row['partition'])}:{int(row['offset'])}")
        moved = row.get("moved_partitions")
        if isinstance(moved, (list, tuple)):
            moved_n = len(moved)
        else:
            moved_n = moved
        details = {k: v for k, v in row.items() if k not in ("group_id", "group_type", "rerun_cpu_ms") and _plain(v)}
        time = row.get("timestamp")
        from ..model import to_millis

        out.append(Finding(
            rule="assignor_mismatch", severity=rule.severity, group_id=row.get("group_id"),
            group_type=row.get("group_type"), time=to_millis(time),
            message=(f"target assignment at epoch {row.get('assignment_epoch')} differs from a re-run of the "
                     f"{row.get('assignor')} assignor ({confidence} confidence"
                     + (f", {moved_n} partition(s) placed differently" if moved_n is not None else "")
                     + (f", current assignment order: {row['current_order']}" if row.get("current_order") else "")
                     + ")"),
            evidence=evidence, details=details,
            id=finding_id("assignor_mismatch", row.get("group_id"), evidence, row.get("assignment_epoch"))))
    return out


def _plain(value) -> bool:
    try:
        json.dumps(value, default=str)
        return True
    except (TypeError, ValueError):
        return False
