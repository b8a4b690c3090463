"""Streams group ``StickyTaskAssignor`` (KIP-1071, assignor name ``sticky``), ported order-exactly.

A streams group assigns *tasks* ``(subtopology_id, partition)``; several members (stream threads)
share a *process* and the assignor balances load per process (``ProcessState``: tasks / members),
then per member inside a process. Active tasks:

1. go back to the member that had them active, while it is under the active-task quota;
2. else to the least loaded member that had them as standby (or reported offsets for them);
3. the rest go, in subtopology then partition order, to the least loaded member of the least loaded
   process (``PriorityQueue`` by process load).

Standby tasks (``num_standby_replicas`` per stateful task), never on a process that already has the
task: the previous active owner first, then the best previous standby candidate -- previous standbys
before members that only reported offsets, the highest reported offset sum first -- then the least
loaded processes. The quotas are ``ceil(tasks / members)`` and shrink as members fill up.

Ties follow Java collection order: the member map (``HashMap`` in input order), the
``processIdToState`` ``HashMap`` (sized to the member count, filled with ``computeIfAbsent``), each
process's ``memberToTaskCounts`` ``HashMap`` and the sift order of ``java.util.PriorityQueue``; all
are modelled with :mod:`offsets_audit.assignors.java_hashmap`. Rack-aware tags and warm-up tasks are
not used by this assignor (it never produces warm-ups).
"""

from __future__ import annotations

import sys
from typing import Any, Mapping

from offsets_audit.assignors.java_hashmap import JavaHashMap, JavaPriorityQueue
from offsets_audit.assignors.java_order import hashmap_order, java_string_hash
from offsets_audit.assignors.metadata_hash import java_string_sort_key

TaskId = tuple  # (subtopology_id: str, partition: int)

_DOUBLE_MAX = sys.float_info.max


class TaskAssignorException(Exception):
    """Kafka's ``TaskAssignorException``."""

    java_class = "TaskAssignorException"


def task_name(task: TaskId) -> str:
    """``TaskId.toString()``: ``<subtopology>_<partition>``."""
    return f"{task[0]}_{task[1]}"


def _by_partition_then_subtopology(task: TaskId) -> tuple:
    return task[1], java_string_sort_key(task[0])


def _by_subtopology_then_partition(task: TaskId) -> tuple:
    return java_string_sort_key(task[0]), task[1]


def _compare_load(a: ProcessState, b: ProcessState) -> int:
    return (a.load > b.load) - (a.load < b.load)


def _compare_entry_value(a: list, b: list) -> int:
    return (a[1] > b[1]) - (a[1] < b[1])


class ProcessState:
    """Kafka's streams ``ProcessState``: the members of one process and the tasks given to them."""

    __slots__ = ("process_id", "capacity", "load", "task_count", "member_to_task_counts",
                 "assigned_active", "assigned_standby", "assigned_tasks", "members_by_load")

    def __init__(self, process_id: str):
        self.process_id = process_id
        self.capacity = 0
        self.load = _DOUBLE_MAX
        self.task_count = 0
        self.member_to_task_counts = JavaHashMap(java_string_hash)
        self.assigned_active: dict[str, set] = {}
        self.assigned_standby: dict[str, set] = {}
        self.assigned_tasks: set = set()
        self.members_by_load: JavaPriorityQueue | None = None

    def add_member(self, member_id: str) -> None:
        self.member_to_task_counts.put(member_id, 0)
        self.capacity += 1
        self._compute_load()

    def _compute_load(self) -> None:
        self.load = -1.0 if self.capacity <= 0 else self.task_count / self.capacity

    def has_task(self, task: TaskId) -> bool:
        return task in self.assigned_tasks

    def task_count_of(self, member_id: str) -> int:
        return self.member_to_task_counts.get(member_id)

    def _add(self, member_id: str, task: TaskId, active: bool) -> int:
        self.task_count += 1
        self.assigned_tasks.add(task)
        (self.assigned_active if active else self.assigned_standby).setdefault(member_id, set()).add(task)
        count = self.member_to_task_counts.get(member_id) + 1
        self.member_to_task_counts.put(member_id, count)
        self._compute_load()
        return count

    def add_task(self, member_id: str, task: TaskId, active: bool) -> int:
        """Give ``task`` to a chosen member; drops the per-member heap as Kafka does."""
        count = self._add(member_id, task, active)
        self.members_by_load = None
        return count

    def add_task_to_least_loaded_member(self, task: TaskId, active: bool) -> int:
        """Give ``task`` to the member with the fewest tasks (heap order breaks ties); -1 if no member."""
        counts = self.member_to_task_counts
        if counts.is_empty():
            return -1
        if len(counts) == 1:
            return self._add(counts.keys()[0], task, active)
        if self.members_by_load is None:
            self.members_by_load = JavaPriorityQueue(_compare_entry_value,
                                                     ([member_id, count] for member_id, count in counts.items()))
        entry = self.members_by_load.poll()
        if entry is None:
            raise TaskAssignorException(f"No members available to assign task {task_name(task)}")
        count = self._add(entry[0], task, active)
        entry[1] = count
        self.members_by_load.offer(entry)
        return count


