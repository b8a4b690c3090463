"""``offsets-audit check``: the CI data-quality gate.

Runs the audit job (``offsets_audit.job.run_job``) on a dump or log segments, then exits 1 when a
finding reaches ``check.fail_on`` (info < warning < error; ``never`` only reports), 0 otherwise (also
on a clean run with no findings at all). A configuration or input mistake exits 2 with one line; a crash
exits 3, so that a bug is never mistaken for the gate's FAIL. It writes a JUnit XML file (one testcase per rule; a failing rule's failure lists its findings with their
evidence records) and a JSON summary, and prints one verdict line on stdout.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import traceback
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Mapping

from offsets_audit.errors import UserError, environment_failure, unreadable_input

from offsets_audit.audit.model import SEVERITY_RANK
from offsets_audit.audit.rules.registry import RULES
from offsets_audit.settings import RuleSettings, Settings

MAX_FINDINGS_PER_CASE = 100
#: Exit codes: PASS, FAIL, a person's mistake (one line), and a crash, which must never look like FAIL.
EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INTERNAL_ERROR = 0, 1, 2, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # check's own arguments: CI inputs only, no kafka/delta.
    parser.add_argument("--config", help="YAML config (e.g. conf/ci.yaml)")
    parser.add_argument("--input", help="override source.path: a Parquet dump or a broker log dir")
    parser.add_argument("--input-format", choices=["parquet", "segments"], help="override source.kind")
    parser.add_argument("--output", help="override output.path")
    parser.add_argument("--output-catalog", metavar="CATALOG.SCHEMA",
                        help="override output.catalog: write the tables by name, <catalog>.<schema>.<table>")
    parser.add_argument("--run-id", help="override run_id")
    parser.add_argument("--topic-metadata", help="topic-metadata snapshot file (JSON or Parquet)")
    parser.add_argument("--group-configs", help="group configs snapshot (capture-group-configs; JSON or Parquet)")
    parser.add_argument("--fail-on", choices=["info", "warning", "error", "never"], help="override check.fail_on")
    parser.add_argument("--junit-xml", help="override check.junit_xml")
    parser.add_argument("--json-summary", help="override check.json_summary")
    parser.add_argument("--incremental", action="store_true",
                        help="gate over what is new since the last run (state kept in --checkpoint): the findings "
                             "this run's records complete plus those still open at the end of the log")
    parser.add_argument("--checkpoint", help="checkpoint folder for --incremental (the same as the nightly run's)")


def failing(findings: list[dict], fail_on: str) -> list[dict]:
    """Findings at or above the ``fail_on`` severity."""
    floor = SEVERITY_RANK[fail_on]
    return [f for f in findings if SEVERITY_RANK.get(f["severity"], -1) >= floor]


def losses(records: dict | None) -> tuple[int, int]:
    """(quarantined rows, records lost where batch framing was lost) from a run summary's ``records``."""
    records = records or {}
    return int(records.get("quarantined") or 0), int(records.get("records_lost", 0) or 0)


def fails_on_losses(records: dict | None, fail_on_quarantine: bool) -> bool:
    return bool(fail_on_quarantine) and any(losses(records))


