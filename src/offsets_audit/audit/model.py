"""The audit's vocabulary: findings and their evidence, over the replay's own events.

The rules read the replay's event rows (docs/replay.md) through the replay's ``Event`` (``replay.events``,
re-exported here with its ``EventKind``): the pure core's dicts and the ``group_events`` table's rows look the same.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from offsets_audit.replay.events import Event, EventKind, to_millis

__all__ = ["FINDING_ROW_DDL", "SEVERITIES", "SEVERITY_RANK", "Event", "EventKind", "Finding", "finding_id",
           "kafka_version_at_least", "partitions_of", "to_millis"]

SEVERITIES = ("info", "warning", "error")
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2, "never": 99}


#: A finding as the Spark edges exchange it (``time`` in epoch ms; the table's is a timestamp).
FINDING_ROW_DDL = ("id string, group_id string, group_type string, rule string, severity string, time long, "
                   "message string, evidence array<string>, details string")


@dataclass
class Finding:
    """One rule violation. ``id`` depends only on the rule, the group and the evidence (stable across runs)."""

    rule: str
    severity: str
    group_id: str | None
    group_type: str | None
    time: int | None
    message: str
    evidence: list[str]
    details: dict
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            self.id = finding_id(self.rule, self.group_id, self.evidence, self.details.get("key"))

    def to_dict(self) -> dict:
        # The findings table's columns.
        return {
            "id": self.id,
            "group_id": self.group_id,
            "group_type": self.group_type,
            "rule": self.rule,
            "severity": self.severity,
            "time": self.time,
            "message": self.message,
            "evidence": list(self.evidence),
            "details": json.dumps(self.details, sort_keys=True, default=str),
        }


def finding_id(rule: str, group_id: str | None, evidence: list[str], key: Any = None) -> str:
    text = json.dumps([rule, group_id, sorted(set(evidence)), key], default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:20]


def kafka_version_at_least(version: str | None, major: int, minor: int) -> bool:
    """``"4.3"`` / ``"4.3.1"`` / ``"3.9"`` compared with (major, minor); unknown means the newest."""
    if not version:
        return True
    parts = str(version).split(".")
    try:
        v = (int(parts[0]), int(parts[1]) if len(parts) > 1 else 0)
    except ValueError:
        return True
    return v >= (major, minor)


def partitions_of(assignment: dict | None) -> dict[tuple[str, int], int]:
    """``{topic_id: {partition: epoch}}`` (or ``{topic_id: [partitions]}``) -> ``{(topic_id, partition): epoch}``."""
    out: dict[tuple[str, int], int] = {}
    for topic, parts in (assignment or {}).items():
        if isinstance(parts, dict):
            for p, epoch in parts.items():
                out[(topic, int(p))] = -1 if epoch is None else int(epoch)
        else:
            for p in parts or ():
                out[(topic, int(p))] = -1
    return out
