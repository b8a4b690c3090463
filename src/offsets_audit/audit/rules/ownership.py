"""Who owns what: the exclusivity Kafka's reconciliation guarantees (KIP-848, KIP-1071).

A consumer group's coordinator never gives a partition to a member while another member still holds
it (assigned or pending revocation). A streams group never places one task twice on one process in
any role (active, standby, warm-up), and never has one active task on two members. One member may
hold a task it is giving up (pending revocation) in its new role already: that is a legal move. Share groups
share partitions by design and are not checked here. Checked at batch ends, since one batch may
move a partition between two members.
"""
from __future__ import annotations

import re

from ..model import Event, EventKind
from .base import ZERO_UUID, GroupView, RuleFamily


class OwnershipRules(RuleFamily):
    family = "ownership"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.topic_ids: dict[str, str] = dict(ctx.settings.topic_ids)
        self.warmups: dict[tuple, tuple[int, str]] = {}

    def on_event(self, ev: Event, view: GroupView) -> None:
        if ev.event in (EventKind.OFFSET_COMMITTED, EventKind.TXN_OFFSET_COMMITTED) and ev.get("topic_id") not in (None, ZERO_UUID):
            self.topic_ids.setdefault(ev.get("topic"), ev.get("topic_id"))
        if ev.event == EventKind.TARGET_ASSIGNMENT_COMPUTED and view.group_type == "streams":
            self._check_warmups(ev, view)

    def on_batch_end(self, view: GroupView, last: Event) -> None:
        if view.group_type == "consumer":
            self._partition_owned_twice(view, last)
            if self.ctx.enabled("assignment_outside_subscription"):  # off by default; a scan of every assignment
                self._outside_subscription(view, last)
        elif view.group_type == "streams":
            self._streams_tasks(view, last)

    def _partition_owned_twice(self, view: GroupView, last: Event) -> None:
        if not view.held_twice():
            return
        for (topic, partition), members in view.owners().items():
            if len(members) > 1:
                ids = sorted(str(m) for m in members)
                key = (topic, partition, tuple(ids))
                ms = [view.members[m] for m in members]
                self.ctx.emit("partition_owned_twice", view, last.timestamp,
                              f"partition {topic}-{partition} is held by {len(members)} members at once: "
                              f"{', '.join(ids)}",
                              [m.evidence for m in ms],
                              {"topic_id": topic, "partition": partition, "members": ids,
                               "member_epochs": {m.member_id: m.member_epoch for m in ms}}, key=key)

    def _outside_subscription(self, view: GroupView, last: Event) -> None:
        id_to_name = {v: k for k, v in self.topic_ids.items()}
        for m in view.members.values():
            if not view.is_reconciled(m) or (m.subscribed_topic_names is None and not m.subscribed_topic_regex):
                continue
            names = set(m.subscribed_topic_names or ())
            regex = re.compile(m.subscribed_topic_regex) if m.subscribed_topic_regex else None
            for topic_id, partition in m.assigned:
                name = id_to_name.get(topic_id)
                if name is None or name in names or (regex is not None and regex.fullmatch(name)):
                    continue
                self.ctx.emit("assignment_outside_subscription", view, last.timestamp,
                              f"reconciled member {m.member_id} owns {name}-{partition} but subscribes to "
                              f"{sorted(names) or m.subscribed_topic_regex}",
                              [m.evidence], {"member_id": m.member_id, "topic": name, "topic_id": topic_id,
                                             "partition": partition}, key=(m.member_id, topic_id, m.member_epoch))

    def _streams_tasks(self, view: GroupView, last: Event) -> None:
        holders: dict[tuple, list[tuple[str, str]]] = {}
        for member_id, m in view.members.items():
            if member_id is None:   # a member view needs a record of the member, and every such record names it
                continue
            for source, suffix in ((m.tasks, ""), (m.tasks_pending, " pending revocation")):
                for role, tasks in source.items():
                    for task in tasks:
                        holders.setdefault(task, []).append((member_id, role + suffix))
        for task, held in holders.items():
            by_process: dict[str | None, set] = {}
            for member_id, _role in held:
                by_process.setdefault(view.members[member_id].process_id, set()).add(member_id)
            problems = []
            actives = sorted({mid for mid, role in held if role == "active"})
            if len(actives) > 1:
                problems.append(f"active on {len(actives)} members")
            for process, members in by_process.items():
                if len(members) > 1:
                    problems.append(f"held by {len(members)} members of process {process}: "
                                    + ", ".join(f"{mid} ({role})" for mid, role in sorted(held) if mid in members))
            for mid in {mid for mid, _ in held}:
                roles = [role for m2, role in held if m2 == mid and not role.endswith("revocation")]
                if len(roles) > 1:
                    problems.append(f"held by member {mid} as {' and '.join(sorted(roles))}")
            if problems:
                key = (task, tuple(sorted(set(held))))
                self.ctx.emit("streams_task_held_twice_in_process", view, last.timestamp,
                              f"task {task[0]}_{task[1]} " + "; ".join(problems),
                              [view.members[mid].evidence for mid, _ in held],
                              {"subtopology": task[0], "partition": task[1],
                               "holders": [[mid, role, view.members[mid].process_id] for mid, role in sorted(set(held))]},
                              key=key)

    def _check_warmups(self, ev: Event, view: GroupView) -> None:
        """A warm-up whose lag is known to be within ``acceptable.recovery.lag`` should not stay a warm-up."""
        lag_limit = self.ctx.threshold("warmup_task_not_promoted", "acceptable_recovery_lag")
        for m in view.members.values():
            lags = m.task_lags
            for task in (m.tasks.get("warmup") or {}):
                lag = lags.get(task)
                if lag is None or lag > lag_limit:
                    continue
                self.ctx.emit("warmup_task_not_promoted", view, ev.timestamp,
                              f"warm-up task {task[0]}_{task[1]} on member {m.member_id} has lag {lag} <= "
                              f"{lag_limit} but is still a warm-up when assignment epoch "
                              f"{ev.get('assignment_epoch')} is computed",
                              [m.evidence, ev.where], {"member_id": m.member_id, "lag": lag},
                              key=(m.member_id, task))
