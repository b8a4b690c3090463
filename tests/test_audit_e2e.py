"""End to end over a generated history: simulate (with injected faults) -> read segments -> replay -> audit.

Each injected fault must be found by its rule with the fault's record among the evidence, and the
groups without faults must produce no error finding. Group configs are not records: the simulator
draws each group's assignment interval from ``Random(f"{seed}:{group}:config")`` (an early_assignment
fault raises it to at least 1000 ms), and the audit is given those intervals as ``broker.group_overrides``
the way an operator would copy them from the cluster's group configs.
"""
from __future__ import annotations

import collections
import json
import random

import pytest

from offsets_audit.audit import assignor_findings, audit_events
from offsets_audit.config import load_settings

SEED = 3
FAULTS = ["wrong_assignment", "epoch_regression", "early_assignment", "double_ownership"]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    from offsets_audit.replay import replay_records
    from offsets_audit.simulate import simulate
    from offsets_audit.sources.segments import list_segments, read_segment

    out = tmp_path_factory.mktemp("sim")
    simulate(out, groups=12, hours=0.5, seed=SEED, partitions=4, faults=FAULTS, formats=("segments",))
    faults = json.loads((out / "faults.json").read_text())["faults"]
    state = json.loads((out / "model_state.json").read_text())
    records = [r for path, part in list_segments(out / "segments") for r in read_segment(path, part)]
    result = replay_records(records)
    config = load_settings()
    kinds = collections.defaultdict(set)
    for f in faults:
        kinds[f["group"]].add(f["kind"])
    overrides = {}
    for group, info in state["groups"].items():
        if info["type"] in ("consumer", "share", "streams"):
            interval = random.Random(f"{SEED}:{group}:config").choice([1000, 1000, 1000, 0, 3000])
            if "early_assignment" in kinds[group]:
                interval = max(interval, 1000)
            overrides[group] = {"assignment_interval_ms": interval}
    config = config.replace(broker={"group_overrides": overrides},
                            topic_ids={t["name"]: t["topic_id"] for t in state["topics"]})
    findings, rebalances = audit_events(result.events, config)
    return {"faults": faults, "findings": findings, "rebalances": rebalances, "result": result, "config": config,
            "faulty_groups": set(kinds)}


def _fault(simulated, kind):
    return next(f for f in simulated["faults"] if f["kind"] == kind)


def _found(simulated, rule, fault):
    where = f"{fault['partition']}:{fault['offset']}"
    return [f for f in simulated["findings"] if f.rule == rule and f.group_id == fault["group"] and where in f.evidence]


def test_double_ownership_is_partition_owned_twice(simulated):
    assert _found(simulated, "partition_owned_twice", _fault(simulated, "double_ownership"))


def test_early_assignment_is_assignment_interval_violated(simulated):
    assert _found(simulated, "assignment_interval_violated", _fault(simulated, "early_assignment"))


def test_epoch_regression_is_caught_by_the_epoch_rules(simulated):
    fault = _fault(simulated, "epoch_regression")
    assert _found(simulated, "previous_member_epoch_inconsistent", fault)


def test_wrong_assignment_is_assignor_mismatch(simulated):
    from offsets_audit.assignors.rerun import audit_group as rerun_group

    fault = _fault(simulated, "wrong_assignment")
    rows = rerun_group(simulated["result"].groups[fault["group"]].target_assignment_rows())
    found = assignor_findings(rows, simulated["config"].rules)
    assert found and found[0].group_id == fault["group"]
    assert found[0].evidence == [f"{fault['partition']}:{fault['offset'] + 1}"]   # its target metadata record


def test_groups_without_faults_have_no_error_findings(simulated):
    clean = [f for f in simulated["findings"] if f.group_id not in simulated["faulty_groups"] and f.severity == "error"]
    assert clean == [], [(f.rule, f.group_id, f.message) for f in clean]


def test_latency_by_value(simulated):
    rebalances = simulated["rebalances"]
    assert rebalances and all(r["complete"] for r in rebalances if r["group_type"] == "consumer"
                              and r["group_id"] not in simulated["faulty_groups"])
    by_group = collections.defaultdict(list)
    for r in rebalances:
        if r["group_type"] != "classic":           # classic generations carry causes, not latency
            by_group[r["group_id"]].append(r)
    for rows in by_group.values():
        rows.sort(key=lambda r: r["group_epoch"])
        assert rows[0]["time_to_assignment_ms"] == 0        # a new group's first assignment is immediate
        for r in rows:
            if r["time_to_assignment_ms"] is not None:
                # never sooner than needed, never later than the interval plus one heartbeat (5 s)
                assert r["time_to_assignment_ms"] <= r["assignment_interval_ms"] + 5000, r
            if r["complete"]:
                assert r["convergence_ms"] >= r["time_to_assignment_ms"]
