"""Replay of ``__consumer_offsets``: per-group state and committed offsets, as Kafka's coordinator.

``replay_records(records)`` is the pure entry point; ``fold.GroupFold`` is the per-group fold that the
batch Spark edge (``replay.spark``) and the streaming replay reuse. Output layouts: docs/replay.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, cast

from .events import Event, EventKind, event_row
from .fold import GroupFold, decode_of, undecodable_details
from .offsets import OffsetStore
from .state import OFFSET_RECORD_TYPES, group_id_of

__all__ = ["replay_records", "ReplayResult", "GroupFold", "OffsetStore", "Event", "EventKind"]


@dataclass
class ReplayResult:
    """What the replay rebuilt: ``groups`` (group id -> GroupFold, with ``to_dict()``), ``offsets``
    (an ``OffsetStore``: ``committed`` and ``pending``) and ``events`` (dicts, in log order per partition)."""

    groups: dict[str, GroupFold] = field(default_factory=dict)
    offsets: OffsetStore = field(default_factory=OffsetStore)
    events: list[dict] = field(default_factory=list)


class Replayer:
    """Incremental form of ``replay_records``: feed records with ``apply`` (tests check state per batch)."""

    def __init__(self, decode: Callable | None = None) -> None:
        self.result = ReplayResult()
        self._decode = decode

    def fold_for(self, group_id: str) -> GroupFold:
        fold = self.result.groups.get(group_id)
        if fold is None:
            fold = self.result.groups[group_id] = GroupFold(group_id, decode=self._decode)
        return fold

    def apply(self, record: dict) -> list[dict]:
        result = self.result
        if record.get("is_control"):
            events = [
                event_row(record, group_id, self._group_type(group_id), kind, None, details)
                for kind, group_id, details in result.offsets.replay_marker(record)
            ]
            result.events.extend(events)
            return events
        try:
            decoded = decode_of(record, self._decode)
        except Exception as exc:
            event = event_row(record, None, None, EventKind.REPLAY_ANOMALY, None, undecodable_details(exc))
            result.events.append(event)
            return [event]
        key = decoded.key or {}
        # every record type's key names its group (schemas/*_key.json), so a decoded key always gives one
        group_id = cast(str, group_id_of(decoded.record_type, key))
        events = self.fold_for(group_id).apply(record, decoded)
        if decoded.record_type in OFFSET_RECORD_TYPES:
            events.extend(
                event_row(record, gid, self._group_type(gid), kind, None, details)
                for kind, gid, details in result.offsets.replay_commit(record, key, decoded.value)
            )
        result.events.extend(events)
        return events

    def _group_type(self, group_id: str) -> str | None:
        fold = self.result.groups.get(group_id)
        return fold.group_type if fold is not None else None


def replay_records(records: Iterable[dict], decode: Callable | None = None) -> ReplayResult:
    """Replay records (dicts as the sources produce them, in log order per partition).

    ``decode`` defaults to ``offsets_audit.codec.decode_record``; a record may also carry a ready
    ``decoded`` entry. Never raises on data: undecodable or out-of-order records become
    ``replay_anomaly`` events.
    """
    replayer = Replayer(decode)
    for record in records:
        replayer.apply(record)
    return replayer.result
