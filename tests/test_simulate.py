"""The workload simulator writes real, decodable ``__consumer_offsets`` histories that follow Kafka's rules.

The replay round trip (segments and Parquet replayed back to model_state.json) is in test_simulate_roundtrip.py;
an unfaulted history audited clean is in test_simulate_clean_audit.py.
"""

from __future__ import annotations

import filecmp
import json
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from offsets_audit.assignors.java_order import java_string_hash
from offsets_audit.codec import decode_record
from offsets_audit.simulate import FAULT_KINDS, simulate
from offsets_audit.simulate.scenarios import coordinator_partition
from offsets_audit.sources.segments import list_segments, read_segment

SMALL = dict(groups=12, hours=0.25, seed=11, partitions=10)


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sim")
    simulate(out, faults=FAULT_KINDS, segment_bytes=256 * 1024, **SMALL)
    return out


@pytest.fixture(scope="module")
def rows(history) -> list:
    quarantine: list = []
    out = []
    for path, partition in list_segments(history / "segments"):
        out.extend(read_segment(path, partition, quarantine=quarantine))
    assert quarantine == []
    return out


@pytest.fixture(scope="module")
def decoded(rows) -> list:
    """(row, DecodedRecord) for every data record, in log order per partition."""
    return [(row, decode_record(row["key"], row["value"])) for row in rows if not row["is_control"]]


def _files(root: Path) -> list:
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def test_same_seed_gives_identical_bytes(history, tmp_path):
    simulate(tmp_path, faults=FAULT_KINDS, segment_bytes=256 * 1024, **SMALL)
    assert _files(tmp_path) == _files(history)
    for rel in _files(history):
        assert filecmp.cmp(history / rel, tmp_path / rel, shallow=False), rel


def test_parallel_workers_write_the_same_bytes(history, tmp_path):
    simulate(tmp_path, faults=FAULT_KINDS, segment_bytes=256 * 1024, workers=2, **SMALL)
    for rel in _files(history):
        assert filecmp.cmp(history / rel, tmp_path / rel, shallow=False), rel


def test_every_record_decodes(decoded):
    assert len(decoded) > 1000


def test_segments_roll_and_offsets_are_contiguous(history, rows):
    by_partition = defaultdict(list)
    for row in rows:
        by_partition[row["partition"]].append(row["offset"])
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))
    assert any(len(list(d.iterdir())) > 1 for d in (history / "segments").iterdir())


def test_parquet_holds_the_same_records_as_the_segments(history, rows):
    table = pq.read_table(history / "parquet").to_pylist()
    got = sorted((r["partition"], r["offset"], r["key"], r["value"], r["batch_base_offset"], r["producer_id"],
                  r["is_control"], r["control_type"], int(r["timestamp"].timestamp() * 1000)) for r in table)
    want = sorted((r["partition"], r["offset"], r["key"], r["value"], r["batch_base_offset"], r["producer_id"],
                   r["is_control"], r["control_type"], r["timestamp"]) for r in rows)
    assert got == want


def test_groups_live_on_kafkas_coordinator_partition(decoded):
    for row, rec in decoded:
        group = rec.key.get("groupId", rec.key.get("group"))
        assert row["partition"] == coordinator_partition(group, SMALL["partitions"])


def test_coordinator_partition_maps_integer_min_value_to_zero():
    assert java_string_hash("polygenelubricants") == -2**31
    assert coordinator_partition("polygenelubricants", 50) == 0


def test_a_new_consumer_group_writes_member_epoch_target_and_assignment_in_one_batch(decoded):
    first_batch = {}
    for row, rec in decoded:
        if rec.record_type in (3, 5, 6, 7, 8):
            first_batch.setdefault(rec.key["groupId"], []).append((row["batch_base_offset"], rec))
    assert first_batch
    for group, items in first_batch.items():
        base = items[0][0]
        batch = [rec for b, rec in items if b == base]
        assert [r.record_type for r in batch] == [5, 3, 7, 6, 8], group
        assert batch[1].value["epoch"] == 2
        assert batch[3].value["assignmentEpoch"] == 2
        assert batch[4].value["memberEpoch"] == 2


def test_consumer_records_follow_the_reconciliation_rules(decoded, history):
    faulty = {(f["partition"], f["offset"]) for f in json.loads((history / "faults.json").read_text())["faults"]}
    for row, rec in decoded:
        if rec.record_type != 8 or rec.value is None or (row["partition"], row["offset"]) in faulty:
            continue
        v = rec.value
        if v["state"] == 1:   # UNREVOKED_PARTITIONS keeps the epoch and has something to revoke
            assert v["partitionsPendingRevocation"] and v["memberEpoch"] == v["previousMemberEpoch"]
        else:
            assert v["partitionsPendingRevocation"] == []
        for tp in v["assignedPartitions"]:
            assert len(tp["assignmentEpochs"]) == len(tp["partitions"])
            assert all(0 <= e <= max(v["memberEpoch"], 0) for e in tp["assignmentEpochs"])


def test_group_epoch_never_behind_assignment_epoch(decoded):
    group_epoch, assignment_epoch = {}, {}
    for _row, rec in decoded:
        if rec.value is None:
            continue
        if rec.record_type in (3, 11, 17):
            group_epoch[rec.key["groupId"]] = rec.value["epoch"]
        elif rec.record_type in (6, 12, 20):
            assignment_epoch[rec.key["groupId"]] = rec.value["assignmentEpoch"]
            assert rec.value["assignmentEpoch"] == group_epoch[rec.key["groupId"]]


