"""Builders of replay events (the layout of docs/replay.md) for the audit tests."""
from __future__ import annotations


class History:
    """Appends events of one group with increasing offsets; ``at(ms)`` sets the record time."""

    def __init__(self, group_id: str = "g", group_type: str = "consumer", partition: int = 0, start: int = 1_754_000_000_000):
        self.group_id = group_id
        self.group_type = group_type
        self.partition = partition
        self.offset = 0
        self.now = start
        self.events: list[dict] = []

    def at(self, ms: int) -> History:
        self.now = ms
        return self

    def after(self, ms: int) -> History:
        self.now += ms
        return self

    def add(self, event: str, member_id: str | None = None, **details) -> dict:
        if member_id is not None:
            details.setdefault("member_id", member_id)
        e = {"partition": self.partition, "offset": self.offset, "timestamp": self.now,
             "group_id": self.group_id, "group_type": self.group_type, "event": event,
             "member_id": member_id, "details": details}
        self.offset += 1
        self.events.append(e)
        return e

    # -- shorthands ------------------------------------------------------------------------------

    def created(self):
        return self.add("group_created", simple=False)

    def bump(self, old: int, new: int):
        return self.add("group_epoch_bumped", old=old, new=new)

    def target(self, epoch: int, timestamp: int | None = None, group_epoch: int | None = None, members=()):
        return self.add("target_assignment_computed", assignment_epoch=epoch,
                        assignment_timestamp=self.now if timestamp is None else timestamp,
                        group_epoch=epoch if group_epoch is None else group_epoch, members_changed=list(members))

    def joined(self, member_id: str, topics=("t",), process_id=None):
        return self.add("member_joined", member_id, subscribed_topic_names=list(topics), subscribed_topic_regex="",
                        process_id=process_id)

    def epoch(self, member_id: str, epoch: int, previous: int, old: int | None = None, state: str = "STABLE"):
        return self.add("member_epoch_advanced", member_id, member_epoch=epoch, previous_member_epoch=previous,
                        member_state=state, old_member_epoch=previous if old is None else old)

    def owns(self, member_id: str, assigned: dict, pending: dict | None = None):
        return self.add("member_assignment_changed", member_id, assigned_partitions=assigned,
                        partitions_pending_revocation=pending or {})

    def tasks(self, member_id: str, active=None, standby=None, warmup=None, pending=None):
        return self.add("member_assignment_changed", member_id,
                        assigned_tasks={"active": active or {}, "standby": standby or {}, "warmup": warmup or {}},
                        tasks_pending_revocation=pending or {"active": {}, "standby": {}, "warmup": {}})

    def left(self, member_id: str):
        self.add("member_fenced_by_tombstone", member_id)
        return self.add("member_left", member_id)

    def commit(self, topic: str, partition: int, offset: int, topic_id=None):
        return self.add("offset_committed", topic=topic, partition=partition, committed_offset=offset,
                        topic_id=topic_id, record_offset=self.offset)


def stable_group(h: History, members=("a", "b"), topic="T1", partitions=4) -> History:
    """A new consumer group whose members join, get one target assignment at epoch 2 and reconcile."""
    h.created()
    for m in members:
        h.joined(m)
    h.bump(0, 2)
    h.target(2)
    per = partitions // len(members)
    for i, m in enumerate(members):
        h.epoch(m, 2, 0)
        h.owns(m, {topic: {str(p): 2 for p in range(i * per, (i + 1) * per)}})
    return h
