"""The lines a run prints to stdout from its summary, shared by the batch run (``job``) and the incremental one."""
from __future__ import annotations


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
