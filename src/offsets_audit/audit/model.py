"""The audit's vocabulary: normalized replay events, findings and their evidence.

The replay (docs/replay.md) emits one event dict per state change: ``partition`` / ``offset`` /
``timestamp`` of the ``__consumer_offsets`` record that caused it, ``group_id``, ``group_type``,
``event``, ``member_id`` and a ``details`` dict (a JSON string once it went through Spark). Rules read
events through ``Event`` so both shapes look the same.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("info", "warning", "error")
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2, "never": 99}


def to_millis(value: Any) -> int | None:
    """Epoch milliseconds of an int, a ``datetime`` or a pandas ``Timestamp`` (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int,)):
        return value
    if isinstance(value, float):
        if value != value:  # NaN from pandas
            return None
        return int(value)
    if hasattr(value, "value") and hasattr(value, "tz_localize"):  # pandas Timestamp
        if value is __import__("pandas").NaT:
            return None
        return int(value.value // 1_000_000)
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return int(value.timestamp() * 1000)
    return int(value)


#: A finding as the Spark edges exchange it (``time`` in epoch ms; the table's is a timestamp).
FINDING_ROW_DDL = ("id string, group_id string, group_type string, rule string, severity string, time long, "
                   "message string, evidence array<string>, details string")


@dataclass
class Event:
    """One replay event; ``details`` always a dict, ``timestamp`` always epoch milliseconds."""

    event: str
    group_id: str | None
    group_type: str | None
    partition: int | None
    offset: int | None
    timestamp: int | None
    member_id: str | None = None
    details: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: dict) -> Event:
        details = raw.get("details")
        if isinstance(details, (str, bytes)):
            details = json.loads(details) if details else {}
        details = dict(details or {})
        member_id = raw.get("member_id")
        if member_id is None or member_id != member_id:
            member_id = details.get("member_id")
        partition = raw.get("partition")
        offset = raw.get("offset")
        return cls(
            event=raw.get("event"),
            group_id=raw.get("group_id"),
            group_type=raw.get("group_type") if raw.get("group_type") == raw.get("group_type") else None,
            partition=None if partition is None or partition != partition else int(partition),
            offset=None if offset is None or offset != offset else int(offset),
            timestamp=to_millis(raw.get("timestamp")),
            member_id=member_id,
            details=details,
        )

    @property
    def where(self) -> str:
        """``partition:offset`` of the record, the evidence format of findings."""
        return f"{self.partition}:{self.offset}"

    def get(self, key: str, default: Any = None) -> Any:
        value = self.details.get(key, default)
        return default if value is None else value


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
