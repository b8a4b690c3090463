"""Coordinator load: how much of each ``__consumer_offsets`` partition's coordinator time its groups' assignors took.

Every ``__consumer_offsets`` partition is one coordinator shard (``GroupCoordinatorShard``), and a shard handles
its groups' requests on one thread: a server-side assignor runs inside the heartbeat that computes a target
assignment (``GroupMetadataManager.maybeUpdateTargetAssignment``), so while it runs, every other group of that
partition waits, their heartbeats and offset commits alike. KIP-1263's assignment interval exists to bound that.

From the log alone the job knows every target assignment the coordinator computed (its ``AssignmentTimestamp``,
the record time where Kafka wrote 0) and re-runs each one (``assignors.rerun``), timing the re-run on the
executor's thread clock. A run's coordinator time is estimated from that re-run time by a per-assignor conversion,
our time to Kafka's on the same inputs (``TimeFactors``: Kafka's = scale x ours ^ exponent, with a low and a high
bound, fitted by ``bench/coordinator_load.py`` against Kafka's own assignors). ``partition_load(runs, groups)`` sums the runs of
one partition per minute: how many, their estimated time and its share of the minute, the groups behind it.

The rule ``coordinator_partition_hogged`` reads those minutes: one group took more than a share of its
partition's assignor time in a minute in which that time was a noticeable part of the minute, while other groups
share the partition. A target assignment that only repeats the previous timestamp (the streams refinement) or
that empties a group (its last member left: no assignor runs) is not a run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .model import Finding

MINUTE_MS = 60_000
TOP_GROUPS = 3
#: Neighbours and minutes a finding lists in full (its details say how many there are).
LISTED = 10

LOAD_DDL = (
    "partition int, minute_start_time long, assignor_runs long, timed_runs long, groups int, "
    "groups_on_partition int, estimated_ms double, estimated_ms_low double, estimated_ms_high double, "
    "share_of_minute double, max_run_ms double, "
    "top_groups array<struct<group_id:string,group_type:string,runs:bigint,estimated_ms:double,share:double>>"
)
LOAD_COLUMNS = ("partition", "minute_start_time", "assignor_runs", "timed_runs", "groups", "groups_on_partition",
                "estimated_ms", "estimated_ms_low", "estimated_ms_high", "share_of_minute", "max_run_ms", "top_groups")

#: The columns a run needs (``runs_of`` builds them from ``target_assignments`` and ``assignor_audit``).
RUN_COLUMNS = ("group_id", "group_type", "partition", "offset", "timestamp", "assignment_epoch",
               "assignment_timestamp", "num_members", "assignor", "rerun_cpu_ms")
#: Their types (an incremental checkpoint keeps them, ``incremental.COORDINATOR_RUNS_FOLDER``).
RUN_DDL = ("group_id string, group_type string, partition int, offset long, timestamp long, assignment_epoch int, "
           "assignment_timestamp long, num_members int, assignor string, rerun_cpu_ms double")


@dataclass(frozen=True)
class Factor:
    """Kafka's assignor time from ours on the same input: ``scale * ours_ms ** exponent`` (a plain factor when the
    exponent is 1), with the spread of Kafka's time around that estimate: ``low`` and ``high`` times it (the 10th
    and 90th percentile over the measured cases)."""

    scale: float
    exponent: float = 1.0
    low: float = 1.0
    high: float = 1.0
    cases: int = 0

    def estimate(self, ours_ms: float) -> float:
        return self.scale * ours_ms ** self.exponent if ours_ms > 0 else 0.0


@dataclass(frozen=True)
class TimeFactors:
    """Per-assignor ``Factor`` (by the assignor's name: uniform, range, simple, sticky, ...), and ``default`` for
    an assignor never measured (a plug-in)."""

    assignors: Mapping[str, Factor] = field(default_factory=dict)
    default: Factor = Factor(1.0, 1.0, 0.25, 4.0)
    source: str = ""

    def of(self, assignor: str | None) -> Factor:
        return self.assignors.get(assignor or "", self.default)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "") -> TimeFactors:
        assignors = {name: _factor(entry) for name, entry in (data.get("assignors") or {}).items()}
        default = _factor(data["default"]) if data.get("default") else cls.default
        return cls(assignors, default, str(data.get("source") or source))

    def with_overrides(self, overrides: Mapping[str, Any] | None) -> TimeFactors:
        """These factors with some assignors' replaced: a number (a plain factor, no spread), or a mapping
        (``factor``, or ``scale`` and ``exponent``; ``low`` and ``high``)."""
        if not overrides:
            return self
        assignors = dict(self.assignors)
        default = self.default
        for name, value in overrides.items():
            f = _factor(value if isinstance(value, Mapping) else {"factor": value})
            if name == "default":
                default = f
            else:
                assignors[name] = f
        return TimeFactors(assignors, default, self.source + " (with overrides from the config)")


def _factor(entry: Mapping[str, Any]) -> Factor:
    scale = float(entry["scale"] if "scale" in entry else entry["factor"])
    return Factor(scale, float(entry.get("exponent", 1.0)), float(entry.get("low", 1.0)),
                  float(entry.get("high", 1.0)), int(entry.get("cases", 0)))


FACTORS_FILE = "assignor_time_factors.json"


def measured_factors() -> TimeFactors:
    """The factors shipped with the package (``audit/assignor_time_factors.json``, written by the bench)."""
    from importlib import resources

    path = resources.files("offsets_audit.audit") / FACTORS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return TimeFactors(source="no measured factors: every assignor at 1 (0.25-4)")
    return TimeFactors.from_mapping(data, f"offsets_audit/audit/{FACTORS_FILE}")


@dataclass(frozen=True)
class Run:
    """One assignor run of the coordinator, with its estimated time (None when it was not re-run)."""

    group_id: str
    group_type: str | None
    partition: int
    where: str
    time: int
    assignor: str | None
    estimated_ms: float | None
    low_ms: float | None
    high_ms: float | None


def runs_of(rows: Iterable[Mapping[str, Any]], factors: TimeFactors,
            last_timestamps: dict[str, int] | None = None) -> list[Run]:
    """The assignor runs among target-assignment rows (``RUN_COLUMNS``) of one or more groups, each estimated.

    A row repeating its group's previous non-zero timestamp (streams refinement) and a row of a group without
    members (emptied) are not runs. The run's time is its ``AssignmentTimestamp``, the record time where it is 0.
    ``last_timestamps`` (each group's last timestamp, updated in place) carries that comparison from one slice of
    the log to the next, so a log read in slices in order gives the runs of the whole log read at once."""
    ordered = sorted(rows, key=lambda r: (r["partition"], r["offset"]))
    last_ts: dict[str, int] = {} if last_timestamps is None else last_timestamps
    out = []
    for r in ordered:
        gid = r["group_id"]
        ts = int(r.get("assignment_timestamp") or 0)
        if ts and last_ts.get(gid) == ts:
            continue
        last_ts[gid] = ts
        members = r.get("num_members")
        if members is not None and int(members) == 0:
            continue
        cpu = r.get("rerun_cpu_ms")
        factor = factors.of(r.get("assignor"))
        estimate = None if cpu is None else factor.estimate(float(cpu))
        out.append(Run(gid, r.get("group_type"), int(r["partition"]), f"{r['partition']}:{r['offset']}",
                       ts or int(r["timestamp"]), r.get("assignor"), estimate,
                       None if estimate is None else estimate * factor.low,
                       None if estimate is None else estimate * factor.high))
    return out


def joined_runs(targets: Iterable[Mapping[str, Any]], reruns: Iterable[Mapping[str, Any]]) -> list[dict]:
    """``RUN_COLUMNS`` rows: each ``target_assignments`` row with its ``rerun`` row of ``assignor_audit`` (the
    assignor and the re-run's time), as the Spark edge joins them. Without a re-run the member count comes from
    the target's ``members`` column."""
    by_record = {(r["group_id"], r["partition"], r["offset"]): r for r in reruns if r.get("kind", "rerun") == "rerun"}
    out = []
    for t in targets:
        rerun = by_record.get((t["group_id"], t["partition"], t["offset"])) or {}
        members = rerun.get("num_members")
        if members is None and t.get("members") is not None:
            members = len(json.loads(t["members"]) if isinstance(t["members"], str) else t["members"])
        out.append({"group_id": t["group_id"], "group_type": t.get("group_type"), "partition": t["partition"],
                    "offset": t["offset"], "timestamp": t["timestamp"], "assignment_epoch": t.get("assignment_epoch"),
                    "assignment_timestamp": t.get("assignment_timestamp"), "num_members": members,
                    "assignor": rerun.get("assignor"), "rerun_cpu_ms": rerun.get("rerun_cpu_ms")})
    return out


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def partition_load(runs: Sequence[Run], groups_on_partition: int | None = None) -> list[dict]:
    """``coordinator_load`` rows of one partition's runs: one per minute with at least one run."""
    minutes: dict[int, list[Run]] = {}
    for run in runs:
        minutes.setdefault(run.time - run.time % MINUTE_MS, []).append(run)
    out = []
    for start, in_minute in sorted(minutes.items()):
        estimated = _sum(r.estimated_ms for r in in_minute)
        per_group: dict[str, list[Run]] = {}
        for r in in_minute:
            per_group.setdefault(r.group_id, []).append(r)
        ranked = sorted(per_group.items(), key=lambda kv: (-(_sum(r.estimated_ms for r in kv[1]) or 0.0),
                                                            -len(kv[1]), kv[0]))
        top = []
        for gid, group_runs in ranked[:TOP_GROUPS]:
            ms = _sum(r.estimated_ms for r in group_runs)
            top.append({"group_id": gid, "group_type": group_runs[0].group_type, "runs": len(group_runs),
                        "estimated_ms": ms, "share": None if ms is None or not estimated else ms / estimated})
        timed = [r.estimated_ms for r in in_minute if r.estimated_ms is not None]
        out.append({
            "partition": in_minute[0].partition, "minute_start_time": start, "assignor_runs": len(in_minute),
            "timed_runs": len(timed), "groups": len(per_group),
            "groups_on_partition": max(groups_on_partition or 0, len(per_group)),
            "estimated_ms": estimated, "estimated_ms_low": _sum(r.low_ms for r in in_minute),
            "estimated_ms_high": _sum(r.high_ms for r in in_minute),
            "share_of_minute": None if estimated is None else estimated / MINUTE_MS,
            "max_run_ms": max(timed) if timed else None, "top_groups": top,
        })
    return out


@dataclass(frozen=True)
class HoggedThresholds:
    """``coordinator_partition_hogged``'s thresholds: the group's share of its partition's assignor time in a
    minute, that time in ms (the coordinator's busy part of the minute), and how many other groups must share the
    partition."""

    min_group_share_pct: int = 50
    min_busy_ms: int = 3000
    min_neighbours: int = 1


def hogged_findings(load: Sequence[Mapping[str, Any]], runs: Sequence[Run], neighbours: Sequence[str],
                    thresholds: HoggedThresholds, severity: str = "warning") -> list[Finding]:
    """One finding per (partition, group) that hogged the partition in at least one minute (``partition_load``
    rows of one partition), naming the partition, the group's neighbours there and every such minute."""
    hogged: dict[str, list[dict]] = {}
    for minute in load:
        estimated = minute.get("estimated_ms")
        if estimated is None or estimated < thresholds.min_busy_ms or not minute["top_groups"]:
            continue
        top = minute["top_groups"][0]
        others = [n for n in neighbours if n != top["group_id"]]
        if top["share"] is None or top["share"] * 100 <= thresholds.min_group_share_pct:
            continue
        if len(others) < max(thresholds.min_neighbours, 1):
            continue
        hogged.setdefault(top["group_id"], []).append({**minute, "group": top})
    findings = []
    for gid, minutes in sorted(hogged.items()):
        partition = minutes[0]["partition"]
        group_type = minutes[0]["group"]["group_type"]
        others = sorted(n for n in neighbours if n != gid)
        worst = max(minutes, key=lambda m: (m["group"]["estimated_ms"] or 0.0))
        evidence = [r.where for r in runs if r.group_id == gid
                    and worst["minute_start_time"] <= r.time < worst["minute_start_time"] + MINUTE_MS][:LISTED]
        listed = ", ".join(others[:LISTED]) + (f" and {len(others) - LISTED} more" if len(others) > LISTED else "")
        message = (f"group {gid} took {worst['group']['share'] * 100:.0f}% of __consumer_offsets-{partition}'s "
                   f"assignor time in {len(minutes)} minute(s) (at most "
                   f"{worst['group']['estimated_ms']:.0f} ms of the minute starting {_utc(worst['minute_start_time'])}, "
                   f"{worst['group']['runs']} run(s)) while {len(others)} other group(s) wait on that coordinator: "
                   f"{listed}. A larger assignment interval for it batches its rebalances "
                   "(see its rows in assignment_interval_whatif)")
        findings.append(Finding(
            rule="coordinator_partition_hogged", severity=severity, group_id=gid, group_type=group_type,
            time=minutes[0]["minute_start_time"], message=message, evidence=evidence,
            details={"partition": partition, "neighbours": others[:LISTED], "neighbour_count": len(others),
                     "minutes": [{"minute_start_time": m["minute_start_time"], "share": m["group"]["share"],
                                  "estimated_ms": m["group"]["estimated_ms"], "runs": m["group"]["runs"],
                                  "partition_share_of_minute": m["share_of_minute"]} for m in minutes][:LISTED],
                     "minute_count": len(minutes), "thresholds": {
                         "min_group_share_pct": thresholds.min_group_share_pct,
                         "min_busy_ms": thresholds.min_busy_ms, "min_neighbours": thresholds.min_neighbours}}))
    return findings


def _utc(ms: int) -> str:
    import datetime as _dt

    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def group_run_ms(runs: Iterable[Run]) -> dict[str, float]:
    """Each group's mean estimated time per assignor run (its timed runs only): what the what-if multiplies."""
    totals: dict[str, list[float]] = {}
    for r in runs:
        if r.estimated_ms is not None:
            totals.setdefault(r.group_id, []).append(r.estimated_ms)
    return {gid: sum(v) / len(v) for gid, v in totals.items()}
