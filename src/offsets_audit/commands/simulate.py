"""``offsets-audit simulate``: write a generated ``__consumer_offsets`` history (segments and/or Parquet)."""

from __future__ import annotations

import json

from offsets_audit.errors import UserError
from offsets_audit.sources.compression import COMPRESSION_IDS

FORMATS = ("segments", "parquet")


def add_arguments(parser) -> None:
    from offsets_audit.simulate.scenarios import FAULT_KINDS

    parser.add_argument("--out", required=True, help="output directory (segments/, parquet/, faults.json, "
                                                     "model_state.json)")
    parser.add_argument("--groups", type=int, default=20, help="number of groups (default 20)")
    parser.add_argument("--hours", type=float, default=1.0, help="hours of history (default 1)")
    parser.add_argument("--seed", type=int, default=7, help="random seed; same seed = same bytes (default 7)")
    parser.add_argument("--partitions", type=int, default=50,
                        help="__consumer_offsets partition count (offsets.topic.num.partitions, default 50)")
    parser.add_argument("--compression", default="none", help=f"batch compression: {', '.join(COMPRESSION_IDS)}")
    parser.add_argument("--faults", default="", help=f"comma-separated faults to inject: {', '.join(FAULT_KINDS)}")
    parser.add_argument("--format", default="segments,parquet", help="comma-separated: segments, parquet")
    parser.add_argument("--workers", type=int, default=1, help="processes (one per __consumer_offsets partition)")
    parser.add_argument("--segment-mb", type=float, default=64.0, help="roll segments at this size (default 64)")
    parser.add_argument("--compact", action="store_true", help="drop superseded records, as log compaction does")
    parser.add_argument("--commit-interval-ms", type=int, default=5000,
                        help="consumer auto-commit interval (default 5000)")
    parser.add_argument("--hog-members", type=int, default=0,
                        help="add one big consumer group of this many members that rebalances every few seconds, "
                             "on the first consumer group's __consumer_offsets partition (default 0: none)")
    parser.add_argument("--hog-partitions", type=int, default=600, help="partitions of the big group's topic")
    parser.add_argument("--hog-churn-ms", type=int, default=2000,
                        help="mean time between the big group's membership changes (default 2000)")
    parser.add_argument("--hog-interval-ms", type=int, default=0,
                        help="the big group's consumer.assignment.interval.ms (default 0)")


def _csv(text: str) -> tuple:
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


def run(args) -> int:
    from offsets_audit.simulate import simulate
    from offsets_audit.simulate.scenarios import FAULT_KINDS

    formats = _csv(args.format)
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise UserError(f"--format {args.format!r} is not a list of {', '.join(FORMATS)}",
                        fix="e.g. --format segments,parquet")
    faults = _csv(args.faults)
    unknown = [f for f in faults if f not in FAULT_KINDS]
    if unknown:
        raise UserError(f"--faults names unknown fault(s) {', '.join(unknown)}",
                        fix=f"use some of {', '.join(FAULT_KINDS)}")
    if args.compression not in COMPRESSION_IDS:
        raise UserError(f"--compression {args.compression!r} is not supported",
                        fix=f"use one of {', '.join(COMPRESSION_IDS)}")
    if min(args.hog_members, args.hog_interval_ms) < 0 or args.hog_partitions < 1 or args.hog_churn_ms < 1:
        raise UserError("--hog-members and --hog-interval-ms must not be negative, --hog-partitions and "
                        "--hog-churn-ms must be positive", fix="e.g. --hog-members 60 --hog-churn-ms 2000")
    if args.groups < 1 or args.hours <= 0 or args.partitions < 1 or args.workers < 1:
        raise UserError("--groups, --hours, --partitions and --workers must be positive",
                        fix="e.g. --groups 20 --hours 1 --partitions 50")
    summary = simulate(args.out, groups=args.groups, hours=args.hours, seed=args.seed, partitions=args.partitions,
                       faults=faults, formats=formats, compression=args.compression, workers=args.workers,
                       segment_bytes=int(args.segment_mb * 1024 * 1024), compact=args.compact,
                       commit_interval_ms=args.commit_interval_ms, hog_members=args.hog_members,
                       hog_partitions=args.hog_partitions, hog_churn_mean_ms=args.hog_churn_ms,
                       hog_interval_ms=args.hog_interval_ms)
    print(json.dumps(summary))
    return 0
