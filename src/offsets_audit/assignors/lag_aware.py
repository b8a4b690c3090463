"""What-if lag-aware assignor, after the KAFKA-5337 proposal (``LagBasedAssignor``, never merged).

It answers "how would the group's lag be spread if partitions were placed by lag?" from the same
replayed state the real assignors see plus the partitions' offsets. Per topic, among the members
subscribed to it:

* the lag of a partition is ``end - committed``; without a committed offset it follows
  ``auto.offset.reset``: ``latest`` (the consumer default) means lag 0, anything else is treated as
  ``earliest``, lag ``end - begin``. Negative values count as 0;
* partitions go in decreasing lag order (equal lags: lower partition first), each to the member with
  the fewest partitions *of this topic* so far, then the least lag *of this topic* so far, then the
  smallest member id (``String.compareTo``).

Input: the uniform/range layout of ``tests/golden/README.md``, plus
``"offsets": {"<topic id or name>": {"<partition>": {"committed": int | None, "end": int, "begin": int}}}``
and ``"auto_offset_reset": "latest" | "earliest"``. Output: the same layout as the uniform assignor,
``{"error": None, "members": {member_id: {topic_id: [sorted partitions]}}}``.
"""

from __future__ import annotations

from typing import Any, Mapping

from offsets_audit.assignors.metadata_hash import java_string_sort_key
from offsets_audit.errors import UserError

DEFAULT_AUTO_OFFSET_RESET = "latest"


def partition_lag(committed: int | None, begin: int, end: int,
                  auto_offset_reset: str = DEFAULT_AUTO_OFFSET_RESET) -> int:
    """Lag of one partition: ``end - committed``, or per ``auto.offset.reset`` without a commit; >= 0."""
    if committed is None:
        committed = end if auto_offset_reset.lower() == "latest" else begin
    return max(end - committed, 0)


def _partition_offsets(offsets: Mapping[str, Any], topic: Mapping[str, Any], partition: int) -> Mapping[str, Any]:
    by_partition = offsets.get(topic["id"])
    if by_partition is None:
        by_partition = offsets.get(topic["name"], {})
    found = by_partition.get(str(partition))
    if found is None:
        found = by_partition.get(partition, {})
    return found


def topic_lags(case_input: Mapping[str, Any]) -> dict[str, dict[int, int]]:
    """``{topic_id: {partition: lag}}`` for every topic of the input."""
    offsets = case_input.get("offsets") or {}
    reset = case_input.get("auto_offset_reset") or DEFAULT_AUTO_OFFSET_RESET
    lags: dict[str, dict[int, int]] = {}
    for topic in case_input["topics"]:
        per_partition = {}
        for partition in range(topic["partitions"]):
            found = _partition_offsets(offsets, topic, partition)
            end = found.get("end", 0)
            begin = found.get("begin", 0)
            committed = found.get("committed")
            try:
                per_partition[partition] = partition_lag(committed, begin, end, reset)
            except TypeError as exc:
                raise UserError(
                    f"offsets of topic {topic['name']} partition {partition} are not integers: {dict(found)!r}",
                    fix='give "committed" (or null), "end" and "begin" as integers') from exc
        lags[topic["id"]] = per_partition
    return lags


def assign_with_lags(case_input: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
    """:func:`assign` plus each member's total assigned lag (over all topics)."""
    lags = topic_lags(case_input)
    members = case_input["members"]
    assignment: dict[str, dict[str, list[int]]] = {m["member_id"]: {} for m in members}
    total_lag = {m["member_id"]: 0 for m in members}
    for topic in case_input["topics"]:
        topic_id = topic["id"]
        consumers = [m["member_id"] for m in members if topic_id in m.get("subscribed_topic_ids", ())]
        if not consumers:
            continue
        count = dict.fromkeys(consumers, 0)
        lag_so_far = dict.fromkeys(consumers, 0)
        ordered = sorted(lags[topic_id].items(), key=lambda item: (-item[1], item[0]))
        for partition, lag in ordered:
            member_id = min(consumers, key=lambda c: (count[c], lag_so_far[c], java_string_sort_key(c)))
            assignment[member_id].setdefault(topic_id, []).append(partition)
            count[member_id] += 1
            lag_so_far[member_id] += lag
            total_lag[member_id] += lag
    members_out = {member_id: {topic_id: sorted(ps) for topic_id, ps in topics.items()}
                   for member_id, topics in assignment.items()}
    return {"error": None, "members": members_out}, total_lag


def assign(case_input: Mapping[str, Any]) -> dict[str, Any]:
    """Run the lag-aware what-if assignor (see module docstring) on one input."""
    return assign_with_lags(case_input)[0]


run = assign
