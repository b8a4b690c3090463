"""Re-run the group's assignor (and what-if assignors) on every recorded target assignment; compare.

Pure core of the assignor audit: ``audit_group(rows, snapshot, what_if, offsets)`` returns the
``assignor_audit`` rows of one group (``ASSIGNOR_AUDIT_COLUMNS``). One ``rerun`` row per recorded target
assignment says whether Kafka's assignor, fed the input rebuilt by ``inputs.reconstruct_group``, gives
the recorded target (``match``); ``what_if`` rows show what another assignor would have done and never
count as mismatches (``match`` is null there, ``same_as_recorded`` tells).

Balance metrics per row: ``spread`` = max - min partitions (streams: active tasks) per member, and,
where committed and end offsets are known, ``lag_spread`` = max - min summed lag per member.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

from offsets_audit.assignors import run as run_assignor
from offsets_audit.assignors.inputs import INFERRED, AssignorRun, reconstruct_group
from offsets_audit.assignors.topic_metadata import TopicMetadata

ASSIGNOR_AUDIT_COLUMNS = (
    "group_id", "group_type", "assignment_epoch", "assignment_timestamp", "partition", "offset", "kind",
    "assignor", "confidence", "metadata_source", "metadata_hash_match", "snapshot_hash_match", "match", "same_as_recorded",
    "moved_partitions", "member_count_diff", "recorded_spread", "result_spread", "recorded_lag_spread",
    "result_lag_spread", "num_members", "error", "notes",
)
ASSIGNOR_AUDIT_DDL = (
    "group_id string, group_type string, assignment_epoch int, assignment_timestamp long, partition int, "
    "offset long, kind string, assignor string, confidence string, metadata_source string, "
    "metadata_hash_match boolean, snapshot_hash_match boolean, match boolean, same_as_recorded boolean, moved_partitions int, "
    "member_count_diff string, recorded_spread int, result_spread int, recorded_lag_spread long, "
    "result_lag_spread long, num_members int, error string, notes string"
)

#: What-if assignors that read the consumer/share layout (streams groups only re-run their own assignor).
PARTITION_ASSIGNORS = frozenset({"uniform", "range", "simple", "lag_aware"})


def owners(result_members: Mapping[str, Mapping], group_type: str) -> dict[tuple, str]:
    """(topic or subtopology, partition) -> member, from a result's ``members`` (streams: active tasks)."""
    out = {}
    for member_id, assignment in (result_members or {}).items():
        if group_type == "streams":
            assignment = (assignment or {}).get("active_tasks") or {}
        for topic, partitions in (assignment or {}).items():
            for p in partitions or ():
                out[(topic, int(p))] = member_id
    return out


def member_counts(result_members: Mapping[str, Mapping], group_type: str) -> dict[str, int]:
    counts = {}
    for member_id, assignment in (result_members or {}).items():
        if group_type == "streams":
            assignment = (assignment or {}).get("active_tasks") or {}
        counts[member_id] = sum(len(p or ()) for p in (assignment or {}).values())
    return counts


def spread(counts: Mapping[str, int | float]) -> int | float | None:
    return (max(counts.values()) - min(counts.values())) if counts else None


def member_lags(result_members: Mapping[str, Mapping], lags: Mapping[tuple, int]) -> dict[str, int] | None:
    """Summed lag per member; ``None`` when no lag is known for any assigned partition."""
    if not lags:
        return None
    out = {}
    known = False
    for member_id, assignment in (result_members or {}).items():
        total = 0
        for topic, partitions in (assignment or {}).items():
            for p in partitions or ():
                lag = lags.get((topic, int(p)))
                if lag is not None:
                    known = True
                    total += lag
        out[member_id] = total
    return out if known else None


def compare(recorded: Mapping, result: Mapping, group_type: str) -> dict[str, Any]:
    """Differences between a recorded target and an assignor result (both in the ``run`` layout)."""
    rec_members = recorded.get("members") or {}
    res_members = result.get("members") or {}
    rec_owner = owners(rec_members, group_type)
    res_owner = owners(res_members, group_type)
    moved = sum(1 for key in set(rec_owner) | set(res_owner) if rec_owner.get(key) != res_owner.get(key))
    rec_counts = member_counts(rec_members, group_type)
    res_counts = member_counts(res_members, group_type)
    diff = {m: res_counts.get(m, 0) - rec_counts.get(m, 0) for m in sorted(set(rec_counts) | set(res_counts))}
    same = result.get("error") is None and _normalized(rec_members, group_type) == _normalized(res_members, group_type)
    return {"same": same, "moved_partitions": moved,
            "member_count_diff": json.dumps({m: d for m, d in diff.items() if d}, sort_keys=True),
            "recorded_spread": spread(rec_counts), "result_spread": spread(res_counts) if res_members else None}