def _tasks_per_member(num_tasks: int, num_members: int) -> int:
    if num_members == 0:
        return 0
    return -(-num_tasks // num_members)


class _LocalState:
    """Kafka's ``StickyTaskAssignor.LocalState``: quotas, previous owners and the processes."""

    def __init__(self, case_input: Mapping[str, Any]):
        configs = case_input.get("configs") or {}
        self.num_standby_replicas: int = configs.get("num_standby_replicas", 0)
        self.subtopologies = case_input["subtopologies"]
        members = {m["member_id"]: m for m in case_input["members"]}
        self.member_ids: list[str] = hashmap_order([m["member_id"] for m in case_input["members"]])

        self.total_active_tasks = 0
        self.total_tasks = 0
        for subtopology in self.subtopologies:
            partitions = subtopology["max_num_input_partitions"]
            self.total_tasks += partitions
            self.total_active_tasks += partitions
            if subtopology["stateful"]:
                self.total_tasks += partitions * self.num_standby_replicas
        self.members_with_active_capacity = len(self.member_ids)
        self.members_with_capacity = len(self.member_ids)
        self.active_tasks_per_member = _tasks_per_member(self.total_active_tasks, self.members_with_active_capacity)
        self.total_tasks_per_member = _tasks_per_member(self.total_tasks, self.members_with_capacity)

        self.processes = JavaHashMap(java_string_hash, len(self.member_ids))
        self.active_task_to_prev_member: dict[TaskId, tuple[str, str]] = {}
        candidates: dict[TaskId, list[tuple]] = {}
        for member_id in self.member_ids:
            member = members[member_id]
            process_id = member["process_id"]
            owner = (process_id, member_id)
            self.processes.compute_if_absent(process_id, lambda: ProcessState(process_id)).add_member(member_id)
            for subtopology_id, partitions in member["active_tasks"].items():
                for partition in partitions:
                    self.active_task_to_prev_member[(subtopology_id, partition)] = owner
            offsets = {sub: {int(p): o for p, o in parts.items()} for sub, parts in (member.get("task_offsets") or {}).items()}
            standby = {sub: set(parts) for sub, parts in member["standby_tasks"].items()}
            for subtopology_id, partitions in member["standby_tasks"].items():
                for partition in partitions:
                    offset_sum = offsets.get(subtopology_id, {}).get(partition, 0)
                    candidates.setdefault((subtopology_id, partition), []).append((owner, True, offset_sum))
            for subtopology_id, partition_offsets in offsets.items():
                for partition, offset_sum in partition_offsets.items():
                    if partition in standby.get(subtopology_id, ()):
                        continue
                    candidates.setdefault((subtopology_id, partition), []).append((owner, False, offset_sum))
        # Previous standbys first, then members known only by reported offsets; most caught-up first.
        self.standby_task_to_prev_members: dict[TaskId, list[tuple[str, str]]] = {
            task: [c[0] for c in sorted(found, key=lambda c: (0 if c[1] else 1, -c[2]))]
            for task, found in candidates.items()
        }

    def process(self, owner: tuple[str, str]) -> ProcessState:
        return self.processes.get(owner[0])

    def task_ids(self, active: bool) -> list[TaskId]:
        return [(s["subtopology_id"], p) for s in self.subtopologies if active or s["stateful"]
                for p in range(s["max_num_input_partitions"])]

    def after_active_task(self, count: int) -> None:
        """``maybeUpdateActiveTasksPerMember``: a member that reached the quota leaves the division."""
        if count == self.active_tasks_per_member:
            self.members_with_active_capacity -= 1
            self.total_active_tasks -= count
            self.active_tasks_per_member = _tasks_per_member(self.total_active_tasks, self.members_with_active_capacity)

    def after_task(self, count: int) -> None:
        """``maybeUpdateTotalTasksPerMember``."""
        if count == self.total_tasks_per_member:
            self.members_with_capacity -= 1
            self.total_tasks -= count
            self.total_tasks_per_member = _tasks_per_member(self.total_tasks, self.members_with_capacity)

    def prev_member_with_least_load(self, owners: list | None, standby_task: TaskId | None) -> tuple | None:
        """``findPrevMemberWithLeastLoad``: the first candidate, replaced only by one strictly lower in
        both process load and member task count."""
        if not owners:
            return None
        candidate = None
        candidate_process_load = _DOUBLE_MAX
        candidate_member_load = _DOUBLE_MAX
        for owner in owners:
            process = self.process(owner)
            if standby_task is not None and process.has_task(standby_task):
                continue
            process_load = process.load
            member_load = float(process.task_count_of(owner[1]))
            if candidate is None or (process_load < candidate_process_load and member_load < candidate_member_load):
                candidate_process_load = process_load
                candidate_member_load = member_load
                candidate = owner
        return candidate


def _assign_active(state: _LocalState) -> None:
    tasks = sorted(state.task_ids(True), key=_by_partition_then_subtopology)

    def give(owner: tuple[str, str], task: TaskId) -> bool:
        process = state.process(owner)
        if process.task_count_of(owner[1]) < state.active_tasks_per_member:
            count = process.add_task(owner[1], task, True)
            state.after_active_task(count)
            state.after_task(count)
            return True
        return False

    remaining = []
    for task in tasks:
        owner = state.active_task_to_prev_member.get(task)
        if owner is None or not give(owner, task):
            remaining.append(task)
    tasks, remaining = remaining, []
    for task in tasks:
        owner = state.prev_member_with_least_load(state.standby_task_to_prev_members.get(task), None)
        if owner is None or not give(owner, task):
            remaining.append(task)

    remaining.sort(key=_by_subtopology_then_partition)
    by_load = JavaPriorityQueue(_compare_load, state.processes.values())
    for task in remaining:
        process = by_load.poll()
        if process is None:
            raise TaskAssignorException(f"No process available to assign active task {task_name(task)}.")
        count = process.add_task_to_least_loaded_member(task, True)
        if count == -1:
            raise TaskAssignorException(f"No member available to assign active task {task_name(task)}.")
        state.after_active_task(count)
        state.after_task(count)
        by_load.offer(process)


def _assign_standby_to_least_loaded(state: _LocalState, queue: JavaPriorityQueue, task: TaskId) -> bool:
    process = queue.poll()
    if process is None:
        return False
    found = False
    if not process.has_task(task):
        count = process.add_task_to_least_loaded_member(task, False)
        if count != -1:
            found = True
            state.after_task(count)
    elif not queue.is_empty():
        found = _assign_standby_to_least_loaded(state, queue, task)
    queue.offer(process)
    return found


def _assign_standby(state: _LocalState) -> None:
    tasks = sorted(state.task_ids(False), key=_by_partition_then_subtopology, reverse=True)
    to_least_loaded: list[tuple[TaskId, int]] = []
    replicas = state.num_standby_replicas
    for task in tasks:
        for i in range(replicas):
            owner = state.active_task_to_prev_member.get(task)
            if owner is not None:
                process = state.process(owner)
                if not process.has_task(task) and process.task_count_of(owner[1]) < state.total_tasks_per_member:
                    state.after_task(process.add_task(owner[1], task, False))
                    continue
            owners = state.standby_task_to_prev_members.get(task)
            if owners:
                owner = state.prev_member_with_least_load(owners, task)
                if owner is not None:
                    process = state.process(owner)
                    if process.task_count_of(owner[1]) < state.total_tasks_per_member:
                        state.after_task(process.add_task(owner[1], task, False))
                        continue
            to_least_loaded.append((task, replicas - i))
            break

    to_least_loaded.sort(key=lambda item: _by_subtopology_then_partition(item[0]), reverse=True)
    by_load = JavaPriorityQueue(_compare_load, state.processes.values())
    for task, remaining_replicas in to_least_loaded:
        for _ in range(remaining_replicas):
            if not _assign_standby_to_least_loaded(state, by_load, task):
                break


def _compacted(tasks: set | None) -> dict[str, list[int]]:
    result: dict[str, list[int]] = {}
    for subtopology_id, partition in tasks or ():
        result.setdefault(subtopology_id, []).append(partition)
    return {subtopology_id: sorted(partitions) for subtopology_id, partitions in result.items()}


def assign(case_input: Mapping[str, Any]) -> dict[str, Any]:
    """Run the streams ``StickyTaskAssignor`` on a golden-layout input (``tests/golden/README.md``).

    Returns ``{"error": None, "members": {member_id: {"active_tasks": {...}, "standby_tasks": {...}}}}``
    or ``{"error": "TaskAssignorException", "message": ...}``.
    """
    try:
        state = _LocalState(case_input)
        _assign_active(state)
        if state.num_standby_replicas > 0:
            _assign_standby(state)
    except TaskAssignorException as exc:
        return {"error": exc.java_class, "message": str(exc)}
    members = {}
    member_process = {m["member_id"]: m["process_id"] for m in case_input["members"]}
    for member_id in state.member_ids:
        process = state.processes.get(member_process[member_id])
        members[member_id] = {"active_tasks": _compacted(process.assigned_active.get(member_id)),
                              "standby_tasks": _compacted(process.assigned_standby.get(member_id))}
    return {"error": None, "members": members}


run = assign
