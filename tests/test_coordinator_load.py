"""Coordinator load (``audit.coordinator_load``): assignor runs per ``__consumer_offsets`` partition and minute, their
estimated coordinator time, and the rule ``coordinator_partition_hogged``.

The estimate is the job's own timed re-run times Kafka's per-assignor factor; the rule names a group that took
most of its partition's assignor time in a busy minute while other groups wait on that coordinator, and stays
silent on Kafka's own histories, whose groups are small.
"""
from __future__ import annotations

import pytest

from offsets_audit.assignors.rerun import TIMING_COLUMN
from offsets_audit.assignors.rerun import audit_group as rerun_group
from offsets_audit.assignors.topic_metadata import TopicMetadata, load_topics
from offsets_audit.audit import coordinator_load as L
from offsets_audit.replay import replay_records
from replay_support import HISTORIES, load_expected

MINUTE = 60_000
T0 = 1_754_000_040_000  # a minute boundary
FACTORS = L.TimeFactors({"uniform": L.Factor(2.0, 1.0, 0.5, 1.5, 14)}, L.Factor(1.0, 1.0, 0.5, 2.0))


def _row(group, t, cpu, *, offset, partition=7, ts=None, members=3, assignor="uniform", group_type="consumer"):
    return {"group_id": group, "group_type": group_type, "partition": partition, "offset": offset,
            "timestamp": T0 + t, "assignment_epoch": offset, "assignment_timestamp": T0 + t if ts is None else ts,
            "num_members": members, "assignor": assignor, "rerun_cpu_ms": cpu}


def test_a_run_is_its_rerun_time_times_kafkas_factor_with_the_factors_spread():
    runs = L.runs_of([_row("g", 0, 10.0, offset=1), _row("h", 5, 10.0, offset=2, assignor="my.plugin:Assignor"),
                      _row("h", 6, None, offset=3)], FACTORS)
    assert [(r.group_id, r.estimated_ms, r.low_ms, r.high_ms) for r in runs] == [
        ("g", 20.0, 10.0, 30.0), ("h", 10.0, 5.0, 20.0), ("h", None, None, None)]


def test_refinements_and_emptied_groups_are_not_runs():
    rows = [_row("s", 0, 1.0, offset=1, group_type="streams"),
            _row("s", 100, 1.0, offset=2, ts=T0, group_type="streams"),       # the refinement repeats the timestamp
            _row("g", 200, 1.0, offset=3, ts=0, members=0),                    # the last member left
            _row("old", 300, 1.0, offset=4, ts=0)]                             # a broker before KIP-1263: record time
    runs = L.runs_of(rows, FACTORS)
    assert [(r.group_id, r.time - T0) for r in runs] == [("s", 0), ("old", 300)]


def test_partition_load_per_minute_with_the_top_three_groups():
    rows = [_row("big", i * 1000, 50.0, offset=i) for i in range(30)]                 # 30 runs of 100 ms
    rows += [_row(f"small-{k}", 500 + k, 1.0, offset=100 + k) for k in range(4)]     # 4 runs of 2 ms
    rows += [_row("big", MINUTE + 10, 5.0, offset=200)]                                # next minute: one run
    load = L.partition_load(L.runs_of(rows, FACTORS), groups_on_partition=9)
    first, second = load
    assert (first["minute_start_time"], first["assignor_runs"], first["timed_runs"], first["groups"]) == (T0, 34, 34, 5)
    assert first["estimated_ms"] == pytest.approx(3008.0) and first["share_of_minute"] == pytest.approx(3008.0 / MINUTE)
    assert first["estimated_ms_low"] == pytest.approx(1504.0) and first["estimated_ms_high"] == pytest.approx(4512.0)
    assert first["groups_on_partition"] == 9 and first["max_run_ms"] == 100.0
    assert [g["group_id"] for g in first["top_groups"]] == ["big", "small-0", "small-1"]
    assert first["top_groups"][0]["share"] == pytest.approx(3000.0 / 3008.0)
    assert (second["assignor_runs"], second["top_groups"][0]["runs"]) == (1, 1)


def _hog_minute():
    rows = [_row("big", i * 1000, 50.0, offset=i) for i in range(30)]   # 3 s of a minute: 5 %
    rows += [_row("small", 500, 1.0, offset=100)]
    return rows


