"""Committed offsets (``OffsetMetadataManager``): direction, ownership at commit time, open transactions.

The record of a commit does not say which member sent it; what the log does show is who owned the
partition when the commit was appended. A consumer group with members only accepts commits from a
member whose epoch is current for that partition (KIP-848 fencing), so a commit for a partition no
member held points at a zombie (or an admin reset on a live group). Topic ids are resolved to names
through the commits' own ``topicId`` (OffsetCommitValue v4) or the topic-metadata snapshot.
"""
from __future__ import annotations

from ..model import Event, EventKind
from .base import ZERO_UUID, GroupView, RuleFamily, timer_horizon


class OffsetRules(RuleFamily):
    family = "offsets"
    #: (producer id, topic, partition) of the transactions reported pending too long and not resolved since: their
    #: later commits of the key are the same transaction, reported once. A class default: a state pickled in an
    #: incremental checkpoint before this field loads with none.
    reported: frozenset = frozenset()

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.last_commit: dict[tuple, Event] = {}
        self.pending: dict[tuple, Event] = {}
        self.topic_ids: dict[str, str] = dict(ctx.settings.topic_ids)

    def on_event(self, ev: Event, view: GroupView) -> None:
        kind = ev.event
        if kind in (EventKind.OFFSET_COMMITTED, EventKind.TXN_OFFSET_COMMITTED, EventKind.TXN_OFFSET_PENDING):
            if ev.get("topic_id") and ev.get("topic_id") != ZERO_UUID:
                self.topic_ids.setdefault(ev.get("topic"), ev.get("topic_id"))
        if kind in (EventKind.OFFSET_COMMITTED, EventKind.TXN_OFFSET_COMMITTED):
            # A transactional commit not applied (below the stored one) is resolved all the same, and its marker's
            # time is the group's clock as any event's (the pending check below).
            if not (kind == EventKind.TXN_OFFSET_COMMITTED and ev.details.get("applied") is False):
                self._backwards(ev, view)
                self._non_owner(ev, view)
                self.last_commit[(ev.get("topic"), ev.get("partition"))] = ev
            self._resolve(ev)
        elif kind == EventKind.TXN_OFFSET_PENDING:
            self._pending_check_all(view, ev.timestamp)
            key = (ev.get("producer_id"), ev.get("topic"), ev.get("partition"))
            if key not in self.reported:
                self.pending.setdefault(key, ev)
        elif kind == EventKind.TXN_OFFSET_ABORTED:
            self._resolve(ev)
        elif kind == EventKind.OFFSET_EXPIRED_OR_DELETED:
            self.last_commit.pop((ev.get("topic"), ev.get("partition")), None)
            for producer_id in ev.get("pending_cleared_producer_ids", []) or []:
                self._resolve_key((producer_id, ev.get("topic"), ev.get("partition")))
        if ev.timestamp is not None and self.pending:
            # A marker resolves all of its producer's commits at once (its events come one key at a time).
            resolving = ev.get("producer_id") if kind in (EventKind.TXN_OFFSET_COMMITTED, EventKind.TXN_OFFSET_ABORTED) else None
            self._pending_check_all(view, ev.timestamp, resolving)

    def _resolve(self, ev: Event) -> None:
        self._resolve_key((ev.get("producer_id"), ev.get("topic"), ev.get("partition")))

    def _resolve_key(self, key: tuple) -> None:
        """The key's transaction ends (a marker, or a tombstone clearing it): its next commit is a new one."""
        self.pending.pop(key, None)
        if key in self.reported:
            self.reported = self.reported - {key}

    def _backwards(self, ev: Event, view: GroupView) -> None:
        previous = self.last_commit.get((ev.get("topic"), ev.get("partition")))
        if previous is None:
            return
        old, new = previous.get("committed_offset"), ev.get("committed_offset")
        if old is None or new is None or new >= old:
            return
        if self.ctx.threshold("offset_committed_backwards", "only_with_members") and not (
                view.members or view.classic_members):
            return
        self.ctx.emit("offset_committed_backwards", view, ev.timestamp,
                      *committed_backwards(ev.get("topic"), ev.get("partition"), old, new, previous.where, ev.where))

    def _non_owner(self, ev: Event, view: GroupView) -> None:
        if view.group_type != "consumer" or not view.members:
            return
        topic_id = self.topic_ids.get(ev.get("topic"))
        if topic_id is None:
            return
        tp = (topic_id, int(ev.get("partition")))
        if tp in view.held():
            return
        self.ctx.emit("offset_commit_by_non_owner", view, ev.timestamp,
                      *commit_by_non_owner(ev.get("topic"), ev.get("partition"), ev.get("committed_offset"),
                                           topic_id, view.group_epoch, view.assignment_epoch,
                                           {m.member_id: {"member_epoch": m.member_epoch,
                                                          "previous_member_epoch": m.previous_member_epoch}
                                            for m in view.members.values()},
                                           [m.evidence for m in view.members.values()][:10], ev.where))

    def _pending_check_all(self, view: GroupView, now: int | None, resolving: int | None = None) -> None:
        if now is None:
            return
        limit = self.ctx.threshold("transactional_offset_pending_too_long", "max_pending_ms")
        for key, ev in list(self.pending.items()):
            if resolving is not None and key[0] == resolving:
                continue
            if ev.timestamp is not None and now - ev.timestamp > limit:
                self.ctx.emit("transactional_offset_pending_too_long", view, now,
                              *pending_too_long(ev.get("topic"), ev.get("partition"), ev.get("producer_id"),
                                                now - ev.timestamp, limit, ev.where))
                del self.pending[key]
                self.reported = self.reported | {key}

    def finish(self, view: GroupView) -> None:
        end = self.ctx.end_time_ms or view.last_time
        self._pending_check_all(view, end)

    def clock_horizon(self, view: GroupView, end: int | None) -> int | None:
        limit = self.ctx.threshold("transactional_offset_pending_too_long", "max_pending_ms")
        return min((h for h in (timer_horizon(ev.timestamp, limit, end) for ev in self.pending.values())
                    if h is not None), default=None)


