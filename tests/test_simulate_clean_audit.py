"""An unfaulted simulated history is clean for the audit: Kafka's own assignors made every target assignment.

The simulator feeds ``offsets_audit.assignors.run`` what ``TargetAssignmentBuilder`` would (members in the
group's ``TimelineHashMap`` order plus the member the heartbeat adds, current targets in record order), and
reconciles members by Kafka's ``CurrentAssignmentBuilder`` rules. So the pure audit core finds no error, and
the assignor audit, rebuilding each input from the replayed log alone, re-runs every target to the same result.
"""

from __future__ import annotations

import collections
import json

import pytest

from offsets_audit.assignors.rerun import audit_group as rerun_group
from offsets_audit.assignors.topic_metadata import TopicMetadata, load_topics
from offsets_audit.audit import audit_events
from offsets_audit.config import load_settings
from offsets_audit.replay import replay_records
from offsets_audit.simulate import simulate
from offsets_audit.simulate.modern import AssignorFailed
from offsets_audit.sources.segments import list_segments, read_segment

SIZE = dict(groups=40, hours=0.25, seed=6, partitions=12)   # seed 6: every group kind, 4 streams groups


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    out = tmp_path_factory.mktemp("clean")
    summary = simulate(out, formats=("segments",), **SIZE)
    records = [r for path, part in list_segments(out / "segments") for r in read_segment(path, part)]
    result = replay_records(records)
    config = load_settings(overrides={"broker": {"group_overrides": summary["group_overrides"]}})
    state = json.loads((out / "model_state.json").read_text())
    config = config.replace(topic_ids={t["name"]: t["topic_id"] for t in state["topics"]})
    findings, _ = audit_events(result.events, config)
    snapshot = TopicMetadata(load_topics(out / "topics.json"))
    reruns = [row for fold in result.groups.values() if fold.target_assignment_rows()
              for row in rerun_group(fold.target_assignment_rows(), snapshot)]
    return {"out": out, "summary": summary, "result": result, "findings": findings, "reruns": reruns,
            "state": state}


def test_no_audit_rule_at_severity_error_fires_without_faults(clean):
    errors = [(f.rule, f.group_id, f.message) for f in clean["findings"] if f.severity == "error"]
    assert errors == []


def test_streams_groups_never_hold_a_task_twice_in_one_process(clean):
    assert not [f for f in clean["findings"] if f.rule == "streams_task_held_twice_in_process"]
    standbys = [row for fold in clean["result"].groups.values() for row in fold.target_assignment_rows()
                if row["group_type"] == "streams" and any((t or {}).get("standby") for t in row["target"].values())]
    assert standbys, "no streams target assignment placed a standby task"


def test_every_consumer_and_share_rerun_matches_with_verified_metadata(clean):
    rows = [r for r in clean["reruns"] if r["group_type"] in ("consumer", "share")]
    kinds = collections.Counter(r["group_type"] for r in rows)
    assert kinds["consumer"] > 20 and kinds["share"] > 2
    assert [r for r in rows if not r["match"]] == []
    assert {r["confidence"] for r in rows} == {"metadata_verified"}


def test_every_streams_rerun_matches(clean):
    # streams re-runs are labelled "inferred": the assignor's stickiness also reads task offsets that clients
    # report in heartbeats and that never reach the log. The simulated clients report none, so the rebuilt
    # input is complete and the re-run must still give the recorded target.
    rows = [r for r in clean["reruns"] if r["group_type"] == "streams"]
    assert rows
    assert {r["confidence"] for r in rows} == {"inferred"}
    assert [r for r in rows if not r["match"]] == []


def test_member_records_name_the_assignor_the_rerun_used(clean):
    assignors = {}
    for gid, fold in clean["result"].groups.items():
        for row in fold.target_assignment_rows():
            if row["group_type"] == "consumer":
                named = {m["server_assignor"] for m in row["members"]}
                assert len(named) == 1, gid
                assignors[gid] = named.pop()
    used = {r["group_id"]: r["assignor"] for r in clean["reruns"] if r["group_type"] == "consumer"}
    assert used == assignors
    assert set(used.values()) == {"uniform", "range"}


