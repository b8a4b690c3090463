"""Benchmark: pure batch replay of a large generated history (records/s, peak memory).

Generates with ``encode_record``: thousands of consumer groups with members, epochs, target assignments
and offset commits, plus one group with a very long history. Records are generated lazily and replayed
one at a time, so memory reflects the replay state, not the input.

    .venv/bin/python bench/replay.py [--records 2000000] [--groups 2000]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=2_000)
    parser.add_argument("--tracemalloc", action="store_true", help="also trace Python allocations (slower)")
    args = parser.parse_args()

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
    if args.tracemalloc:
        _, peak = tracemalloc.get_traced_memory()
        print(f"tracemalloc peak:   {peak / 2**20:,.0f} MiB (replay state)")


class _Counter(list):
    """Counts events instead of keeping them, so memory reflects the replay state."""

    count = 0

    def extend(self, items) -> None:
        self.count += len(items)

    def append(self, item) -> None:
        self.count += 1


if __name__ == "__main__":
    main()
