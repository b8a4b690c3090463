"""Kafka's own group coordinator as the judge: random Kafka-made histories, replayed and audited by the project.

A fixed-seed slice of ``oracle_scenarios`` (one cluster's broker configs, mixed group kinds and per-group configs)
is played through Kafka's ``GroupCoordinatorShard`` (the oracle, tests/kafka/java/**/oracle) into real log
segments, one ``__consumer_offsets`` partition per history. Kafka's loader then reads those segments back into a
fresh shard and reports, after every batch, its view of the groups the batch touched, and at the end what its
describe, list and offset-fetch answer. On every history:

* our pure replay equals all of that (``oracle_diff.replay_differences``);
* the pure audit finds nothing, every trusted assignor re-run gives the recorded target and every rebalance has a
  cause (``oracle_diff.audit_differences``);
* ``offsets-audit check`` through Spark, over the whole slice at once, passes with no finding, no ``unknown`` cause
  and no mismatching trusted re-run, and its replay tables equal the pure replay's.
"""
from __future__ import annotations

import json
import lzma

import pytest
import yaml

import oracle
import oracle_diff
import oracle_scenarios
from golden_files import GOLDEN
from offsets_audit.audit.rules.assignor import CONFIDENCE_RANK
from offsets_audit.replay import replay_records
from offsets_audit.sources.segments import read_segment

SEED = 51
HISTORIES = 160
VERSION = "4.4.0"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("oracle")
    scenarios = oracle_scenarios.scenarios(SEED, HISTORIES, kafka_version=VERSION, broker_configs=False)
    summaries = oracle.write_histories(scenarios, out / "logs", version=VERSION)
    topics = [t for s in summaries for t in oracle.load_state(out / "logs", s["name"])["topics"]]
    (out / "topics.json").write_text(json.dumps({"topics": topics}))
    loaded = {state["partition"]: state for state in
              oracle.replay_folder(out / "logs", out / "topics.json", epochs=True, version=VERSION)}
    return out, scenarios, summaries, loaded


@pytest.fixture(scope="module")
def replayed(written):
    out, scenarios, _, _ = written
    return {s["name"]: replay_records(_records(out, s["partition"])) for s in scenarios}


def _records(out, partition):
    return list(read_segment(out / "logs" / f"__consumer_offsets-{partition}" / "00000000000000000000.log",
                             partition))


def test_every_scenario_plays_without_a_client_error(written):
    _, scenarios, summaries, _ = written
    assert [s["name"] for s in summaries] == [s["name"] for s in scenarios]
    assert [(s["name"], s["error_list"]) for s in summaries if s["errors"]] == []
    assert sum(s["records"] for s in summaries) > 10_000


def test_kafkas_loader_reads_back_every_record_it_wrote(written):
    _, _, summaries, loaded = written
    for summary in summaries:
        state = loaded[summary["partition"]]
        assert state["records_skipped"] == 0
        assert state["records_replayed"] == summary["records"]


def test_kafkas_writer_and_loader_agree(written):
    """The oracle itself: what the writing coordinator answers equals what a coordinator loading its log answers
    (ListGroups, OffsetFetch, consumer and share describes), so either can judge the replay."""
    out, scenarios, _, loaded = written
    for scenario in scenarios:
        writer = oracle.load_state(out / "logs", scenario["name"])
        reader = loaded[scenario["partition"]]
        for key in ("list_groups", "committed_offsets", "consumer_group_describe", "share_group_describe"):
            assert writer.get(key) == reader.get(key), (scenario["name"], key)


def test_our_replay_equals_kafkas_state_batch_by_batch(written):
    out, scenarios, _, loaded = written
    differences = []
    for scenario in scenarios:
        differences += [f"{scenario['name']}: {line}" for line in
                        oracle_diff.replay_differences(_records(out, scenario["partition"]), loaded[scenario["partition"]])]
    assert differences == []


def test_the_pure_audit_finds_nothing_reruns_match_and_every_rebalance_has_a_cause(written, replayed):
    out, scenarios, _, _ = written
    differences = []
    for scenario in scenarios:
        state = oracle.load_state(out / "logs", scenario["name"])
        differences += [f"{scenario['name']}: {line}" for line in
                        oracle_diff.audit_differences(replayed[scenario["name"]], scenario, state, VERSION)]
    assert differences == []