def verdict_line(findings: list[dict], fail_on: str, run_id: str, records: dict | None = None,
                 fail_on_quarantine: bool = False) -> str:
    """The one line CI shows. With the run's ``records`` counts it also says what the input lost
    (quarantined rows, lost records) and how many findings come after such a gap."""
    bad = failing(findings, fail_on)
    lost_fail = fails_on_losses(records, fail_on_quarantine)
    tail = ""
    if records is not None:
        quarantined, lost = losses(records)
        after_gap = sum(1 for f in findings if f.get("data_gap"))
        tail = f"; input: {quarantined:,} quarantined, {lost:,} lost" + (
            f"; {after_gap} finding(s) after a data gap" if after_gap else "") + (
            " (check.fail_on_quarantine)" if lost_fail else "")
    if not bad and not lost_fail:
        return (f"offsets-audit check: PASS run {run_id}: {len(findings)} finding(s), none at or above "
                f"'{fail_on}'{tail}")
    if not bad:
        return f"offsets-audit check: FAIL run {run_id}: records were lost{tail}"
    by_rule: dict[str, int] = {}
    for f in bad:
        by_rule[f["rule"]] = by_rule.get(f["rule"], 0) + 1
    top = ", ".join(f"{r} {n}" for r, n in sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"offsets-audit check: FAIL run {run_id}: {len(bad)} finding(s) at or above '{fail_on}' ({top}){tail}"


def junit_xml(findings: list[dict], rules: Mapping[str, RuleSettings], fail_on: str, run_id: str, seconds: float = 0.0,
              records: dict | None = None, fail_on_quarantine: bool = False, not_run: dict | None = None) -> str:
    """JUnit XML: one testcase per rule; disabled rules are skipped, failing rules carry their evidence.
    With ``check.fail_on_quarantine`` one more testcase, ``input_complete``, fails when records were lost.
    ``not_run``: rule id -> why the run did not evaluate it (skipped, never a pass)."""
    suite = ET.Element("testsuite", name="offsets-audit", timestamp=_dt.datetime.now(_dt.timezone.utc).isoformat(),
                       time=f"{seconds:.3f}")
    suite.set("hostname", "offsets-audit")
    by_rule: dict[str, list[dict]] = {}
    for f in findings:
        by_rule.setdefault(f["rule"], []).append(f)
    failures = skipped = 0
    for rule_id, spec in RULES.items():
        case = ET.SubElement(suite, "testcase", classname=f"offsets_audit.rules.{spec.family}", name=rule_id,
                             time="0")
        found = by_rule.get(rule_id, [])
        bad = failing(found, fail_on)
        if not rules[rule_id].enabled:
            ET.SubElement(case, "skipped", message="rule disabled in the config")
            skipped += 1
        elif rule_id in (not_run or {}):
            ET.SubElement(case, "skipped", message=(not_run or {})[rule_id])
            skipped += 1
        elif bad:
            failures += 1
            failure = ET.SubElement(case, "failure", type=rules[rule_id].severity,
                                    message=f"{len(bad)} finding(s): {spec.summary}")
            failure.text = "\n".join(_finding_text(f) for f in bad[:MAX_FINDINGS_PER_CASE]) + (
                f"\n... {len(bad) - MAX_FINDINGS_PER_CASE} more in the findings table"
                if len(bad) > MAX_FINDINGS_PER_CASE else "")
        if found and not bad:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(_finding_text(f) for f in found[:MAX_FINDINGS_PER_CASE])
    tests = len(RULES)
    if fail_on_quarantine:
        tests += 1
        case = ET.SubElement(suite, "testcase", classname="offsets_audit.input", name="input_complete", time="0")
        quarantined, lost = losses(records)
        if quarantined or lost:
            failures += 1
            failure = ET.SubElement(case, "failure", type="error",
                                    message=f"{quarantined} quarantined row(s), {lost} lost record(s)")
            failure.text = ("see the quarantine table (error_code, error_message, partition, offset) and "
                            "by_error_code in the JSON summary")
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="run_id", value=str(run_id))
    ET.SubElement(props, "property", name="fail_on", value=fail_on)
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def _finding_text(f: dict) -> str:
    evidence = ", ".join(f.get("evidence") or [])
    return (f"[{f['severity']}] group {f.get('group_id')}: {f['message']} "
            f"(evidence __consumer_offsets partition:offset {evidence or '-'}; finding {f.get('id')})")


