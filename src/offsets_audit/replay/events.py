"""The replay's events: what changed in a group, one event per state change, shared by the replay and the audit.

The replay emits each event as a row (a dict with :data:`EVENT_FIELDS`: ``partition`` / ``offset`` /
``timestamp`` of the ``__consumer_offsets`` record that caused it, ``group_id``, ``group_type``, ``event``,
``member_id`` and a ``details`` dict) because the Spark edge turns rows into the ``group_events`` table; the
audit reads the same rows, or the table's (``details`` a JSON string there), as :class:`Event`. The kinds are
:class:`EventKind`, a ``str`` enum, so the JSON and the ``event`` column keep their exact strings.
"""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["EVENT_FIELDS", "Event", "EventKind", "TextEnum", "event_row", "to_millis"]


class TextEnum(str, Enum):
    """A ``str`` enum that prints, formats and serialises as its value (``enum.StrEnum`` from Python 3.11 on)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, format_spec: str) -> str:
        return format(self.value, format_spec)


class EventKind(TextEnum):
    """Every event the replay emits (docs/replay.md lists their ``details``)."""

    # group lifecycle
    GROUP_CREATED = "group_created"
    GROUP_TYPE_CHANGED = "group_type_changed"
    GROUP_DELETED = "group_deleted"
    GROUP_EPOCH_BUMPED = "group_epoch_bumped"
    TARGET_ASSIGNMENT_COMPUTED = "target_assignment_computed"
    CLASSIC_GENERATION_CHANGED = "classic_generation_changed"
    REGEX_RESOLUTION_CHANGED = "regex_resolution_changed"
    TOPOLOGY_CHANGED = "topology_changed"
    SHARE_STATE_PARTITION_METADATA = "share_state_partition_metadata"
    # members
    MEMBER_JOINED = "member_joined"
    MEMBER_LEFT = "member_left"
    MEMBER_METADATA_CHANGED = "member_metadata_changed"
    MEMBER_EPOCH_ADVANCED = "member_epoch_advanced"
    MEMBER_ASSIGNMENT_CHANGED = "member_assignment_changed"
    MEMBER_FENCED_BY_TOMBSTONE = "member_fenced_by_tombstone"
    # offsets
    OFFSET_COMMITTED = "offset_committed"
    OFFSET_EXPIRED_OR_DELETED = "offset_expired_or_deleted"
    TXN_OFFSET_PENDING = "txn_offset_pending"
    TXN_OFFSET_COMMITTED = "txn_offset_committed"
    TXN_OFFSET_ABORTED = "txn_offset_aborted"
    # a record the coordinator would refuse, replayed in the most forgiving way
    REPLAY_ANOMALY = "replay_anomaly"


#: The event kind of each ``event`` string (an unknown string stays a string: the audit ignores it).
KIND_BY_VALUE: dict[str, EventKind] = {kind.value: kind for kind in EventKind}

#: The keys of an event row, in the order of the ``group_events`` table's columns.
EVENT_FIELDS = ("partition", "offset", "timestamp", "group_id", "group_type", "event", "member_id", "details")


def event_row(record: dict, group_id: str | None, group_type: str | None, kind: EventKind,
              member_id: str | None, details: dict) -> dict:
    """One event row caused by ``record`` (``details`` is taken as it is, not copied)."""
    return {
        "partition": record.get("partition"),
        "offset": record.get("offset"),
        "timestamp": record.get("timestamp"),
        "group_id": group_id,
        "group_type": group_type,
        "event": kind,
        "member_id": member_id,
        "details": details,
    }


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


@dataclass
class Event:
    """One replay event as the audit reads it; ``details`` always a dict, ``timestamp`` always epoch ms."""

    event: EventKind | str
    group_id: str | None
    group_type: str | None
    partition: int | None
    offset: int | None
    timestamp: int | None
    member_id: str | None = None
    details: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: dict) -> Event:
        """An event row of the replay, or of the ``group_events`` table (``details`` as JSON, NaN for null)."""
        details = raw.get("details")
        member_id = raw.get("member_id")
        partition = raw.get("partition")
        offset = raw.get("offset")
        return cls.of(
            raw["event"], raw.get("group_id"),
            raw.get("group_type") if raw.get("group_type") == raw.get("group_type") else None,
            None if partition is None or partition != partition else int(partition),
            None if offset is None or offset != offset else int(offset),
            to_millis(raw.get("timestamp")),
            None if member_id is None or member_id != member_id else member_id,
            details if isinstance(details, (str, bytes)) else dict(details or {}),
        )

    @classmethod
    def of(cls, kind: str, group_id: str | None, group_type: str | None, partition: int | None,
           offset: int | None, timestamp: int | None, member_id: str | None, details: dict | str | bytes | None) -> Event:
        """An event from plain values (no NaN, ``timestamp`` in epoch ms): ``details`` a dict, taken as it is, or
        its JSON text; a null ``member_id`` is the details' own. What the audit's Arrow walk builds per row."""
        loaded = (json.loads(details) if details else None) if isinstance(details, (str, bytes)) else details
        parsed: dict = loaded or {}
        return cls(event=KIND_BY_VALUE.get(kind, kind), group_id=group_id,
                   group_type=group_type, partition=partition, offset=offset, timestamp=timestamp,
                   member_id=parsed.get("member_id") if member_id is None else member_id, details=parsed)

    @property
    def where(self) -> str:
        """``partition:offset`` of the record, the evidence format of findings."""
        return f"{self.partition}:{self.offset}"

    def get(self, key: str, default: Any = None) -> Any:
        value = self.details.get(key, default)
        return default if value is None else value
