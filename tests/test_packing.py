"""Packed commits (``codec.packing``): the reader's packed rows stand for exactly the rows they replace.

The pure packer on Arrow batches (which rows pack, which stay), then the segments reader with ``pack_commits``:
``unpacked`` of what it reads equals the read without packing, row for row, and the commit records the replay and
the audit take from the packed rows (``commit_runs``, ``explode_runs``) are the records of the unpacked read.
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from offsets_audit.codec.packing import VALUE_ELEMENTS, pack_batch
from offsets_audit.codec.spark import COMMIT_AFTER_COMMIT_COLUMN, COMMIT_MID_RUN_COLUMN, PACKED_COLUMN

_VALUE = pa.struct([("offset", pa.int64()), ("leader_epoch", pa.int32()), ("metadata", pa.string())])


def _batch(rows: list[dict]) -> pa.RecordBatch:
    """A decoded batch's columns the packer reads: ``rows`` of (group, tp, offset, mid, after[, metadata])."""
    return pa.RecordBatch.from_pydict({
        "partition": pa.array([3] * len(rows), pa.int32()),
        "offset": pa.array([r["offset"] for r in rows], pa.int64()),
        "timestamp": pa.array([1_000 + r["offset"] for r in rows], pa.timestamp("us", tz="UTC")),
        "record_name": pa.array(["OffsetCommit"] * len(rows)),
        "group_id": pa.array([r["group"] for r in rows]),
        "topic_name": pa.array(["orders"] * len(rows)),
        "topic_partition": pa.array([r["tp"] for r in rows], pa.int32()),
        "error_message": pa.array([r.get("odd") for r in rows]),
        "offset_commit_value": pa.array([None if r.get("tombstone") else
                                         {"offset": 10 * r["offset"], "leader_epoch": r.get("epoch", -1),
                                          "metadata": r.get("metadata", "")} for r in rows], _VALUE),
        COMMIT_AFTER_COMMIT_COLUMN: pa.array([r["after"] for r in rows]),
        COMMIT_MID_RUN_COLUMN: pa.array([r["mid"] for r in rows]),
    })


def _commits(packed: dict) -> list[dict]:
    """A packed row's ``PACKED_COLUMN`` (a list per field) as one dict per commit."""
    return [dict(zip(packed, values)) for values in zip(*packed.values())]


def _unpack(batch: pa.RecordBatch) -> list[dict]:
    """The rows ``batch`` stands for, as sorted dicts without ``PACKED_COLUMN``: a packed commit has the row's
    columns but its own offset, timestamp and ``VALUE_ELEMENTS`` of its value."""
    out = []
    for row in batch.to_pylist():
        packed = row.pop(PACKED_COLUMN)
        if packed is None:
            out.append(row)
            continue
        for commit in _commits(packed):
            value = dict(row["offset_commit_value"])
            value.update({source: commit[name] for name, source in VALUE_ELEMENTS.items() if source in value})
            out.append({**row, "offset": commit["offset"], "timestamp": commit["timestamp"],
                        "offset_commit_value": value})
    return sorted(out, key=lambda r: (r["group_id"] or "", r["topic_partition"], r["offset"]))


def test_the_commits_marked_both_ways_pack_a_row_per_key():
    rows = [dict(group="g", tp=0, offset=o, mid=True, after=True) for o in (5, 1, 3, 7)]
    rows += [dict(group="g", tp=1, offset=o, mid=True, after=True) for o in (2, 4)]
    rows += [dict(group="h", tp=0, offset=6, mid=True, after=True)]                  # alone: stays a row
    rows += [dict(group="g", tp=0, offset=8, mid=True, after=False),                 # not after a commit
             dict(group="g", tp=0, offset=9, mid=False, after=True),                 # not mid-run
             dict(group="g", tp=0, offset=11, mid=True, after=True, odd="x")]        # unlike its key's first
    batch = _batch(rows)
    packed = pack_batch(batch)
    assert packed.schema.names == [*batch.schema.names, PACKED_COLUMN]
    lists = {(r["group_id"], r["topic_partition"]): r[PACKED_COLUMN] for r in packed.to_pylist() if r[PACKED_COLUMN]}
    assert {k: v["offset"] for k, v in lists.items()} == {("g", 0): [1, 3, 5, 7], ("g", 1): [2, 4]}
    assert lists[("g", 0)]["committed_offset"] == [10, 30, 50, 70] and lists[("g", 0)]["leader_epoch"] == [-1] * 4
    assert "commit_timestamp" not in lists[("g", 0)]  # a field the batch's values do not have
    assert packed.num_rows == len(rows) - 6 + 2
    first = next(r for r in packed.to_pylist() if r[PACKED_COLUMN] and r["topic_partition"] == 0)
    assert first["offset"] == 1 and first["offset_commit_value"] == {"offset": 10, "leader_epoch": -1, "metadata": ""}
    assert _unpack(packed) == sorted((dict(r) for r in batch.to_pylist()),
                                     key=lambda r: (r["group_id"], r["topic_partition"], r["offset"]))


