"""A run summary's figures and the lines a run prints from them, shared by the batch run (``job``) and the incremental one."""
from __future__ import annotations

from collections.abc import Callable


def run_figures(tables: dict) -> dict:
    """The summary's figures of a run's tables (``None`` or absent ones skipped): ``groups`` per type,
    ``findings`` and ``provisional_findings`` per ``rule (severity)``, ``latency`` rows of the group-type level;
    each a small Spark job over a cached table, run side by side."""
    from pyspark.sql import functions as F

    from offsets_audit.plans import side_by_side

    def rule_counts(df):
        return lambda: {f"{r['rule']} ({r['severity']})": r["n"] for r in
                        df.groupBy("rule", "severity").agg(F.count("*").alias("n")).orderBy("rule").collect()}

    work: dict[str, Callable[[], object]] = {}
    if tables.get("group_state") is not None:
        work["groups"] = lambda: {r["group_type"] or "?": r["n"] for r in
                                  tables["group_state"].groupBy("group_type").agg(F.count("*").alias("n")).collect()}
    for name in ("findings", "provisional_findings"):
        if tables.get(name) is not None:
            work[name] = rule_counts(tables[name])
    latency = tables.get("latency_summary")
    if latency is not None and "level" in latency.columns:
        work["latency"] = lambda: [r.asDict() for r in
                                   latency.filter("level = 'group_type'").orderBy("group_type").collect()]
    return {name: figures for name, (figures, _) in side_by_side(work).items()}


def print_groups_and_quarantine(summary: dict, file) -> None:
    """Groups per type, then the quarantine's rows per error code (when there are any)."""
    if summary.get("groups"):
        print("groups: " + ", ".join(f"{k} {v}" for k, v in sorted(summary["groups"].items())), file=file)
    for note in (summary.get("input") or {}).get("notes") or []:
        print(f"input: {note}", file=file)
    by_error = summary["records"]["by_error_code"]
    if by_error:
        print("quarantine: " + ", ".join(f"{k} {v}" for k, v in by_error.items()), file=file)


def print_rule_counts(title: str, counts: dict | None, file) -> None:
    """``title: total`` then one line per ``rule (severity)``."""
    counts = counts or {}
    print(f"{title}: {sum(counts.values())}", file=file)
    for rule, n in counts.items():
        print(f"  {rule}: {n}", file=file)


def latency_quartet(row: dict, prefix: str) -> str:
    """``p50/p95/p99/max`` of one latency metric of a ``latency_summary`` row, ``-`` where it has none."""
    return "/".join("-" if row.get(f"{prefix}_{q}") is None else f"{row[f'{prefix}_{q}']:.0f}"
                    for q in ("p50", "p95", "p99", "max"))