def _normalized(members: Mapping, group_type: str) -> dict:
    """Members with their non-empty assignments. A member the assignor leaves out of its result gets an
    empty assignment from the coordinator (``TargetAssignmentBuilder``), so absent and empty compare equal."""
    out = {}
    for member_id, assignment in (members or {}).items():
        if group_type == "streams":
            norm: dict = {kind: {s: sorted(p) for s, p in ((assignment or {}).get(kind) or {}).items() if p}
                    for kind in ("active_tasks", "standby_tasks")}
        else:
            norm = {t: sorted(p) for t, p in (assignment or {}).items() if p}
        if any(norm.values()) if group_type == "streams" else norm:
            out[member_id] = norm
    return out


def lags_for(case_input: Mapping, offsets: Mapping[str, Mapping] | None) -> dict[tuple, int]:
    """(topic id, partition) -> lag where committed and end offsets are both known.

    ``offsets``: ``{topic name: {partition: {"committed": int|None, "end": int|None, "begin": int|None}}}``."""
    out: dict[tuple, int] = {}
    if not offsets:
        return out
    for topic in case_input.get("topics") or ():
        by_partition = offsets.get(topic["name"]) or {}
        for p, entry in by_partition.items():
            committed, end = entry.get("committed"), entry.get("end")
            if committed is not None and end is not None:
                out[(topic["id"], int(p))] = max(int(end) - int(committed), 0)
    return out


def _base_row(run: AssignorRun) -> dict:
    return {"group_id": run.group_id, "group_type": run.group_type, "assignment_epoch": run.assignment_epoch,
            "assignment_timestamp": run.assignment_timestamp, "partition": run.partition, "offset": run.offset,
            "confidence": run.confidence, "metadata_source": run.metadata_source,
            "metadata_hash_match": run.metadata_hash_match, "snapshot_hash_match": run.snapshot_hash_match,
            "num_members": len(run.case_input.get("members") or ())}


def _invoke(assignor: str, case_input: dict) -> dict:
    if not case_input.get("members"):
        return {"error": None, "members": {}}
    try:
        return run_assignor(assignor, case_input)
    except Exception as exc:  # an assignor bug or a bad input must not stop the audit of the other groups
        return {"error": type(exc).__name__, "message": str(exc)}


def audit_group(rows: Iterable[Mapping], snapshot: TopicMetadata | None = None, *, what_if: Sequence[str] = (),
                offsets: Mapping[str, Mapping] | None = None, auto_offset_reset: str = "latest",
                default_consumer_assignor: str = "uniform") -> list[dict]:
    """``assignor_audit`` rows of one group: a ``rerun`` row per recorded assignment, plus ``what_if`` rows."""
    out = []
    for run in reconstruct_group(rows, snapshot, default_consumer_assignor=default_consumer_assignor):
        notes = list(run.notes)
        confidence = run.confidence
        if run.group_type == "streams":
            notes.append("task offsets are reported in heartbeats, not written to the log: standby and "
                         "stickiness choices may differ")
            confidence = INFERRED
        lags = lags_for(run.case_input, offsets) if run.group_type != "streams" else {}
        rec_lags = member_lags(run.recorded["members"], lags)
        kinds = [("rerun", run.assignor)]
        if run.group_type != "streams":
            kinds += [("what_if", name) for name in what_if if name != run.assignor]
        for kind, assignor in kinds:
            case_input = run.case_input
            if assignor == "lag_aware":
                case_input = dict(case_input, offsets=offsets or {}, auto_offset_reset=auto_offset_reset)
            result = _invoke(assignor, case_input)
            cmp = compare(run.recorded, result, run.group_type)
            res_lags = member_lags(result.get("members") or {}, lags) if result.get("error") is None else None
            row = _base_row(run)
            row.update(
                kind=kind, assignor=assignor, confidence=confidence,
                match=cmp["same"] if kind == "rerun" else None, same_as_recorded=cmp["same"],
                moved_partitions=cmp["moved_partitions"], member_count_diff=cmp["member_count_diff"],
                recorded_spread=cmp["recorded_spread"], result_spread=cmp["result_spread"],
                recorded_lag_spread=spread(rec_lags) if rec_lags else None,
                result_lag_spread=spread(res_lags) if res_lags else None,
                error=None if result.get("error") is None else f"{result['error']}: {result.get('message')}",
                notes="; ".join(notes) or None)
            out.append(row)
    return out
