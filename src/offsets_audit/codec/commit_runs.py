"""Runs of plain offset commits, and the rows of a run the commit log's digest can do without.

A healthy ``__consumer_offsets`` is mostly one long run per offset key (group, topic, partition): plain commits
(producer id -1, not tombstones) one after another, each stored at its record, each above the one before. The
digest (``commit_log.resolve_commits(..., digest=True)``) keeps few of them: each key's last row, the commits below
the one stored before them, those not applied, and what each key's last row says of all its records (the latest
record time, the first record naming a topic id). ``thin_runs`` takes the rows of one whole segment and finds the
commits in the middle of a run that none of those reads: the segments reader marks them (``codec.spark.mark_range``)
and the digest leaves them out before its shuffle. Its rows come out the same (the argument is in ``thin_runs``).

Pure numpy and pyarrow, no Spark.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offsets_audit.codec.schema import ZERO_UUID

#: Column of ``thin_runs``' input that marks a transaction marker (a COMMIT/ABORT control record) of the log.
MARKER_COLUMN = "_marker"
#: The columns ``thin_runs`` reads besides ``MARKER_COLUMN`` (``commit_log.commit_records``' names).
READ_COLUMNS = ("group_id", "topic", "topic_partition", "record_partition", "record_offset", "timestamp",
                "producer_id", "is_tombstone", "committed_offset", "topic_id")
NO_PRODUCER_ID = -1


def thin_runs(table: pa.RecordBatch) -> np.ndarray:
    """Which rows of ``table`` to keep: a boolean per row (markers come back false: they were only read).

    ``table`` holds offset commits (``READ_COLUMNS``) and transaction markers (``MARKER_COLUMN`` true), in any
    order, and in each record partition every commit and marker of the log between its lowest and highest offset
    there (``codec.spark.mark_range``: one whole segment).

    A run is a longest sequence of a key's commits in one partition, in offset order, of plain commits with a
    committed offset. Within a run the record offsets rise, and the commit stored before a row of a run is the row
    before it, the one stored after a run its last row. In the coordinator's order of a key's commits
    (``commit_log.resolve_commits``: plain ones at their record, transactional ones at their marker) only a
    transactional commit of the key resolved at a marker between two rows of a run can lie between them, and it is
    never applied there: its record is not between them (it would end the run), so it is before the run's first
    row, whose record offset the stored commit's is at least (``OffsetMetadataManager`` stores a transactional
    commit only above the stored commit's record offset). Nor does it change what the rows after it store. So a
    marker does not end a run: transactional producers' markers come every few records in a partition, and runs cut
    at each of them thinned a third of a simulated log's commits where whole runs thin nine tenths. Such a commit's
    row is kept (every transactional commit is), and what the digest reads of it comes out the same (``applied``,
    its outcome, its marker); its ``previous_*`` columns, read on applied rows only, the digest leaves null
    (``commit_log.resolve_commits``). Each row of a run is kept that is:

    * the first, the second-to-last or the last of its run: what comes after the run reads the last, and the
      last's ``previous_*`` columns (the key's last row) the one before it;
    * below the commit before it (``offset_committed_backwards``), or the commit before such a row;
    * the first with the run's latest record time, the first naming a topic id (``key_latest_time``,
      ``key_first_topic_id`` on the key's last row: a maximum and a minimum over all its records).

    The rows dropped are then not below the commit before them, and the row after them is not below them: every row
    the digest keeps sees the same commit stored before it (the nearest kept row before a dropped stretch has a
    committed offset at most that of the stretch's end, which the row after is not below), the same ``applied``,
    ``segment`` and last tombstone (tombstones are never dropped). Where the key has no commit in another partition
    the rows dropped are applied at their record, so the digest keeps none of them; where it has, a later
    partition's commit can fail to apply, and ``commit_log._digest_commits`` keeps every commit of such groups."""
    n = table.num_rows
    keep = np.ones(n, dtype=bool)
    if n == 0:
        return keep
    marker = pc.fill_null(table.column(MARKER_COLUMN), False).to_numpy(zero_copy_only=False).astype(bool)
    keep[marker] = False
    commits = np.flatnonzero(~marker)
    if commits.size < 3:
        return keep

    every_row = commits.size == n  # no markers (``codec.spark`` passes none): no row to take out

    def column(name):
        return table.column(name) if every_row else pc.take(table.column(name), pa.array(commits))

    def codes(name):
        indices = pc.fill_null(pc.dictionary_encode(column(name)).indices, -1)
        return indices.to_numpy(zero_copy_only=False).astype(np.int64)

    def longs(name, fill):
        return pc.fill_null(pc.cast(column(name), pa.int64()), fill).to_numpy(zero_copy_only=False)

    def valid(name):
        return pc.is_valid(column(name)).to_numpy(zero_copy_only=False)

    group, topic = codes("group_id"), codes("topic")
    topic_partition = longs("topic_partition", -1)
    partition = longs("record_partition", -1)
    offset = longs("record_offset", -1)
    committed = longs("committed_offset", 0)
    producer = longs("producer_id", NO_PRODUCER_ID)
    tombstone = pc.fill_null(column("is_tombstone"), True).to_numpy(zero_copy_only=False).astype(bool)
    plain = (~tombstone & (producer == NO_PRODUCER_ID) & valid("committed_offset") & valid("group_id") & valid("topic") & valid("topic_partition")
             & valid("record_partition") & valid("record_offset"))
    if plain.sum() < 3:
        return keep

    order = np.lexsort((offset, partition, topic_partition, topic, group))
    o_plain = plain[order]
    o_offset = offset[order]
    # link[i]: sorted rows i - 1 and i are neighbours in one run.
    link = np.zeros(commits.size, dtype=bool)
    link[1:] = (o_plain[1:] & o_plain[:-1]
                & (group[order][1:] == group[order][:-1]) & (topic[order][1:] == topic[order][:-1])
                & (topic_partition[order][1:] == topic_partition[order][:-1])
                & (partition[order][1:] == partition[order][:-1])
                & (o_offset[1:] > o_offset[:-1]))
    next_link = np.append(link[1:], False)
    after_next_link = np.append(next_link[1:], False)
    kept = ~link | ~next_link | ~after_next_link  # first, last, second-to-last
    o_committed = committed[order]
    backwards = np.zeros(commits.size, dtype=bool)
    backwards[1:] = link[1:] & (o_committed[1:] < o_committed[:-1])
    kept |= backwards | np.append(backwards[1:], False)

    run = np.cumsum(~link) - 1
    starts = np.flatnonzero(~link)
    time_valid = valid("timestamp")[order]
    time = np.where(time_valid, longs("timestamp", 0)[order], np.iinfo(np.int64).min)
    latest = np.maximum.reduceat(time, starts)
    kept |= _first_per_run(time == latest[run], run)
    topic_id = column("topic_id")
    named = pc.and_(pc.is_valid(topic_id), pc.invert(pc.is_in(topic_id, pa.array([ZERO_UUID, ""]))))
    named = pc.fill_null(named, False).to_numpy(zero_copy_only=False).astype(bool)[order]
    kept |= _first_per_run(named, run)

    keep[commits[order]] = kept | ~o_plain
    return keep


def _first_per_run(mask: np.ndarray, run: np.ndarray) -> np.ndarray:
    """The first true of ``mask`` in each run (``run`` numbers the sorted rows' runs, non-decreasing)."""
    first = np.zeros(mask.size, dtype=bool)
    hits = np.flatnonzero(mask)
    if hits.size:
        _, at = np.unique(run[hits], return_index=True)
        first[hits[at]] = True
    return first