def test_transactional_commits_end_with_a_marker(rows):
    open_txn = {}
    for row in rows:
        if row["is_transactional"] and not row["is_control"]:
            open_txn[(row["partition"], row["producer_id"])] = row["offset"]
        elif row["is_control"]:
            assert open_txn.pop((row["partition"], row["producer_id"]), None) is not None
    assert not open_txn or max(open_txn.values()) >= 0   # the last transaction may still be open at the end


def test_fault_manifest_points_at_the_injected_records(history, rows):
    faults = json.loads((history / "faults.json").read_text())["faults"]
    assert {f["kind"] for f in faults} == set(FAULT_KINDS)
    by_pos = {(r["partition"], r["offset"]): r for r in rows}
    for f in faults:
        rec = decode_record(by_pos[(f["partition"], f["offset"])]["key"],
                            by_pos[(f["partition"], f["offset"])]["value"])
        assert rec.key["groupId"] == f["group"]
        assert rec.record_type == f["record_type"]


def test_model_state_matches_the_last_records(history, decoded):
    state = json.loads((history / "model_state.json").read_text())["groups"]
    last_epoch, last_assignment, members, committed = {}, {}, defaultdict(set), defaultdict(dict)
    for row, rec in decoded:
        if rec.record_type == 3 and rec.value:
            last_epoch[rec.key["groupId"]] = rec.value["epoch"]
        elif rec.record_type == 6 and rec.value:
            last_assignment[rec.key["groupId"]] = rec.value
        elif rec.record_type == 5:
            (members[rec.key["groupId"]].add if rec.value else members[rec.key["groupId"]].discard)(
                rec.key["memberId"])
        elif rec.record_type == 1 and not row["is_transactional"]:
            if rec.value is None:
                committed[rec.key["group"]].pop((rec.key["topic"], rec.key["partition"]), None)
            else:
                committed[rec.key["group"]][(rec.key["topic"], rec.key["partition"])] = rec.value["offset"]
    consumer_groups = [g for g, s in state.items() if s["type"] == "consumer"]
    assert consumer_groups
    for g in consumer_groups:
        s = state[g]
        assert last_epoch[g] == s["group_epoch"]
        assert last_assignment[g]["assignmentEpoch"] == s["assignment_epoch"]
        assert last_assignment[g]["assignmentTimestamp"] == s["assignment_timestamp"]
        assert members[g] == set(s["members"])
    for g, s in state.items():
        if s["type"] in ("consumer", "classic", "streams") or (s["type"] == "simple" and not s["transactional"]):
            want = {(t, int(p)): o for t, parts in s["committed_offsets"].items() for p, o in parts.items()}
            assert committed[g] == want, g


def test_history_mixes_every_group_kind(decoded):
    types = defaultdict(int)
    for _, rec in decoded:
        types[rec.record_type] += 1
    assert {1, 2, 3, 5, 6, 7, 8, 11, 15}.issubset(types)   # streams: test_simulate_roundtrip.py


@pytest.mark.parametrize("seed", [7, 2])
def test_default_history_is_about_nine_tenths_offset_commits(tmp_path, seed):
    """The demo's default (30 groups, 1 h): offset commits ~90% of the data records, group records the rest,
    as on a busy cluster (the key's first int16 is the record type)."""
    simulate(tmp_path, groups=30, hours=1.0, seed=seed, formats=("segments",))
    types = defaultdict(int)
    for path, partition in list_segments(tmp_path / "segments"):
        for row in read_segment(path, partition):
            if not row["is_control"]:
                types[int.from_bytes(row["key"][:2], "big")] += 1
    share = types[1] / sum(types.values())
    assert 0.85 <= share <= 0.95, share


def test_compaction_drops_superseded_records(tmp_path):
    simulate(tmp_path, compact=True, formats=("segments",), **SMALL)
    latest = {}
    count = 0
    for path, partition in list_segments(tmp_path / "segments"):
        for row in read_segment(path, partition):
            count += 1
            if not row["is_transactional"]:
                assert (partition, row["key"]) not in latest
                latest[(partition, row["key"])] = row["offset"]
    assert 0 < count < 5000


def test_cli_simulate_writes_segments_with_the_chosen_compression(tmp_path, capsys):
    from offsets_audit.cli import main

    assert main(["simulate", "--out", str(tmp_path), "--groups", "4", "--hours", "0.05", "--partitions", "5",
                 "--compression", "lz4", "--format", "segments", "--faults", "wrong_assignment"]) == 0
    assert json.loads(capsys.readouterr().out)["records"] > 0
    assert not (tmp_path / "parquet").exists()
    rows = [r for path, p in list_segments(tmp_path / "segments") for r in read_segment(path, p)]
    assert {r["compression"] for r in rows if not r["is_control"]} == {"lz4"}


def test_cli_simulate_rejects_an_unknown_fault(tmp_path, capsys):
    from offsets_audit.cli import main

    assert main(["simulate", "--out", str(tmp_path), "--faults", "bogus"]) == 2
    assert "unknown fault" in capsys.readouterr().err
