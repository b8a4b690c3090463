"""A run's summary (``RunSummary``), its figures and the lines a run prints from them, shared by the batch run
(``job``) and the incremental one."""
from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from offsets_audit.settings import Settings


def run_figures(tables: dict) -> dict:
    """The summary's figures of a run's tables (``None`` or absent ones skipped): ``groups`` per type,
    ``findings`` and ``provisional_findings`` per ``rule (severity)``, ``latency`` rows of the group-type level.

    One Spark query: the small aggregates of the cached tables as rows of one union (``figure``, ``key``, ``n``, and
    the latency row as a struct), not a query per figure."""
    from pyspark.sql import functions as F

    latency = tables.get("latency_summary")
    if latency is not None and "level" not in latency.columns:
        latency = None
    row_type = (latency.schema.simpleString() if latency is not None else "struct<level:string>")
    no_row = F.lit(None).cast(row_type).alias("row")

    def counted(figure: str, df, key):
        return df.groupBy(key.alias("key")).agg(F.count("*").alias("n")).select(
            F.lit(figure).alias("figure"), "key", "n", no_row)

    parts = []
    if tables.get("group_state") is not None:
        parts.append(counted("groups", tables["group_state"], F.coalesce(F.col("group_type"), F.lit("?"))))
    for name in ("findings", "provisional_findings"):
        if tables.get(name) is not None:
            parts.append(counted(name, tables[name], F.concat(F.col("rule"), F.lit(" ("), F.col("severity"),
                                                             F.lit(")"))))
    if latency is not None:
        parts.append(latency.filter("level = 'group_type'").select(
            F.lit("latency").alias("figure"), F.col("group_type").alias("key"), F.lit(0).cast("long").alias("n"),
            F.struct(*[F.col(c) for c in latency.columns]).alias("row")))
    if not parts:
        return {}
    rows = functools.reduce(lambda a, b: a.unionByName(b), parts).collect()
    figures: dict = {}
    if tables.get("group_state") is not None:
        figures["groups"] = {r["key"]: r["n"] for r in rows if r["figure"] == "groups"}
    for name in ("findings", "provisional_findings"):
        if tables.get(name) is not None:
            figures[name] = {r["key"]: r["n"] for r in sorted((r for r in rows if r["figure"] == name),
                                                              key=lambda r: r["key"])}
    if latency is not None:
        figures["latency"] = [r["row"].asDict() for r in sorted(
            (r for r in rows if r["figure"] == "latency"), key=lambda r: (r["key"] is not None, r["key"] or ""))]
    return figures


