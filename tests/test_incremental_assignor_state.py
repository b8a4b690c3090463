"""The resumable assignor audit (``assignors.rerun.GroupRerun``): feed a group's target assignments in slices,
store the state as bytes between them, and the completed rows of every slice plus the last slice's provisional
ones are the rows of one ``audit_group`` over the whole history, row for row."""
from __future__ import annotations

import json

import pytest

from offsets_audit.assignors.inputs import TopicNames, reconstruct_group
from offsets_audit.assignors.rerun import TIMING_COLUMN, GroupRerun, audit_group
from offsets_audit.assignors.topic_metadata import TopicMetadata, parse_topics
from offsets_audit.replay import replay_records
from offsets_audit.simulate import FAULT_KINDS, simulate
from offsets_audit.sources.segments import list_segments, read_segment
from golden_files import read_golden
from replay_support import HISTORIES, load_expected


@pytest.fixture(scope="module")
def faulted_targets(tmp_path_factory):
    out = tmp_path_factory.mktemp("faulted-targets")
    simulate(out, groups=10, hours=0.25, seed=3, partitions=3, faults=list(FAULT_KINDS), formats=("segments",))
    records = [r for path, part in list_segments(out / "segments") for r in read_segment(path, part)]
    return {g: fold.target_assignment_rows() for g, fold in replay_records(records).groups.items()}, None


def _golden_targets(name):
    result = replay_records(load_expected(HISTORIES / f"{name}-00000000000000000000.expected.jsonl"))
    snapshot = TopicMetadata(parse_topics(json.loads(read_golden(HISTORIES / f"{name}.state.json"))))
    return {g: fold.target_assignment_rows() for g, fold in result.groups.items()}, snapshot


def _rows(rows):
    """Rows as sorted JSON text, without the re-run's measured CPU time (the machine's speed at that moment)."""
    return sorted(json.dumps({k: v for k, v in r.items() if k != TIMING_COLUMN}, sort_keys=True, default=str)
                  for r in rows)


def _sliced(rows, snapshot, k, **options):
    """Completed rows of ``k`` slices (by offset, through bytes each time) plus the last slice's provisional."""
    offsets = sorted(r["offset"] for r in rows)
    bounds = [offsets[len(offsets) * i // k] for i in range(k)] + [offsets[-1] + 1]
    state, done, provisional = None, [], []
    for low, high in zip(bounds, bounds[1:]):
        rerun = GroupRerun.from_bytes(state) if state is not None else GroupRerun(snapshot is not None)
        done += rerun.feed([r for r in rows if low <= r["offset"] < high], snapshot, **options)
        provisional = rerun.provisional(snapshot, **options)
        state = rerun.to_bytes()
    return done + provisional


@pytest.mark.parametrize("source", ["simulated-faults", "golden-consumer-group", "golden-consumer-group-no-snapshot",
                                    "golden-assignment-batching"])
@pytest.mark.parametrize("k", [1, 3, 10])
def test_reruns_fed_in_slices_through_bytes_equal_one_batch_rerun(source, k, faulted_targets):
    if source == "simulated-faults":
        targets, snapshot = faulted_targets
    elif source == "golden-assignment-batching":
        targets, snapshot = _golden_targets("history-assignment-batching")
    else:
        targets, snapshot = _golden_targets("history-consumer-group")
        if source.endswith("no-snapshot"):
            snapshot = None  # names from subscriptions and the metadata hash only
    mismatches = 0
    for group_id, rows in targets.items():
        if not rows:
            continue
        expected = audit_group(rows, snapshot, what_if=["range"])
        mismatches += sum(1 for r in expected if r["match"] is False)
        assert _rows(_sliced(rows, snapshot, k, what_if=["range"])) == _rows(expected), group_id
    if source == "simulated-faults":
        assert mismatches > 0  # the wrong_assignment faults are found, slice or not


def _target(offset, subscribed, target, metadata_hash=0):
    return {"group_id": "g", "group_type": "consumer", "assignment_epoch": offset, "assignment_timestamp": offset,
            "partition": 0, "offset": offset, "metadata_hash": metadata_hash,
            "members": [{"member_id": "m1", "member_epoch": 0 if offset == 1 else offset, "subscribed_topic_names": subscribed}],
            "target": {"m1": target}, "previous_target": {}}


TOPIC_X = "AAAAAAAAAAAAAAAAAAAAAQ"
TOPIC_Y = "AAAAAAAAAAAAAAAAAAAAAg"


def test_a_target_whose_topic_is_named_by_a_later_one_is_provisional_until_then():
    """m1 subscribes to a and b but only X is assigned: X's name is known once the next target assigns it to a
    subscriber of a alone. The batch audit names X in the first target too; the resumable one holds the first
    target pending (provisional rows) and completes it with the second, with the batch's rows."""
    first = _target(1, ["a", "b"], {TOPIC_X: [0, 1]})
    second = _target(2, ["a"], {TOPIC_X: [0, 1]})
    expected = audit_group([first, second])
    assert all(r["match"] for r in expected)
    rerun = GroupRerun(snapshot_given=False)
    assert rerun.feed([first], None) == []
    provisional = rerun.provisional(None)
    assert [r["offset"] for r in provisional] == [1]
    rerun = GroupRerun.from_bytes(rerun.to_bytes())
    assert _rows(rerun.feed([second], None)) == _rows(expected)
    assert rerun.pending == [] and rerun.provisional(None) == []


def test_a_learned_topic_name_is_never_revised_by_a_later_contradicting_target():
    """An id names one topic for its life: a later target assigning X to a member not subscribed to a (an
    assignor fault) does not unname X for the earlier, healthy targets."""
    rows = [_target(1, ["a"], {TOPIC_X: [0]}), _target(2, ["b"], {TOPIC_X: [0], TOPIC_Y: [0]})]
    names = TopicNames(use_hash=False)
    for row in rows:
        names.observe(row)
    assert names.names == {TOPIC_X: "a", TOPIC_Y: "b"}
    first = next(iter(reconstruct_group(rows)))
    assert [t["name"] for t in first.case_input["topics"]] == ["a"]