@pytest.fixture(scope="module")
def checked(spark, written):
    """``offsets-audit check`` through Spark over the whole slice, with the topic snapshot and the group configs."""
    import io
    from contextlib import redirect_stdout

    from offsets_audit import sinks
    from offsets_audit.cli import main

    out, scenarios, _, _ = written
    snapshot = {"complete": True, "broker": {}, "groups": {g: c for s in scenarios
                                                           for g, c in (s.get("group_configs") or {}).items()}}
    (out / "group-configs.json").write_text(json.dumps(snapshot))
    config = {"output": {"path": str(out / "tables"), "format": "parquet", "html_report": False},
              "broker": {"kafka_version": oracle_diff.kafka_line(VERSION)},
              "check": {"fail_on": "info", "json_summary": str(out / "check.json")}}
    (out / "check.yaml").write_text(yaml.safe_dump(config))
    with redirect_stdout(io.StringIO()):
        code = main(["check", "--config", str(out / "check.yaml"), "--input", str(out / "logs"), "--input-format",
                     "segments", "--run-id", "oracle", "--topic-metadata", str(out / "topics.json"),
                     "--group-configs", str(out / "group-configs.json")])
    tables = {name: [r.asDict() for r in sinks.read_table(spark, str(out / "tables"), name, "oracle", "parquet")
                     .collect()]
              for name in ("findings", "rebalances", "assignor_audit", "group_state", "target_assignments")}
    return code, tables


@pytest.mark.spark
def test_check_through_spark_passes_with_no_finding(checked):
    code, tables = checked
    assert [(f["rule"], f["group_id"], f["message"]) for f in tables["findings"]
            if not oracle_diff.storm_is_kafkas(f["rule"], f["details"])] == []
    assert code == 0


@pytest.mark.spark
def test_spark_finds_a_cause_for_every_rebalance_and_every_trusted_rerun_matches(checked):
    _, tables = checked
    assert [(r["group_id"], r["group_epoch"]) for r in tables["rebalances"] if "unknown" in (r["causes"] or [])] == []
    trusted = [r for r in tables["assignor_audit"] if r["kind"] == "rerun" and not r["error"]
               and CONFIDENCE_RANK.get(r["confidence"], 0) >= CONFIDENCE_RANK["medium"]]
    assert trusted and [(r["group_id"], r["assignment_epoch"]) for r in trusted if not r["match"]] == []


@pytest.mark.spark
def test_sparks_replay_equals_the_pure_replay(checked, replayed):
    _, tables = checked
    columns = ("group_id", "group_type", "exists", "state", "group_epoch", "assignment_epoch", "generation",
               "num_members", "last_offset")
    pure = sorted(tuple(row.get(c) for c in columns) for result in replayed.values()
                  for row in (fold.state_row() for fold in result.groups.values()))
    spark_rows = sorted(tuple(row.get(c) for c in columns) for row in tables["group_state"])
    assert spark_rows == pure


@pytest.mark.spark
def test_sparks_target_rows_know_each_append_as_the_pure_ones_do(checked, replayed):
    """The fold in Spark sees each record's Kafka batch, as the pure one does: its target rows' members (who joined
    in the target's append) and the resolutions the stored subscription type counted are the pure rows'."""
    _, tables = checked

    def facts(group_id, offset, members, counted):
        return group_id, offset, json.dumps(members, sort_keys=True), json.dumps(counted, sort_keys=True)

    pure = sorted(facts(r["group_id"], r["offset"], r["members"], r["counted_regular_expressions"])
                  for result in replayed.values() for fold in result.groups.values()
                  for r in fold.target_assignment_rows())
    spark_rows = sorted(facts(r["group_id"], r["offset"], json.loads(r["members"]),
                              json.loads(r["counted_regular_expressions"] or "null"))
                        for r in tables["target_assignments"])
    assert spark_rows == pure


@pytest.mark.parametrize("assignor", ["range", "streams_sticky"])
def test_kafkas_assignors_reproduce_the_golden_vectors(assignor):
    with lzma.open(GOLDEN / "assignors" / f"{assignor}.jsonl.xz", "rt", encoding="utf-8") as handle:
        cases = [json.loads(line) for line, _ in zip(handle, range(60))]
    results = oracle.run_assignors({"assignor": c["assignor"], "input": c["input"]} for c in cases)
    for case, result in zip(cases, results):
        expected = case["expected"]
        if assignor == "streams_sticky" and expected.get("members"):
            expected = {"error": None, "members": {m: {k: {s: p for s, p in v.items() if p} for k, v in a.items()
                                                       if k in ("active_tasks", "standby_tasks")}
                                                   for m, a in expected["members"].items()}}
        assert result["error"] == expected.get("error"), case["case_id"]
        assert result.get("members") == expected.get("members"), case["case_id"]
        assert result["java_member_iteration_order"] == case["java_member_iteration_order"]
        assert result["java_nanos"] > 0