def json_summary(findings: list[dict], fail_on: str, run_id: str, job_summary: dict | None,
                 fail_on_quarantine: bool = False) -> dict:
    counts: dict[str, dict[str, int]] = {}
    for f in findings:
        counts.setdefault(f["rule"], {}).setdefault(f["severity"], 0)
        counts[f["rule"]][f["severity"]] += 1
    bad = failing(findings, fail_on)
    records = (job_summary or {}).get("records")
    quarantined, lost = losses(records)
    return {
        "verdict": "fail" if bad or fails_on_losses(records, fail_on_quarantine) else "pass",
        "records_quarantined": quarantined,
        "records_lost": lost,
        "fail_on_quarantine": bool(fail_on_quarantine),
        "findings_after_data_gap": sum(1 for f in findings if f.get("data_gap")),
        "run_id": run_id,
        "fail_on": fail_on,
        "findings_total": len(findings),
        "findings_failing": len(bad),
        "failing_rules": sorted({f["rule"] for f in bad}),
        "findings_by_rule": counts,
        "records": (job_summary or {}).get("records"),
        "timings_s": (job_summary or {}).get("timings_s"),
        "report": (job_summary or {}).get("report"),
        "tables": (job_summary or {}).get("tables"),
    }


def _read_findings(spark, settings: Settings, table: str = "findings") -> list[dict]:
    """This run's findings, read with the table's known schema (an empty table reads as no findings)."""
    from offsets_audit.job import sinks_output

    df = sinks_output(settings).read_table(spark, table, settings.run_id)
    return [] if df is None else [r.asDict(recursive=True) for r in df.collect()]


EMPTY_FIX = ("point --input at the dump or log dir that holds the records (set check.fail_on_empty: false to let "
             "an empty input pass)")


def refuse_empty_input(source: dict) -> None:
    """A ``UserError`` when a local input holds no record to audit (no segment file with bytes; Parquet files with
    no rows): a gate that audited nothing has no verdict, and must not say PASS. Live and remote sources are judged
    after the run (``_refuse_empty_run``)."""
    import os

    kind = str(source.get("kind") or "").lower()
    path = str(source.get("path") or "")
    if not path or ("://" in path and not path.startswith("file://")):
        return
    local = path.removeprefix("file://")
    if kind == "segments":
        from offsets_audit.sources.segments import scan_segments

        lowered = {str(k).lower(): v for k, v in source.items()}
        scan = scan_segments(local, str(lowered.get("topic") or "__consumer_offsets"),
                             names=str(lowered.get("segmentnames") or "kafka").lower())
        if not any(os.path.getsize(f.path) > 0 for f in scan.files):
            held = f"{len(scan.files)} empty segment file(s)" if scan.files else "no segment file"
            raise UserError(f"the input {path} holds {held}: there is nothing to audit", fix=EMPTY_FIX)
    elif kind == "parquet":
        import pyarrow.parquet as pq

        from offsets_audit.sources.parquet import dump_files

        files = dump_files(path) or []
        if sum(pq.ParquetFile(f).metadata.num_rows for f in files) == 0:
            raise UserError(f"the Parquet dump {path} holds no rows ({len(files)} file(s)): there is nothing to audit",
                            fix=EMPTY_FIX)


def _refuse_empty_run(settings: Settings, records: dict) -> None:
    if settings.check.fail_on_empty and not records.get("read") and not records.get("unreadable"):
        where = settings.source.path or ", ".join(
            str(v) for k, v in settings.source.options.items() if k == "kafka.bootstrap.servers")
        raise UserError(f"the run read no records from {where}: there is nothing to audit", fix=EMPTY_FIX)


