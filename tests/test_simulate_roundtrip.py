"""Replay round trip: what the simulator writes decodes, reads and replays back to the simulator's own model.

Both outputs are read (the log segments with ``read_segment``, the Parquet dump with pyarrow), each replayed
with the pure ``replay_records``; neither may quarantine a byte or raise a ``replay_anomaly``, and the
replayed state of every group must equal ``model_state.json``: group epoch, assignment epoch and timestamp,
members with their epochs, states and assignments, classic generations, and committed offsets.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from offsets_audit.codec import decode_record
from offsets_audit.replay import replay_records
from offsets_audit.simulate import FAULT_KINDS, simulate
from offsets_audit.sources.segments import list_segments, read_segment

SIZE = dict(groups=30, hours=0.5, seed=10, partitions=10)   # seed 10: every group kind, deleted groups

#: ``MemberState`` names the replay reports for the ids the records carry (modern.MemberState,
#: streams.MemberState).
MEMBER_STATES = {
    "consumer": {0: "STABLE", 1: "UNREVOKED_PARTITIONS", 2: "UNRELEASED_PARTITIONS"},
    "share": {0: "STABLE"},
    "streams": {1: "STABLE", 2: "UNREVOKED_TASKS", 3: "UNRELEASED_TASKS"},
}


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    out = tmp_path_factory.mktemp("roundtrip")
    simulate(out, faults=FAULT_KINDS, compression="lz4", segment_bytes=512 * 1024, **SIZE)
    return out


@pytest.fixture(scope="module")
def segment_rows(history):
    quarantine: list = []
    rows = [r for path, part in list_segments(history / "segments")
            for r in read_segment(path, part, quarantine=quarantine)]
    assert quarantine == []
    return rows


@pytest.fixture(scope="module")
def parquet_rows(history):
    """The Parquet dump as the records the sources produce (timestamps in ms, the partition from the folder)."""
    rows = []
    for row in pq.read_table(history / "parquet").to_pylist():
        row["timestamp"] = int(row["timestamp"].timestamp() * 1000)
        row["partition"] = int(row["partition"])
        rows.append(row)
    rows.sort(key=lambda r: (r["partition"], r["offset"]))
    return rows


@pytest.fixture(scope="module")
def model(history):
    return json.loads((history / "model_state.json").read_text())


@pytest.fixture(scope="module")
def replayed(segment_rows):
    return replay_records(segment_rows)


def test_every_record_decodes(segment_rows):
    data = [r for r in segment_rows if not r["is_control"]]
    assert len(data) > 1000
    for row in data:
        decode_record(row["key"], row["value"])


def test_parquet_dump_holds_the_segment_records(segment_rows, parquet_rows):
    fields = ("partition", "offset", "key", "value", "timestamp", "batch_base_offset", "batch_last_offset",
              "producer_id", "producer_epoch", "is_transactional", "is_control", "control_type", "coordinator_epoch")
    assert [tuple(r[f] for f in fields) for r in parquet_rows] == [tuple(r[f] for f in fields) for r in segment_rows]


def test_replay_raises_no_anomaly(replayed):
    anomalies = [e for e in replayed.events if e["event"] == "replay_anomaly"]
    assert anomalies == []


def test_parquet_replay_equals_segment_replay(parquet_rows, replayed):
    from_parquet = replay_records(parquet_rows)
    assert [e["event"] for e in from_parquet.events if e["event"] == "replay_anomaly"] == []
    assert {g: f.to_dict() for g, f in from_parquet.groups.items()} == \
        {g: f.to_dict() for g, f in replayed.groups.items()}
    assert from_parquet.offsets.committed_rows() == replayed.offsets.committed_rows()


def test_history_covers_every_group_kind(model):
    assert {s["kind"] for s in model["groups"].values()} == {"consumer", "classic", "simple", "txn", "share",
                                                               "streams"}


def _modern_members(group_type: str, fold: dict) -> dict:
    states = {v: k for k, v in MEMBER_STATES[group_type].items()}
    out = {}
    for m in fold["members"]:
        if group_type == "streams":
            tasks, pending = m["assigned_tasks"], m["tasks_pending_revocation"]
            assigned = {s: sorted(map(int, p)) for s, p in (tasks.get("active") or {}).items() if p}
            revoking = {s: sorted(map(int, p)) for s, p in (pending.get("active") or {}).items() if p}
        else:
            assigned = {t: sorted(map(int, p)) for t, p in m["assigned_partitions"].items() if p}
            revoking = {t: sorted(map(int, p)) for t, p in (m.get("partitions_pending_revocation") or {}).items() if p}
        entry = {"member_epoch": m["member_epoch"], "previous_member_epoch": m["previous_member_epoch"],
                 "state": states[m["state"]], "instance_id": m["instance_id"], "assigned": assigned,
                 "pending_revocation": revoking}
        if group_type == "streams":
            entry["standby"] = {s: sorted(map(int, p)) for s, p in (tasks.get("standby") or {}).items() if p}
            entry["standby_pending_revocation"] = {s: sorted(map(int, p))
                                                   for s, p in (pending.get("standby") or {}).items() if p}
        out[m["member_id"]] = entry
    return out


def _assert_modern_groups_match(model: dict, replayed) -> list:
    """Compare every consumer / share / streams group; returns the member states seen."""
    states = []
    for group_id, want in model["groups"].items():
        if want["type"] not in MEMBER_STATES:
            continue
        if group_id not in replayed.groups:   # no client has joined yet: nothing written
            assert want["members"] == {} and want["assignment_timestamp"] == 0, group_id
            continue
        got = replayed.groups[group_id].to_dict()
        assert got["group_type"] == want["type"], group_id
        assert got["exists"] == want["exists"], group_id
        assert (got["group_epoch"], got["assignment_epoch"], got["assignment_timestamp"]) == \
            (want["group_epoch"], want["assignment_epoch"], want["assignment_timestamp"]), group_id
        assert _modern_members(want["type"], got) == want["members"], group_id
        states.extend((want["type"], m["state"]) for m in want["members"].values())
    return states


def test_modern_groups_replay_to_the_model(model, replayed):
    assert len(_assert_modern_groups_match(model, replayed)) > 10


def test_histories_cut_mid_rebalance_replay_to_the_model(tmp_path):
    """Short histories end while members are still revoking or waiting for partitions."""
    seen = set()
    for i, hours in enumerate([0.0061, 0.0113, 0.0217, 0.0391, 0.0779]):
        out = tmp_path / str(i)
        simulate(out, formats=("segments",), **dict(SIZE, hours=hours))
        model = json.loads((out / "model_state.json").read_text())
        replayed = replay_records(r for path, part in list_segments(out / "segments")
                                  for r in read_segment(path, part))
        assert [e for e in replayed.events if e["event"] == "replay_anomaly"] == []
        seen.update(_assert_modern_groups_match(model, replayed))
        test_committed_offsets_replay_to_the_model(model, replayed)
    assert {("consumer", 1), ("consumer", 2)} <= seen, sorted(seen)


def test_classic_groups_replay_to_the_model(model, replayed):
    classic = {g: s for g, s in model["groups"].items() if s["type"] == "classic"}
    assert classic
    for group_id, want in classic.items():
        got = replayed.groups[group_id].to_dict()
        assert (got["generation"], got["protocol"], got["leader"]) == \
            (want["generation"], want["protocol"], want["leader"]), group_id
        members = {m["member_id"]: {a["topic"]: a["partitions"]
                                    for a in m["assignment_decoded"]["assignedPartitions"]}
                   for m in got["members"]}
        assert members == {m: s["assigned"] for m, s in want["members"].items()}, group_id


def test_committed_offsets_replay_to_the_model(model, replayed):
    for group_id, want in model["groups"].items():
        got = {}
        for (topic, partition), commit in replayed.offsets.for_group(group_id).items():
            got.setdefault(topic, {})[str(partition)] = commit["committed_offset"]
        assert got == want["committed_offsets"], group_id


def test_deleted_groups_replay_as_gone(model, replayed):
    deleted = [g for g, s in model["groups"].items() if not s["exists"]]
    assert deleted
    for group_id in deleted:
        assert replayed.groups[group_id].to_dict()["exists"] is False, group_id
        assert replayed.offsets.for_group(group_id) == {}
