"""``offsets-audit demo``: the end-to-end job on an embedded default.

Generates a small mixed ``__consumer_offsets`` history (classic, consumer, share and streams groups,
offset and transactional commits, a few injected faults) as broker log segments, then runs the nightly
job on it with local Spark and prints the summary and the path of the HTML report.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from offsets_audit.config import load_settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="demo-out", help="folder for the sample history and the output tables")
    parser.add_argument("--groups", type=int, default=30, help="groups in the sample history")
    parser.add_argument("--hours", type=float, default=1.0, help="hours of history")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--output-format", choices=["parquet", "delta"], default="parquet")


def run(args) -> int:
    from offsets_audit.job import print_summary, run_job
    from offsets_audit.simulate import simulate
    from offsets_audit.spark_session import get_spark

    started = time.perf_counter()
    out = Path(args.out).resolve()
    history = out / "history"
    sim = simulate(str(history), groups=args.groups, hours=args.hours, seed=args.seed,
                   faults=("wrong_assignment", "epoch_regression", "early_assignment"), formats=("segments",))
    print(f"simulated {sim.get('records', '?'):,} records for {args.groups} groups into {history}")
    # group configs are not records: the simulated groups' assignment intervals reach the audit as
    # broker.group_overrides, and the simulated cluster's topics as the topic-metadata snapshot
    settings = load_settings(overrides={
        "run_id": "demo",
        "source": {"kind": "segments", "path": str(history / "segments")},
        "output": {"path": str(out / "tables"), "format": args.output_format},
        "broker": {"group_overrides": sim["group_overrides"], "group_overrides_complete": True},
        "topic_metadata": {"source": "file", "path": sim["topics_path"]},
    })
    # A demo-sized history is tiny for Spark: adaptive execution re-plans the rest of each plan after every
    # shuffle stage and submits each stage as its own job, and that driver work is most of the audit stage's
    # time here. The nightly job
    # keeps Spark's default: on real volumes its partition coalescing and skew handling pay for themselves.
    spark = get_spark("offsets-audit-demo", master=settings.spark.master,
                      extra_conf={"spark.sql.adaptive.enabled": "false"})
    summary = run_job(spark, settings)
    print_summary(summary)
    print(f"demo finished in {time.perf_counter() - started:.0f} s; tables under {out / 'tables'}")
    return 0
