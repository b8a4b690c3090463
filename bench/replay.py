"""Benchmark: pure batch replay of a large generated history (records/s, peak memory).

Generates with ``encode_record``: thousands of consumer groups with members, epochs, target assignments
and offset commits, plus one group with a very long history. Records are generated lazily and replayed
one at a time, so memory reflects the replay state, not the input.

    .venv/bin/python bench/replay.py [--records 2000000] [--groups 2000]

``--fold-rows``: instead, the Spark fold's pure body (``replay.spark.fold_rows``: fold + rows as the tables
hold them) over the simulator's group records (every fault kind), A/B alternated in one process: group
records decoded again from their bytes vs taken from the codec's ``decoded_record`` column (what the job
does). CPU time of this thread, so the figure does not depend on the machine's load.

    .venv/bin/python bench/replay.py --fold-rows [--groups 30] [--hours 0.3] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import resource
import time
import tracemalloc

from offsets_audit.codec import encode_record
from offsets_audit.replay import Replayer

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def generate(total: int, groups: int):
    """Yield records: each step touches one group (the long-lived group gets a tenth of all steps)."""
    offset = 0
    epochs = [1] * groups
    step = 0
    while offset < total:
        g = 0 if step % 10 == 0 else 1 + step % (groups - 1)
        group_id = f"group-{g}"
        epochs[g] += 1
        epoch = epochs[g]
        member = f"m{epoch % 4}"
        batch = [
            (5, {"groupId": group_id, "memberId": member}, {
                "instanceId": None, "rackId": None, "clientId": "c", "clientHost": "h",
                "subscribedTopicNames": ["t"], "subscribedTopicRegex": "", "rebalanceTimeoutMs": 1,
                "serverAssignor": "uniform"}, 0),
            (3, {"groupId": group_id}, {"epoch": epoch, "metadataHash": 0}, 0),
            (7, {"groupId": group_id, "memberId": member},
             {"topicPartitions": [{"topicId": TOPIC_ID, "partitions": [epoch % 8]}]}, 0),
            (6, {"groupId": group_id}, {"assignmentEpoch": epoch, "assignmentTimestamp": offset}, 0),
            (8, {"groupId": group_id, "memberId": member}, {
                "memberEpoch": epoch, "previousMemberEpoch": epoch - 1, "state": 0,
                "assignedPartitions": [{"topicId": TOPIC_ID, "partitions": [epoch % 8], "assignmentEpochs": [epoch]}],
                "partitionsPendingRevocation": []}, 0),
        ]
        batch += [(1, {"group": group_id, "topic": "t", "partition": p},
                   {"offset": offset, "leaderEpoch": 0, "metadata": "", "commitTimestamp": offset}, 3) for p in range(5)]
        for record_type, key, value, version in batch:
            k, v = encode_record(record_type, key, value, version)
            yield {"key": k, "value": v, "partition": 0, "offset": offset, "timestamp": offset,
                   "producer_id": -1, "is_control": False}
            offset += 1
        step += 1


def simulated_group_inputs(groups: int, hours: float) -> dict[str, dict[str, list]]:
    """Per group id, the fold's input columns as ``replay.spark._group_inputs`` hands them to the fold."""
    import tempfile
    from pathlib import Path

    from offsets_audit.codec.offset_commits import OFFSET_COMMIT_TYPE_IDS
    from offsets_audit.codec.spark import DECODED_RECORD_COLUMN, decode_columns
    from offsets_audit.replay.spark import _COMMIT_STAND_INS
    from offsets_audit.simulate import simulate
    from offsets_audit.simulate.scenarios import FAULT_KINDS
    from offsets_audit.sources.segments import read_segment

    by_group: dict[str, dict[str, list]] = {}
    with tempfile.TemporaryDirectory() as out:
        simulate(out, groups=groups, hours=hours, faults=FAULT_KINDS, formats=("segments",))
        for path in sorted(Path(out).rglob("*.log")):
            records = [r for r in read_segment(path) if not r["is_control"]]
            decoded = decode_columns([r["key"] for r in records], [r["value"] for r in records],
                                     with_decoded_record=True)
            previous: dict[str, int | None] = {}
            for r, group_id, record_type, blob in zip(records, decoded["group_id"], decoded["record_type"],
                                                      decoded[DECODED_RECORD_COLUMN]):
                is_commit = record_type in OFFSET_COMMIT_TYPE_IDS
                # _group_inputs: no commit tombstones; a commit only as the first one after a group record, as a
                # stand-in decoded record
                if group_id is None or (is_commit and r["value"] is None):
                    continue
                after_commit = previous.get(group_id) in OFFSET_COMMIT_TYPE_IDS
                previous[group_id] = record_type
                if is_commit and after_commit:
                    continue
                # The commit's bytes stay (the A/B's "bytes decoded again" side decodes them); _group_inputs sends
                # only the stand-in, which the other side folds.
                key_bytes, value_bytes = r["key"], r["value"]
                if is_commit:
                    blob = _COMMIT_STAND_INS[record_type]
                columns = by_group.setdefault(group_id, {name: [] for name in (
                    "key", "value", "partition", "offset", "timestamp_ms", DECODED_RECORD_COLUMN)})
                for name, value in (("key", key_bytes), ("value", value_bytes), ("partition", r["partition"]),
                                    ("offset", r["offset"]), ("timestamp_ms", r["timestamp"]),
                                    (DECODED_RECORD_COLUMN, blob)):
                    columns[name].append(value)
    return by_group