def _write(path: str | None, text: str) -> None:
    if not path:
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def run(args) -> int:
    """Exit 0: PASS (no finding at or above ``fail_on``); 1: FAIL; 2: a configuration or input mistake
    (one line on stderr, before any Spark work where it can be seen then); 3: an internal error, a bug."""
    from offsets_audit.config import load_settings
    from offsets_audit.job import overrides_from_args
    from offsets_audit.job import sinks_output

    overrides = overrides_from_args(args)
    check = {k: v for k, v in (("fail_on", args.fail_on), ("junit_xml", args.junit_xml),
                               ("json_summary", args.json_summary)) if v}
    if check:
        overrides["check"] = check
    settings = load_settings(args.config, overrides)
    if args.incremental and not args.checkpoint:
        raise UserError("--incremental needs a checkpoint folder", fix="pass --checkpoint PATH (the nightly run's)")
    if args.checkpoint and not args.incremental:
        raise UserError("--checkpoint is only read with --incremental", fix="add --incremental or drop --checkpoint")
    sinks_output(settings).check()
    from offsets_audit.config import source_config
    from offsets_audit.sources import preflight

    # a wrong path, option or input file: one line before Spark starts
    input_bytes = preflight(source_config(settings))
    if settings.check.fail_on_empty:
        refuse_empty_input(source_config(settings))
    try:
        return _check(settings, args.checkpoint if args.incremental else None, input_bytes)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 -- a crash must never read as the gate's FAIL (exit 1)
        message = unreadable_input(exc) or environment_failure(exc)
        if message is not None:  # the input or the machine, not a bug: one line, exit 2
            raise UserError(message) from None
        traceback.print_exc(file=sys.stderr)
        print(f"offsets-audit check: ERROR run {settings.run_id}: {type(exc).__name__}: "
              f"{str(exc).splitlines()[0] if str(exc) else ''} (a bug, not a verdict: please report it with the "
              f"traceback above)", file=sys.stdout, flush=True)
        return EXIT_INTERNAL_ERROR


def _check(settings: Settings, checkpoint: str | None = None, input_bytes: int | None = None) -> int:
    import time

    from offsets_audit.job import run_job, session_conf
    from offsets_audit.spark_session import get_spark

    if checkpoint is not None:
        from offsets_audit.incremental import bytes_to_read

        input_bytes = bytes_to_read(settings, checkpoint, input_bytes)
    spark = get_spark("offsets-audit-check", master=settings.spark.master, extra_conf=session_conf(settings),
                      input_bytes=input_bytes)
    start = time.perf_counter()
    not_run: dict = {}
    if checkpoint is not None:
        # The nightly gate: this run's completed findings and what is still open at the end of the log now
        # (a group stuck since yesterday fails tonight too); rules the incremental audit does not evaluate are
        # reported skipped, never passed.
        from offsets_audit.incremental import run_incremental

        summary = run_incremental(spark, settings, checkpoint, progress=False)
        findings = _read_findings(spark, settings) + [dict(f, provisional=True) for f in
                                                      _read_findings(spark, settings, "provisional_findings")]
        not_run = {rule: "not evaluated by this incremental run: its checkpoint's earlier runs kept no "
                         "offset-rule state (start a new checkpoint)"
                   for rule in (summary.incremental.skipped_rules if summary.incremental else ())}
    else:
        summary = run_job(spark, settings, progress=False)
        _refuse_empty_run(settings, summary.records.as_dict())
        findings = _read_findings(spark, settings)
    fail_on = settings.check.fail_on
    fail_on_quarantine = settings.check.fail_on_quarantine
    run_id = settings.run_id
    records = summary.records.as_dict()
    _write(settings.check.junit_xml,
           junit_xml(findings, settings.rules, fail_on, run_id, seconds=time.perf_counter() - start, records=records,
                     fail_on_quarantine=fail_on_quarantine, not_run=not_run))
    _write(settings.check.json_summary,
           json.dumps(json_summary(findings, fail_on, run_id, summary.as_dict(), fail_on_quarantine), indent=2, default=str))
    print(verdict_line(findings, fail_on, run_id, records, fail_on_quarantine), file=sys.stdout, flush=True)
    failed = failing(findings, fail_on) or fails_on_losses(records, fail_on_quarantine)
    return EXIT_FAIL if failed else EXIT_PASS