def carried_run_figures(output_path: str, from_run: str, run_id: str) -> dict | None:
    """``run_figures`` of run ``run_id``, which carried run ``from_run``'s tables (``incremental.carried_audit``), with
    no Spark job: ``groups`` and ``provisional_findings`` are ``from_run``'s summary's (its ``group_state`` and
    ``provisional_findings`` files are this run's, copied), ``findings`` none (the run completes nothing), and
    ``latency`` the group-type rows of ``run_id``'s ``latency_summary`` files once written, read on the driver (as
    ``run_figures`` gives them: a row's ``causes`` as rows). None when one of them cannot be read that way."""
    from pathlib import Path

    from pyspark.sql import Row

    from offsets_audit import tables
    from offsets_audit.sinks.files import is_local, local_path
    from offsets_audit.sinks.parquet import parquet_run_rows

    if not is_local(output_path):
        return None
    try:
        earlier = json.loads(Path(local_path(f"{output_path}/summary/{from_run}.json")).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not all(isinstance(earlier.get(name), dict) for name in ("groups", "provisional_findings")):
        return None
    rows = parquet_run_rows(output_path, "latency_summary", run_id, tables.schema("latency_summary").names)
    if rows is None:
        return None
    latency = [{**row, "causes": None if row["causes"] is None else [Row(**cause) for cause in row["causes"]]}
               for row in sorted((r for r in rows if r["level"] == "group_type"),
                                 key=lambda r: (r["group_type"] is not None, r["group_type"] or ""))]
    return {"groups": earlier["groups"], "findings": {}, "provisional_findings": earlier["provisional_findings"],
            "latency": latency}


def write_summary(spark, settings: Settings, summary: RunSummary) -> None:
    """The run's HTML report (``output.html_report``), then ``summary/<run_id>.json``, under ``output.path``; their
    paths in ``summary``."""
    from offsets_audit.sinks import Output, write_text_file

    if settings.output.html_report:
        from offsets_audit.sinks.report import write_report
        summary.report = write_report(spark, Output.of(settings.output), settings.run_id, summary.as_dict())
    summary.summary_path = write_text_file(spark, settings.output.path, f"summary/{settings.run_id}.json",
                                           summary.to_json())


def print_records(summary: RunSummary, file, what: str = "") -> None:
    """The records line: read = decoded + quarantined, and what unreadable stretches cost."""
    r = summary.records
    print(f"run {summary.run_id}{what}: read {r.read:,} records = {r.decoded:,} decoded + {r.quarantined:,} "
          f"quarantined; {r.records_lost:,} records lost in {r.unreadable:,} unreadable stretches", file=file)


def print_groups_and_quarantine(summary: RunSummary, file) -> None:
    """Groups per type, then the quarantine's rows per error code (when there are any)."""
    if summary.groups:
        print("groups: " + ", ".join(f"{k} {v}" for k, v in sorted(summary.groups.items())), file=file)
    for note in (summary.input or {}).get("notes") or []:
        print(f"input: {note}", file=file)
    by_error = summary.records.by_error_code
    if by_error:
        print("quarantine: " + ", ".join(f"{k} {v}" for k, v in by_error.items()), file=file)


def print_timings(summary: RunSummary, file, note: str = "") -> None:
    """Each stage's seconds (its steps, ``stage:step``, are in summary.json)."""
    print("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in summary.timings_s.items() if ":" not in k) + note,
          file=file)
    if summary.report:
        print(f"report: {summary.report}", file=file)


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


@dataclass(frozen=True, kw_only=True)
class RecordCounts:
    """A run's ``records``: ``read = decoded + quarantined`` records (each with its offset); a stretch of bytes
    no source could read is not a record but one ``unreadable`` quarantine row that says how many offsets it cost
    (``records_lost``), so ``read + records_lost`` is the number of records the input held."""

    read: int = 0
    decoded: int = 0
    quarantined: int = 0
    unreadable: int = 0
    records_lost: int = 0
    by_record_type: Mapping[str, int] = field(default_factory=dict)
    by_error_code: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, counts: Mapping[str, Any]) -> RecordCounts:
        """The counts of a mapping with these keys (``summary.json``'s ``records``)."""
        return cls(**{f.name: counts[f.name] for f in dataclasses.fields(cls) if f.name in counts})

    def as_dict(self) -> dict[str, Any]:
        return {f.name: _copied(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True, kw_only=True)
class MicroBatches:
    """An incremental run's micro-batches: those its fold and records queries ran, and those it covers (every one
    since the last published run)."""

    fold: list[int]
    records: list[int]
    covered_fold: list[int]
    covered_records: list[int]

    def as_dict(self) -> dict[str, Any]:
        return {"fold": list(self.fold), "records": list(self.records),
                "covered": {"fold": list(self.covered_fold), "records": list(self.covered_records)}}


@dataclass(frozen=True, kw_only=True)
class IncrementalFacts:
    """What an incremental run's summary adds: its checkpoint and micro-batches, its clock (the newest record
    time so far), the rules it did not evaluate, and per stage "ran" or "skipped: why" (or how it ran)."""

    checkpoint: str
    batches: MicroBatches
    clock: int | None
    skipped_rules: tuple[str, ...]
    stages: Mapping[str, str]


@dataclass(kw_only=True)
class RunSummary:
    """A run's summary: what ``offsets-audit run`` prints, the HTML report shows and ``summary/<run_id>.json``
    holds (``as_dict``). ``timings_s``: seconds per stage (``stages.RunStages``); ``tables``: what
    ``sinks.write_run`` wrote; the figures of ``run_figures``; ``input``: the batch source's report (files read and
    skipped, notes); ``incremental``: an incremental run's own facts; ``report`` and ``summary_path``: where the
    HTML report and the JSON were written."""

    run_id: str
    records: RecordCounts
    timings_s: dict[str, float]
    tables: dict[str, Any]
    groups: dict[str, int] | None = None
    findings: dict[str, int] | None = None
    provisional_findings: dict[str, int] | None = None
    latency: list[dict] | None = None
    input: dict | None = None
    incremental: IncrementalFacts | None = None
    report: str | None = None
    summary_path: str | None = None

    def with_figures(self, figures: Mapping[str, Any]) -> RunSummary:
        """This summary with ``run_figures``' figures."""
        return dataclasses.replace(self, **{name: figures[name] for name in FIGURES if name in figures})

    @property
    def stages(self) -> Mapping[str, str]:
        """Per stage "ran" or "skipped: why" (an incremental run's; a batch run runs every stage)."""
        return self.incremental.stages if self.incremental is not None else {}

    def as_dict(self) -> dict[str, Any]:
        """The JSON form, ``summary/<run_id>.json``: absent figures and paths are left out."""
        out: dict[str, Any] = {"run_id": self.run_id}
        run = self.incremental
        if run is not None:
            out.update(mode="incremental", checkpoint=run.checkpoint, batches=run.batches.as_dict())
        out["records"] = self.records.as_dict()
        if run is not None:
            out["clock"] = run.clock
        out.update(timings_s=self.timings_s, tables=self.tables)
        if run is not None:
            out.update(skipped_rules=list(run.skipped_rules), stages=dict(run.stages))
        for name in (*FIGURES, "input", "report", "summary_path"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, default=str)


#: The figures ``run_figures`` computes, in the order a summary lists them.
FIGURES = ("groups", "findings", "provisional_findings", "latency")


def _copied(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value