def fold_rows_ab(groups: int, hours: float, rounds: int) -> dict:
    """The ``--fold-rows`` A/B; returns its figures (CPU seconds per round of each way)."""
    from offsets_audit.codec.spark import DECODED_RECORD_COLUMN
    from offsets_audit.replay.fold import GroupFold
    from offsets_audit.replay.spark import fold_rows

    by_group = simulated_group_inputs(groups, hours)
    n = sum(len(c["key"]) for c in by_group.values())
    with_blob = sum(b is not None for c in by_group.values() for b in c[DECODED_RECORD_COLUMN])
    print(f"group records: {n:,} in {len(by_group)} groups ({with_blob:,} with the codec's decoded form)")

    def run(use_decoded: bool) -> tuple[float, list]:
        out = []
        start = time.thread_time()
        for group_id, c in by_group.items():
            fold = GroupFold(group_id)
            out.extend(fold_rows(fold, c["key"], c["value"], c["partition"], c["offset"], c["timestamp_ms"],
                                 c[DECODED_RECORD_COLUMN] if use_decoded else None))
        return time.thread_time() - start, out

    seconds: dict[str, list[float]] = {"bytes_decoded_again_cpu_s": [], "codec_decoded_form_cpu_s": []}
    for i in range(rounds):
        for use_decoded in (False, True):
            cpu, rows = run(use_decoded)
            seconds["codec_decoded_form_cpu_s" if use_decoded else "bytes_decoded_again_cpu_s"].append(round(cpu, 3))
            print(f"round {i + 1} {'codec decoded form' if use_decoded else 'bytes decoded again':<20} "
                  f"{cpu:6.2f} s CPU = {n / cpu:,.0f} group records per CPU-second ({len(rows):,} rows; "
                  f"load average {os.getloadavg()[0]:.1f})")
    assert run(False)[1] == run(True)[1], "the two ways must give the same rows"
    print("rows equal: yes")
    return {"mode": "fold_rows", "groups": groups, "hours": hours, "group_records": n, **seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=2_000)
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python allocations (slower)")
    parser.add_argument("--fold-rows", action="store_true", help="A/B the Spark fold's body (see above)")
    parser.add_argument("--hours", type=float, default=0.3, help="--fold-rows: simulated hours")
    parser.add_argument("--rounds", type=int, default=3, help="--fold-rows: alternated A/B rounds")
    args = parser.parse_args()
    from results import record as record_figures  # bench/ is this script's folder, first on sys.path

    if args.fold_rows:
        record_figures("replay", fold_rows_ab(30 if args.groups == 2_000 else args.groups, args.hours, args.rounds))
        return

    records = list(generate(args.records, args.groups))
    if args.tracemalloc:
        tracemalloc.start()
    replayer = Replayer()
    replayer.result.events = _Counter()
    start, cpu_start = time.perf_counter(), time.process_time()
    for record in records:
        replayer.apply(record)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    print(f"records:            {len(records):,}")
    print(f"groups:             {len(replayer.result.groups):,}")
    print(f"events:             {replayer.result.events.count:,}")
    print(f"long group records: {replayer.result.groups['group-0'].records_applied:,}")
    print(f"elapsed:            {elapsed:.1f} s")
    print(f"records/s:          {len(records) / elapsed:,.0f}")
    # The machine may be shared: CPU time is this process's own work, whatever the load.
    print(f"CPU time:           {cpu:.1f} s = {len(records) / cpu:,.0f} records per CPU-second "
          f"(load average {os.getloadavg()[0]:.1f})")
    print(f"peak RSS:           {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB (includes the input list)")
    figures = {"mode": "replay_records", "records": len(records), "groups": len(replayer.result.groups),
               "events": replayer.result.events.count, "records_per_s": round(len(records) / elapsed),
               "records_per_cpu_second": round(len(records) / cpu),
               "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
    if args.tracemalloc:
        _, peak = tracemalloc.get_traced_memory()
        print(f"tracemalloc peak:   {peak / 2**20:,.0f} MiB (replay state)")
        figures["tracemalloc_peak_mib"] = round(peak / 2**20)
    record_figures("replay", figures)


class _Counter(list):
    """Counts events instead of keeping them, so memory reflects the replay state."""

    count = 0

    def extend(self, items) -> None:
        self.count += len(items)

    def append(self, item) -> None:
        self.count += 1


if __name__ == "__main__":
    main()
