"""``codec.commit_runs.thin_runs``: which commits of a segment the commit log's digest never reads, by hand.

The Spark side (the digest reads the same with and without the marked commits) is in ``test_offsets_parity.py``."""
from __future__ import annotations

import random

import pyarrow as pa

from offsets_audit.codec.commit_runs import MARKER_COLUMN, READ_COLUMNS, thin_runs

_TYPES = [pa.string(), pa.string(), pa.int64(), pa.int64(), pa.int64(), pa.int64(), pa.int64(), pa.bool_(),
          pa.int64(), pa.string(), pa.bool_()]


def _row(offset, committed=None, *, key=("g", "t", 0), partition=0, time=None, producer=-1, tombstone=False,
         topic_id=None, marker=False):
    group, topic, tp = (None, None, None) if marker else key
    return (group, topic, tp, partition, offset, offset if time is None else time, producer, tombstone,
            None if marker or tombstone else (offset * 10 if committed is None else committed), topic_id, marker)


def _keep(rows) -> list[bool]:
    columns = list(zip(*rows))
    batch = pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(columns, _TYPES)],
                                       names=[*READ_COLUMNS, MARKER_COLUMN])
    return thin_runs(batch).tolist()


def test_a_rising_run_keeps_its_first_second_to_last_and_last():
    assert _keep([_row(o) for o in range(6)]) == [True, False, False, False, True, True]


def test_the_order_of_the_rows_does_not_matter():
    rows = [_row(o) for o in range(6)] + [_row(o, key=("h", "t", 0)) for o in range(6, 12)]
    expected = dict(zip(rows, _keep(rows)))
    random.Random(3).shuffle(rows)
    assert _keep(rows) == [expected[r] for r in rows]


def test_a_backwards_commit_keeps_itself_and_the_commit_before_it():
    committed = [10, 20, 30, 25, 40, 50, 60]
    assert _keep([_row(o, c) for o, c in enumerate(committed)]) == [True, False, True, True, False, True, True]


def test_a_marker_between_two_commits_does_not_end_the_run():
    """A transactional commit resolved at a marker inside a run is never applied there (its record is before the
    run, or it would end it): the run goes on, and the marker is read, never kept."""
    for partition in (0, 1):
        rows = [_row(0), _row(1), _row(2), _row(3, marker=True, partition=partition), _row(4), _row(5), _row(6)]
        assert _keep(rows) == [True, False, False, False, False, True, True]


def test_a_tombstone_or_a_transactional_commit_of_the_key_ends_the_run_and_is_kept():
    for other in (_row(3, tombstone=True), _row(3, producer=7)):
        rows = [_row(0), _row(1), _row(2), other, _row(4), _row(5), _row(6), _row(7)]
        assert _keep(rows) == [True, True, True, True, True, False, True, True]


def test_other_keys_between_two_commits_do_not_end_the_run():
    rows = [_row(o, key=("g", "t", 0) if o % 2 == 0 else ("g", "t", 1)) for o in range(10)]
    assert _keep(rows) == [True, True, False, False, False, False, True, True, True, True]


def test_the_latest_time_and_the_first_topic_id_of_a_run_are_kept():
    times = [1, 2, 9, 3, 4, 5, 6]
    assert _keep([_row(o, time=t) for o, t in enumerate(times)]) == [True, False, True, False, False, True, True]
    ids = [None, "AAAAAAAAAAAAAAAAAAAAAA", None, "YEmEmknrDMNB0wEESWyKEA", "YEmEmknrDMNB0wEESWyKEA", None, None]
    assert _keep([_row(o, topic_id=i) for o, i in enumerate(ids)]) == [True, False, False, True, False, True, True]


def test_what_cannot_be_ordered_or_compared_is_kept():
    same_offset = [_row(0), _row(1), _row(1), _row(2), _row(3)]
    assert _keep(same_offset) == [True] * 5
    no_committed = [_row(0), _row(1), (*_row(2)[:8], None, None, False), _row(3), _row(4)]
    assert _keep(no_committed) == [True] * 5
    two_partitions = [_row(o, partition=o % 2) for o in range(6)]
    assert _keep(two_partitions) == [True] * 6
    assert _keep([_row(0), _row(1)]) == [True, True]