def test_coordinator_partition_hogged_names_group_partition_neighbours_and_minutes():
    runs = L.runs_of(_hog_minute(), FACTORS)
    load = L.partition_load(runs, groups_on_partition=3)
    findings = L.hogged_findings(load, runs, ["big", "small", "quiet-commits"], L.HoggedThresholds())
    assert [(f.rule, f.severity, f.group_id) for f in findings] == [("coordinator_partition_hogged", "warning", "big")]
    f = findings[0]
    assert f.details["partition"] == 7 and f.details["neighbours"] == ["quiet-commits", "small"]
    assert [m["minute_start_time"] for m in f.details["minutes"]] == [T0]
    assert "__consumer_offsets-7" in f.message and "quiet-commits, small" in f.message
    assert f.evidence[:2] == ["7:0", "7:1"] and f.time == T0


def test_no_finding_without_neighbours_or_below_the_thresholds():
    runs = L.runs_of(_hog_minute(), FACTORS)
    load = L.partition_load(runs)
    assert L.hogged_findings(load, runs, ["big"], L.HoggedThresholds()) == []             # nobody else waits
    assert L.hogged_findings(load, runs, ["big", "small"], L.HoggedThresholds(min_busy_ms=6000)) == []
    assert L.hogged_findings(load, runs, ["big", "small"], L.HoggedThresholds(min_group_share_pct=100)) == []
    assert L.hogged_findings(load, runs, ["big", "small"], L.HoggedThresholds(min_neighbours=2)) == []
    # a busy minute shared evenly by two groups: neither hogs it
    even = [_row("a", i * 1000, 50.0, offset=i) for i in range(20)] + \
           [_row("b", i * 1000 + 1, 50.0, offset=100 + i) for i in range(20)]
    runs = L.runs_of(even, FACTORS)
    assert L.hogged_findings(L.partition_load(runs), runs, ["a", "b"], L.HoggedThresholds()) == []


@pytest.mark.parametrize("name", ["history-assignment-batching", "history-consumer-group", "history-streams-group",
                                  "history-many-groups"])
def test_kafka_histories_hog_no_coordinator(name):
    """Kafka's own histories, re-run and timed for real: every partition's load, no finding."""
    if name == "history-many-groups":
        parts = sorted((HISTORIES / name).glob("*.expected.jsonl.xz"))
        states = [HISTORIES / name / (p.name.split("-00000000000000000000")[0] + ".state.json") for p in parts]
    else:
        parts = [HISTORIES / f"{name}-00000000000000000000.expected.jsonl"]
        states = [HISTORIES / f"{name}.state.json"]
    records, topics = [], []
    for part, state in zip(parts, states):
        records.extend(load_expected(part))
        topics.extend(load_topics(state))
    result = replay_records(records)
    targets = [row for fold in result.groups.values() for row in fold.target_assignment_rows()]
    reruns = [row for fold in result.groups.values() if fold.target_assignment_rows()
              for row in rerun_group(fold.target_assignment_rows(), TopicMetadata(topics))]
    assert reruns and all(r[TIMING_COLUMN] is not None and r[TIMING_COLUMN] >= 0 for r in reruns if r["kind"] == "rerun")
    runs = L.runs_of(L.joined_runs(targets, reruns), L.measured_factors())
    assert runs and all(r.estimated_ms is not None for r in runs)
    by_partition: dict[int, list] = {}
    for run in runs:
        by_partition.setdefault(run.partition, []).append(run)
    groups = sorted({g for g in result.groups})
    for partition_runs in by_partition.values():
        load = L.partition_load(partition_runs, groups_on_partition=len(groups))
        assert sum(m["assignor_runs"] for m in load) == len(partition_runs)
        assert L.hogged_findings(load, partition_runs, groups, L.HoggedThresholds()) == []


def test_factor_overrides_from_the_config():
    factors = FACTORS.with_overrides({"uniform": 4, "range": {"factor": 0.5, "low": 0.8, "high": 1.9},
                                      "simple": {"scale": 2.0, "exponent": 0.5}})
    assert factors.of("uniform") == L.Factor(4.0, 1.0, 1.0, 1.0, 0)
    assert factors.of("range").high == 1.9 and factors.of("nobody") == FACTORS.default
    assert factors.of("simple").estimate(16.0) == 8.0


