"""Kafka's own group coordinator as the judge: random Kafka-made histories replay to exactly Kafka's state.

A fixed-seed slice of ``oracle_scenarios`` is played through Kafka's ``GroupCoordinatorShard`` (the oracle,
tests/kafka/java/**/oracle) into real log segments; Kafka's loader then reads those segments back into a fresh
shard and reports, after every batch, its view of the groups the batch touched, and at the end what its describe,
list and offset-fetch answer. Our pure replay of the same segments must equal all of it.
"""
from __future__ import annotations

import json
import lzma

import pytest

import oracle
import oracle_diff
import oracle_scenarios
from golden_files import GOLDEN
from offsets_audit.sources.segments import read_segment

SEED = 51
HISTORIES = 24


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("oracle")
    scenarios = oracle_scenarios.scenarios(SEED, HISTORIES)
    summaries = oracle.write_histories(scenarios, out)
    topics = [t for s in summaries for t in oracle.load_state(out, s["name"])["topics"]]
    (out / "topics.json").write_text(json.dumps({"topics": topics}))
    configs = {str(s["partition"]): s["broker"] for s in scenarios}
    loaded = {state["partition"]: state for state in
              oracle.replay_folder(out, out / "topics.json", epochs=True, broker_configs=configs)}
    return out, scenarios, summaries, loaded


def _records(out, partition):
    return list(read_segment(out / f"__consumer_offsets-{partition}" / "00000000000000000000.log", partition))


def test_every_scenario_plays_without_a_client_error(written):
    _, scenarios, summaries, _ = written
    assert [s["name"] for s in summaries] == [s["name"] for s in scenarios]
    assert [(s["name"], s["error_list"]) for s in summaries if s["errors"]] == []
    assert sum(s["records"] for s in summaries) > 1000


def test_kafkas_loader_reads_back_every_record_it_wrote(written):
    _, _, summaries, loaded = written
    for summary in summaries:
        state = loaded[summary["partition"]]
        assert state["records_skipped"] == 0
        assert state["records_replayed"] == summary["records"]


def test_our_replay_equals_kafkas_state_batch_by_batch(written):
    out, scenarios, _, loaded = written
    differences = []
    for scenario in scenarios:
        differences += [f"{scenario['name']}: {line}" for line in
                        oracle_diff.replay_differences(_records(out, scenario["partition"]), loaded[scenario["partition"]])]
    assert differences == []


def test_kafkas_writer_and_loader_agree(written):
    """The oracle itself: what the writing coordinator answers equals what a coordinator loading its log answers
    (ListGroups, OffsetFetch, consumer and share describes), so either can judge the replay."""
    out, scenarios, _, loaded = written
    for scenario in scenarios:
        writer = oracle.load_state(out, scenario["name"])
        reader = loaded[scenario["partition"]]
        for key in ("list_groups", "committed_offsets", "consumer_group_describe", "share_group_describe"):
            assert writer.get(key) == reader.get(key), (scenario["name"], key)


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
