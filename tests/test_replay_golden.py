"""Golden histories and segments replay to what Kafka's coordinator reports (every line compared)."""
from __future__ import annotations

import json

import pytest

from offsets_audit.replay import Replayer, replay_records
from replay_support import (
    GOLDEN,
    HISTORIES,
    batches,
    committed_view,
    describe_classic,
    describe_consumer,
    describe_share,
    describe_streams,
    epochs_view,
    golden_classic,
    golden_committed,
    golden_consumer,
    golden_share,
    golden_streams,
    list_groups_view,
    load_expected,
    normalise_epochs,
)
from golden_files import golden_glob, open_golden

TIMELINE_HISTORIES = [
    "history-consumer-group",
    "history-simple-and-txn-commits",
    "history-assignment-batching",
    "history-streams-group",
]


def _records(name: str) -> list[dict]:
    return load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl")


def _check_final_state(result, state: dict) -> None:
    with_bytes = True
    for described in state.get("consumer_group_describe", []):
        assert describe_consumer(result.groups[described["groupId"]]) == golden_consumer(described)
    for described in state.get("share_group_describe", []):
        assert describe_share(result.groups[described["groupId"]]) == golden_share(described)
    for described in state.get("streams_group_describe", []):
        assert describe_streams(result.groups[described["groupId"]]) == golden_streams(described)
    for described in state.get("classic_group_describe", []):
        assert describe_classic(result.groups[described["groupId"]], with_bytes) == golden_classic(described, with_bytes)
    expected_offsets = golden_committed(state["committed_offsets"])
    assert committed_view(result.offsets, expected_offsets) == expected_offsets
    expected_groups = sorted(state["list_groups"], key=lambda r: r["groupId"])
    assert list_groups_view(result) == expected_groups


@pytest.mark.parametrize("name", TIMELINE_HISTORIES)
def test_history_epochs_timeline_batch_by_batch(name):
    with open_golden(HISTORIES / f"{name}.epochs.jsonl") as handle:
        lines = [json.loads(line) for line in handle]
    replayer = Replayer()
    data_batches = 0
    for batch in batches(_records(name)):
        for record in batch:
            replayer.apply(record)
        if batch[0]["is_control"]:
            continue
        line = lines[data_batches]
        data_batches += 1
        assert line["batch_base_offset"] == batch[0]["batch_base_offset"]
        for expected in line["groups"]:
            got = epochs_view(replayer.result.groups[expected["group_id"]])
            assert normalise_epochs(got) == normalise_epochs(expected), f"after batch {line['batch_base_offset']}"
    assert data_batches == len(lines)
    assert not [e for e in replayer.result.events if e["event"] == "replay_anomaly"]


@pytest.mark.parametrize("name", TIMELINE_HISTORIES)
def test_history_final_state_matches_describe_offsetfetch_listgroups(name):
    state = json.load(open(HISTORIES / f"{name}.state.json", encoding="utf-8"))
    result = replay_records(_records(name))
    _check_final_state(result, state)


def test_history_many_groups_every_partition_matches():
    folder = HISTORIES / "history-many-groups"
    manifest = json.load(open(folder / "history-many-groups.manifest.json", encoding="utf-8"))
    seen = set()
    for partition in range(manifest["offsets_topic_partitions"]):
        state_path = folder / f"history-many-groups-p{partition:02d}.state.json"
        if not state_path.exists():
            continue
        records = load_expected(folder / f"history-many-groups-p{partition:02d}-00000000000000000000.expected.jsonl.xz")
        result = replay_records(records)
        assert not [e for e in result.events if e["event"] == "replay_anomaly"]
        _check_final_state(result, json.load(open(state_path, encoding="utf-8")))
        seen.update(result.groups)
    expected = {g["group_id"] for g in manifest["group_list"]}
    assert expected <= seen


@pytest.mark.parametrize("path", golden_glob(GOLDEN / "segments", "*.expected.jsonl"), ids=lambda p: p.name.split("-0")[0])
def test_golden_segment_replays_without_errors(path):
    """Segment vectors are random records, so one group id may see several record families: the
    replay must take every record without raising and report only those type clashes as anomalies."""
    records = load_expected(path)
    result = replay_records(records)
    data = [r for r in records if not r["is_control"]]
    assert sum(f.records_applied for f in result.groups.values()) == len(data)
    for event in result.events:
        if event["event"] == "replay_anomaly":
            reason = event["details"]["reason"]
            assert " group; replaced it" in reason or " group; ignored" in reason, event


def test_txn_segment_materialises_committed_drops_aborted_keeps_open_pending():
    path = GOLDEN / "segments" / "v2-txn-lz4-00000000000000000000.expected.jsonl"
    records = load_expected(path)
    result = replay_records(records)
    # An independent reading of the same log: markers per producer id close that producer's commits.
    committed, pending = {}, {}
    for r in records:
        if r["is_control"]:
            commits = pending.pop(r["producer_id"], {})
            if r["control_type"] == "COMMIT":
                for k, (off, v) in commits.items():
                    if k not in committed or off > committed[k][0]:
                        committed[k] = (off, v)
            continue
        key = json.loads(r["dump_key"])
        if key["type"] not in ("0", "1"):
            continue
        k = (key["data"]["group"], key["data"]["topic"], key["data"]["partition"])
        if r["dump_payload"] == "<DELETE>":
            committed.pop(k, None)
            for p in pending.values():
                p.pop(k, None)
            continue
        v = json.loads(r["dump_payload"])["data"]["offset"]
        if r["producer_id"] == -1:
            committed[k] = (r["offset"], v)
        else:
            pending.setdefault(r["producer_id"], {})[k] = (r["offset"], v)
    assert {k: c["committed_offset"] for k, c in result.offsets.committed.items()} == {k: v for k, (_, v) in committed.items()}
    assert {(row["producer_id"], row["group_id"], row["topic"], row["partition"]) for row in result.offsets.pending_rows()} == {
        (pid, *k) for pid, commits in pending.items() for k in commits}
    kinds = {e["event"] for e in result.events}
    assert {"txn_offset_pending", "txn_offset_committed"} <= kinds