# -- the findings' wording, shared with the Spark SQL form of these rules (audit.offsets_spark) -------------------

def committed_backwards(topic, partition, old: int, new: int, previous_where: str, where: str) -> tuple:
    """(message, evidence, details) of ``offset_committed_backwards``."""
    return (f"committed offset of {topic}-{partition} went back from {old} to {new}",
            [previous_where, where],
            {"topic": topic, "partition": partition, "old_offset": old, "new_offset": new})


def commit_by_non_owner(topic, partition, committed_offset, topic_id: str, group_epoch: int, assignment_epoch: int,
                        members: dict, member_evidence: list, where: str) -> tuple:
    """(message, evidence, details) of ``offset_commit_by_non_owner``."""
    return (f"offset {committed_offset} committed for {topic}-{partition} "
            f"while no member of the group owned it (group epoch {group_epoch}, assignment epoch "
            f"{assignment_epoch})",
            [where] + list(member_evidence),
            {"topic": topic, "partition": partition, "topic_id": topic_id,
             "group_epoch": group_epoch, "assignment_epoch": assignment_epoch, "members": members})


def pending_too_long(topic, partition, producer_id, pending_ms: int, limit: int, where: str) -> tuple:
    """(message, evidence, details, key) of ``transactional_offset_pending_too_long``."""
    return (f"transactional commit of {topic}-{partition} by producer "
            f"{producer_id} pending for {pending_ms} ms (> {limit} ms) "
            "without a COMMIT or ABORT marker",
            [where], {"producer_id": producer_id, "topic": topic, "partition": partition, "pending_ms": pending_ms},
            ("pending", where))