_ROW = st.fixed_dictionaries({
    "group": st.sampled_from(["g", "h", None]), "tp": st.integers(0, 2), "mid": st.booleans(), "after": st.booleans(),
    "odd": st.sampled_from([None, None, None, "x"]), "epoch": st.sampled_from([-1, -1, 4, None]),
    "metadata": st.sampled_from(["", "", "m", None]), "tombstone": st.sampled_from([False, False, False, True])})


@given(rows=st.lists(_ROW, max_size=40), offsets=st.randoms(use_true_random=False))
def test_unpacking_a_packed_batch_gives_its_rows_back(rows, offsets):
    """Any mix of marks, keys (a null group too), rows unlike their key's first (another column, another metadata in
    the value, a null value), leader epochs that change, in any order: the packed batch stands for exactly the batch's
    rows, and only rows marked both ways of a key with another such row are packed."""
    positions = list(range(len(rows)))
    offsets.shuffle(positions)
    batch = _batch([dict(r, offset=o) for r, o in zip(rows, positions)])
    packed = pack_batch(batch)
    assert _unpack(packed) == sorted((dict(r) for r in batch.to_pylist()),
                                     key=lambda r: (r["group_id"] or "", r["topic_partition"], r["offset"]))
    for row in packed.to_pylist():
        if row[PACKED_COLUMN] is not None:
            offsets = row[PACKED_COLUMN]["offset"]
            assert len(offsets) >= 2 and row[COMMIT_MID_RUN_COLUMN] and row[COMMIT_AFTER_COMMIT_COLUMN]
            assert offsets == sorted(offsets) and row["offset"] == offsets[0]
            assert all(len(values) == len(offsets) for values in row[PACKED_COLUMN].values())


def test_a_batch_with_nothing_to_pack_gains_a_null_column():
    batch = _batch([dict(group="g", tp=0, offset=o, mid=False, after=True) for o in range(3)])
    packed = pack_batch(batch)
    assert packed.num_rows == 3 and packed.column(PACKED_COLUMN).null_count == 3
    assert pack_batch(packed) is packed  # packed once only


@pytest.mark.spark
def test_the_packed_read_unpacks_to_the_plain_read_and_the_same_commit_records(spark, tmp_path):
    from chispa import assert_df_equality
    from pyspark.sql import functions as F

    from offsets_audit.codec.packing import unpacked
    from offsets_audit.codec.source import read_decoded
    from offsets_audit.job import _tallies
    from offsets_audit.replay.commit_log import commit_records, commit_runs, explode_runs
    from offsets_audit.simulate import FAULT_KINDS, simulate

    simulate(tmp_path, groups=8, hours=0.2, seed=11, partitions=3, faults=list(FAULT_KINDS), formats=("segments",))
    source = {"kind": "segments", "path": str(tmp_path / "segments")}
    plain = read_decoded(spark, source, with_decoded_record=True, compact=True)
    packed = read_decoded(spark, source, with_decoded_record=True, compact=True, pack_commits=True).persist()
    try:
        runs = packed.filter(F.col(PACKED_COLUMN).isNotNull())
        in_runs = runs.select(F.sum(F.size(F.col(PACKED_COLUMN)["offset"]))).first()[0]
        assert runs.count() * 10 < in_runs, "the reader packs most mid-run commits"
        assert packed.count() == plain.count() - in_runs + runs.count()
        assert_df_equality(unpacked(packed).drop(PACKED_COLUMN), plain, ignore_row_order=True)
        expected = commit_records(plain)
        assert_df_equality(commit_records(packed), expected, ignore_row_order=True)
        apart = commit_records(packed, runs_apart=True).unionByName(explode_runs(commit_runs(packed)))
        assert_df_equality(apart, expected, ignore_row_order=True, ignore_nullable=True)
        assert commit_runs(plain).count() == 0
        # The job's tally (record counts, the pending rule's clock per block) counts each packed commit once, in one
        # scan of the packed log, as it counts the plain log's rows.
        assert_df_equality(_tallies(packed), _tallies(plain), ignore_row_order=True, ignore_nullable=True)
    finally:
        packed.unpersist()
