"""Simulator throughput: records per second for a given size, sequential vs parallel workers.

Usage: python bench/simulate.py [--groups 200] [--hours 1] [--workers 2] [--out /tmp/sim-bench]
"""

import argparse
import shutil
import sys

from offsets_audit.simulate import simulate


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--compression", default="none")
    parser.add_argument("--format", default="segments")
    parser.add_argument("--out", default="/tmp/sim-bench")
    args = parser.parse_args(argv)
    shutil.rmtree(args.out, ignore_errors=True)
    summary = simulate(args.out, groups=args.groups, hours=args.hours, workers=args.workers,
                       compression=args.compression, formats=tuple(args.format.split(",")))
    rate = summary["records"] / max(summary["seconds"], 1e-9)
    print(f"groups={args.groups} hours={args.hours} workers={args.workers} records={summary['records']:,} "
          f"batches={summary['batches']:,} seconds={summary['seconds']} records/s={rate:,.0f}")
    from results import record  # bench/ is this script's folder, first on sys.path

    record("simulate", {"groups": args.groups, "hours": args.hours, "workers": args.workers,
                        "compression": args.compression, "records": summary["records"],
                        "batches": summary["batches"], "seconds": summary["seconds"], "records_per_s": round(rate)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
