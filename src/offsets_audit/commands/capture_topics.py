"""``offsets-audit capture-topics``: write a topic-metadata snapshot of a live cluster for assignor re-runs.

The snapshot (JSON, ``{"topics": [{"name", "id", "partitions", "partition_racks"}]}``) is what
``offsets-audit run --topic-metadata FILE`` reads; since KIP-1101 the log no longer carries it.
"""

from __future__ import annotations

import argparse
import sys
import time

from offsets_audit.assignors.topic_metadata import capture_topics, write_topics


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, help="HOST:PORT of a broker of the cluster")
    parser.add_argument("--output", required=True, help="snapshot file to write (JSON)")
    parser.add_argument("--topic", action="append", dest="topics", help="only this topic (repeatable)")
    parser.add_argument("--include-internal", action="store_true", help="also capture internal topics")
    parser.add_argument("--stamp", action="store_true",
                        help="add valid_from_ms = now to every topic (to merge snapshots taken over time)")
    parser.add_argument("--timeout-ms", type=int, default=30_000, help="admin request timeout")


def run(args) -> int:
    topics = capture_topics(args.bootstrap_server, args.topics, include_internal=args.include_internal,
                            timeout_ms=args.timeout_ms)
    if args.stamp:
        now = int(time.time() * 1000)
        topics = [dict(t, valid_from_ms=now) for t in topics]
    path = write_topics(topics, args.output)
    with_ids = sum(1 for t in topics if t.get("id"))
    print(f"captured {len(topics)} topics ({with_ids} with topic ids) into {path}", file=sys.stderr)
    return 0