def test_group_configs_hold_the_intervals_that_differ_from_the_broker_default(clean):
    written = json.loads((clean["out"] / "group_configs.json").read_text())
    assert written == clean["summary"]["group_overrides"]
    intervals = {g: s["assignment_interval_ms"] for g, s in clean["state"]["groups"].items()
                 if "assignment_interval_ms" in s}
    assert written == {g: {"assignment_interval_ms": ms} for g, ms in intervals.items() if ms != 1000}
    assert written, "no group with an interval override"


def test_an_assignor_error_stops_the_simulation(tmp_path, monkeypatch):
    from offsets_audit import assignors

    for name in ("uniform", "range"):
        monkeypatch.setitem(assignors._registered, name,
                            lambda case: {"error": "IllegalStateException", "message": "boom"})
    with pytest.raises(AssignorFailed, match="IllegalStateException: boom"):
        simulate(tmp_path, groups=1, hours=0.05, seed=1, partitions=1, formats=("segments",))


def test_demo_hands_group_overrides_and_the_topic_snapshot_to_the_job(tmp_path, monkeypatch):
    import argparse

    import offsets_audit.job as job
    import offsets_audit.spark_session as spark_session
    from offsets_audit import demo

    seen = {}
    monkeypatch.setattr(spark_session, "get_spark", lambda *a, **k: None)
    monkeypatch.setattr(job, "run_job", lambda spark, config: seen.setdefault("config", config) and {})
    monkeypatch.setattr(job, "print_summary", lambda summary: None)
    args = argparse.Namespace(out=str(tmp_path), groups=8, hours=0.05, seed=7, output_format="parquet")
    assert demo.run(args) == 0
    config = seen["config"]
    history = tmp_path / "history"
    assert config.broker.group_overrides == json.loads((history / "group_configs.json").read_text())
    assert (config.topic_metadata.source, config.topic_metadata.path) == ("file", str(history / "topics.json"))
    assert {t["name"] for t in load_topics(config.topic_metadata.path)} >= {"orders", "payments"}


#: the rule that must find each injected fault, with the fault's record among its evidence
FAULT_RULES = {"double_ownership": "partition_owned_twice", "early_assignment": "assignment_interval_violated",
               "epoch_regression": "previous_member_epoch_inconsistent"}


def test_each_injected_fault_is_found_by_its_rule_with_the_written_group_configs(tmp_path):
    from offsets_audit.audit import assignor_findings
    from offsets_audit.simulate import FAULT_KINDS

    summary = simulate(tmp_path, groups=30, hours=0.5, seed=7, faults=FAULT_KINDS, formats=("segments",))
    faults = json.loads((tmp_path / "faults.json").read_text())["faults"]
    assert sorted(f["kind"] for f in faults) == sorted(FAULT_KINDS)
    result = replay_records(r for path, part in list_segments(tmp_path / "segments") for r in read_segment(path, part))
    config = load_settings(overrides={"broker": {"group_overrides": summary["group_overrides"],
                                               "group_overrides_complete": True}})
    findings, _ = audit_events(result.events, config)
    snapshot = TopicMetadata(load_topics(tmp_path / "topics.json"))
    for fault in faults:
        where = f"{fault['partition']}:{fault['offset']}"
        if fault["kind"] == "wrong_assignment":
            rows = rerun_group(result.groups[fault["group"]].target_assignment_rows(), snapshot)
            found = assignor_findings(rows, config.rules)
            assert [f.evidence for f in found] == [[f"{fault['partition']}:{fault['offset'] + 1}"]], fault
        else:
            assert [f for f in findings if f.rule == FAULT_RULES[fault["kind"]] and f.group_id == fault["group"]
                    and where in f.evidence], fault
    faulty = {f["group"] for f in faults}
    assert [(f.rule, f.group_id) for f in findings if f.severity == "error" and f.group_id not in faulty] == []


def test_no_warning_either_and_every_rerun_at_provided_metadata_or_better_matches(clean):
    """No false alarms on a clean simulated cluster: nothing of warning or error severity (the simulated
    clients commit offsets only forward), and every re-run the assignor audit trusts matches."""
    noisy = [(f.rule, f.group_id, f.message) for f in clean["findings"] if f.severity in ("warning", "error")]
    assert noisy == []
    trusted = [r for r in clean["reruns"] if r["confidence"] in ("metadata_provided", "metadata_verified")]
    assert trusted and [r for r in trusted if not r["match"]] == []