def test_the_shipped_factors_cover_kafkas_server_side_assignors():
    factors = L.measured_factors()
    assert {"uniform", "range", "simple", "sticky"} <= set(factors.assignors)
    for name, f in factors.assignors.items():
        assert f.cases >= 20 and f.low <= 1.0 <= f.high, name
        assert 0 < f.estimate(10.0) < 1000, name


@pytest.mark.parametrize("cut", [1, 12, 30, 31])
def test_slices_read_in_order_give_the_whole_logs_load_and_finding(cut):
    # the cut falls mid-minute, and a streams refinement repeating its timestamp sits just after it
    rows = _hog_minute() + [_row("s", 700, 1.0, offset=101, group_type="streams"),
                            _row("s", 800, 1.0, offset=102, ts=T0 + 700, group_type="streams")]
    rows.sort(key=lambda r: r["offset"])
    whole = L.runs_of(rows, FACTORS)
    last: dict[str, int] = {}
    sliced = L.runs_of(rows[:cut], FACTORS, last) + L.runs_of(rows[cut:], FACTORS, last)
    assert sliced == whole and len(whole) == len(rows) - 1
    load = L.partition_load(sliced, groups_on_partition=3)
    assert load == L.partition_load(whole, groups_on_partition=3)
    neighbours = ["big", "small", "s"]
    assert (L.hogged_findings(load, sliced, neighbours, L.HoggedThresholds())
            == L.hogged_findings(load, whole, neighbours, L.HoggedThresholds()) != [])


@pytest.mark.parametrize("cut", [1, 12, 30, 31])
def test_an_incremental_run_recomputes_the_whole_load_from_the_stored_run_rows_and_its_slices(cut):
    """What each incremental run does (``incremental.coordinator_load``): the per-partition core over the stored run
    rows of earlier slices plus this slice's (in any order, as a union gives them) and the groups on the partition
    now. A slice cut mid-minute leaves that minute's load, its groups on the partition and its finding to the run
    that reads the rest: only the whole table, recomputed, is the batch run's."""
    import json

    import pyarrow as pa

    from offsets_audit.audit.coordinator_spark import CoordinatorOptions, _partition_core

    rows = _hog_minute() + [_row("s", 700, 1.0, offset=101, group_type="streams"),
                            _row("s", 800, 1.0, offset=102, ts=T0 + 700, group_type="streams")]
    rows.sort(key=lambda r: r["offset"])
    types = {"partition": pa.int32(), "offset": pa.int64(), "timestamp": pa.int64(), "assignment_epoch": pa.int32(),
             "assignment_timestamp": pa.int64(), "num_members": pa.int32(), "rerun_cpu_ms": pa.float64()}
    source = pa.schema([("kind", pa.string()), *[(c, types.get(c, pa.string())) for c in L.RUN_COLUMNS]])
    output = pa.schema([("partition", pa.int32()), ("kind", pa.string()), ("group_id", pa.string()),
                        ("run_ms", pa.float64()), ("payload", pa.string())])
    core = _partition_core(CoordinatorOptions(factors=FACTORS), output)

    def run(run_rows, groups):
        table = pa.Table.from_pylist([{"kind": "run", **r} for r in run_rows] +
                                     [{"kind": "group", "group_id": g, "partition": 7} for g in groups], schema=source)
        out = core(table).to_pylist()
        return ([json.loads(o["payload"]) for o in out if o["kind"] == "load"],
                [json.loads(o["payload"]) for o in out if o["kind"] == "finding"])

    first_load, first_findings = run(rows[:cut], ["big", "small"])
    load, findings = run(rows[cut:] + rows[:cut], ["big", "small", "s"])
    whole = L.partition_load(L.runs_of(rows, FACTORS), groups_on_partition=3)
    assert load == json.loads(json.dumps(whole)) and len(findings) == 1 and findings[0]["group_id"] == "big"
    assert run(rows, ["big", "small", "s"]) == (load, findings)
    # the first run's row of the minute is not the whole log's: fewer runs, and "s" had not joined the partition
    assert first_load[0]["assignor_runs"] < load[0]["assignor_runs"]
    assert first_load[0]["groups_on_partition"] < load[0]["groups_on_partition"] == 3
    assert (first_findings == []) == (cut < 30)  # the busy part of the minute is over the threshold from the 30th run
