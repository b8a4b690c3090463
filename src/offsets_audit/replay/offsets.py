"""Committed offsets: the replay of ``OffsetCommit`` records and transaction markers.

Mirrors ``OffsetMetadataManager.replay`` / ``replayEndTransactionMarker``:

* type 0 (``LegacyOffsetCommit``) is read as type 1;
* a commit from a non-transactional batch (producer id -1) is stored at once;
* a transactional commit waits, per producer id, for that producer's COMMIT marker (then it is stored
  only if its record offset is greater than the stored commit's) or ABORT marker (then it is dropped);
* a tombstone (deletion or expiry) removes the stored commit and every pending one for that key.

Markers are per producer id and ``__consumer_offsets`` partition (each partition has its own shard),
so pending commits are keyed by (partition, producer id).
"""
from __future__ import annotations

from typing import Any

from .events import EventKind

NO_PRODUCER_ID = -1

OffsetKey = tuple  # (group_id, topic, partition)


def commit_from_record(value: dict, record_offset: int | None, record_partition: int | None) -> dict:
    """``OffsetAndMetadata.fromRecord``: the fields OffsetFetch reports, plus where the record sits."""
    return {
        "committed_offset": value.get("offset"),
        "committed_leader_epoch": value.get("leaderEpoch", -1),
        "metadata": value.get("metadata", ""),
        "commit_timestamp": value.get("commitTimestamp"),
        "expire_timestamp": value.get("expireTimestamp", -1),
        "topic_id": value.get("topicId"),
        "record_offset": record_offset,
        "record_partition": record_partition,
    }


class OffsetStore:
    """Committed and pending transactional offsets of every group, as the coordinator holds them."""

    def __init__(self) -> None:
        self.committed: dict[OffsetKey, dict] = {}
        #: (partition, producer id) -> {offset key: pending commit}
        self.pending: dict[tuple[int | None, int], dict[OffsetKey, dict]] = {}
        #: (partition, offset key) -> producer ids with a pending commit for it
        self._open: dict[tuple[int | None, OffsetKey], set[int]] = {}

    def replay_commit(self, record: dict, key: dict, value: dict | None) -> list[tuple]:
        """One offset commit record; returns (event kind, group id, details) tuples."""
        group_id, topic, partition = key.get("group"), key.get("topic"), key.get("partition")
        okey = (group_id, topic, partition)
        log_partition = record.get("partition")
        record_offset = record.get("offset")
        base = {"topic": topic, "partition": partition}
        if value is None:
            removed = self.committed.pop(okey, None)
            cleared = []
            for producer_id in sorted(self._open.pop((log_partition, okey), ())):
                pending = self.pending.get((log_partition, producer_id))
                if pending is not None and pending.pop(okey, None) is not None:
                    cleared.append(producer_id)
            return [(
                EventKind.OFFSET_EXPIRED_OR_DELETED, group_id,
                dict(base, had_offset=removed is not None,
                     committed_offset=None if removed is None else removed["committed_offset"],
                     pending_cleared_producer_ids=cleared),
            )]
        commit = commit_from_record(value, record_offset, log_partition)
        producer_id = record.get("producer_id", NO_PRODUCER_ID)
        if producer_id is None or producer_id == NO_PRODUCER_ID:
            self.committed[okey] = commit
            return [(EventKind.OFFSET_COMMITTED, group_id, dict(base, **_public(commit)))]
        self.pending.setdefault((log_partition, producer_id), {})[okey] = commit
        self._open.setdefault((log_partition, okey), set()).add(producer_id)
        return [(EventKind.TXN_OFFSET_PENDING, group_id, dict(base, producer_id=producer_id, **_public(commit)))]

    def replay_marker(self, record: dict) -> list[tuple]:
        """A COMMIT/ABORT control record of ``producer_id`` on this partition."""
        log_partition = record.get("partition")
        producer_id = record.get("producer_id")
        result = record.get("control_type")
        if producer_id is None:
            return []
        pending = self.pending.pop((log_partition, producer_id), None)
        if not pending:
            return []
        events = []
        for okey, commit in pending.items():
            opened = self._open.get((log_partition, okey))
            if opened is not None:
                opened.discard(producer_id)
                if not opened:
                    del self._open[(log_partition, okey)]
            group_id, topic, partition = okey
            base = {"topic": topic, "partition": partition, "producer_id": producer_id}
            if result == "COMMIT":
                existing = self.committed.get(okey)
                applied = existing is None or commit["record_offset"] > existing["record_offset"]
                if applied:
                    self.committed[okey] = commit
                events.append((EventKind.TXN_OFFSET_COMMITTED, group_id, dict(base, applied=applied, **_public(commit))))
            else:
                events.append((EventKind.TXN_OFFSET_ABORTED, group_id, dict(base, **_public(commit))))
        return events

    def committed_rows(self) -> list[dict]:
        return [dict(group_id=g, topic=t, partition=p, **c) for (g, t, p), c in sorted(self.committed.items())]

    def pending_rows(self) -> list[dict]:
        rows = []
        for (_log_partition, producer_id), commits in sorted(self.pending.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1])):
            for (g, t, p), c in sorted(commits.items()):
                rows.append(dict(group_id=g, topic=t, partition=p, producer_id=producer_id, **c))
        return rows

    def for_group(self, group_id: str) -> dict[tuple[str, int], dict]:
        return {(t, p): c for (g, t, p), c in self.committed.items() if g == group_id}


def _public(commit: dict) -> dict[str, Any]:
    return {k: v for k, v in commit.items() if k != "record_partition"}
