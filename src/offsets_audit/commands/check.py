"""``offsets-audit check``: the CI data-quality gate.

Runs the audit job (``offsets_audit.job.run_job``) on a dump or log segments, then exits 1 when a
finding reaches ``check.fail_on`` (info < warning < error; ``never`` only reports), 0 otherwise. It
writes a JUnit XML file (one testcase per rule; a failing rule's failure lists its findings with their
evidence records) and a JSON summary, and prints one verdict line on stdout.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from offsets_audit.errors import UserError

from offsets_audit.audit.model import SEVERITY_RANK
from offsets_audit.audit.rules.registry import RULES, rule_settings

MAX_FINDINGS_PER_CASE = 100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML config (e.g. conf/ci.yaml)")
    parser.add_argument("--input", help="override source.path: a Parquet dump or a broker log dir")
    parser.add_argument("--input-format", choices=["parquet", "segments"], help="override source.kind")
    parser.add_argument("--output", help="override output.path")
    parser.add_argument("--run-id", help="override run_id")
    parser.add_argument("--topic-metadata", help="topic-metadata snapshot file (JSON or Parquet)")
    parser.add_argument("--fail-on", choices=["info", "warning", "error", "never"], help="override check.fail_on")
    parser.add_argument("--junit-xml", help="override check.junit_xml")
    parser.add_argument("--json-summary", help="override check.json_summary")


def failing(findings: list[dict], fail_on: str) -> list[dict]:
    """Findings at or above the ``fail_on`` severity."""
    floor = SEVERITY_RANK[fail_on]
    return [f for f in findings if SEVERITY_RANK.get(f["severity"], -1) >= floor]


def verdict_line(findings: list[dict], fail_on: str, run_id: str) -> str:
    bad = failing(findings, fail_on)
    if not bad:
        return (f"offsets-audit check: PASS run {run_id}: {len(findings)} finding(s), none at or above "
                f"'{fail_on}'")
    by_rule: dict[str, int] = {}
    for f in bad:
        by_rule[f["rule"]] = by_rule.get(f["rule"], 0) + 1
    top = ", ".join(f"{r} {n}" for r, n in sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"offsets-audit check: FAIL run {run_id}: {len(bad)} finding(s) at or above '{fail_on}' ({top})"


def junit_xml(findings: list[dict], settings: dict, fail_on: str, run_id: str, seconds: float = 0.0) -> str:
    """JUnit XML: one testcase per rule; disabled rules are skipped, failing rules carry their evidence."""
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
        if not settings[rule_id]["enabled"]:
            ET.SubElement(case, "skipped", message="rule disabled in the config")
            skipped += 1
        elif bad:
            failures += 1
            failure = ET.SubElement(case, "failure", type=settings[rule_id]["severity"],
                                    message=f"{len(bad)} finding(s): {spec.summary}")
            failure.text = "\n".join(_finding_text(f) for f in bad[:MAX_FINDINGS_PER_CASE]) + (
                f"\n... {len(bad) - MAX_FINDINGS_PER_CASE} more in the findings table"
                if len(bad) > MAX_FINDINGS_PER_CASE else "")
        if found and not bad:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(_finding_text(f) for f in found[:MAX_FINDINGS_PER_CASE])
    suite.set("tests", str(len(RULES)))
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


def json_summary(findings: list[dict], fail_on: str, run_id: str, job_summary: dict | None) -> dict:
    counts: dict[str, dict[str, int]] = {}
    for f in findings:
        counts.setdefault(f["rule"], {}).setdefault(f["severity"], 0)
        counts[f["rule"]][f["severity"]] += 1
    bad = failing(findings, fail_on)
    return {
        "verdict": "fail" if bad else "pass",
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


def _read_findings(spark, summary: dict, config: dict) -> list[dict]:
    from pyspark.sql import functions as F

    path = (summary.get("tables") or {}).get("findings")
    if not path:
        return []
    fmt = config["output"]["format"]
    df = spark.read.format("delta").load(path) if fmt == "delta" else spark.read.parquet(path)
    rows = df.filter(F.col("run_id") == config["run_id"]).drop("run_id").collect()
    return [r.asDict(recursive=True) for r in rows]


def _write(path: str | None, text: str) -> None:
    if not path:
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def run(args) -> int:
    import time

    from offsets_audit.config import load_config
    from offsets_audit.job import overrides_from_args, run_job
    from offsets_audit.spark_session import get_spark

    overrides = overrides_from_args(args)
    check = {k: v for k, v in (("fail_on", args.fail_on), ("junit_xml", args.junit_xml),
                               ("json_summary", args.json_summary)) if v}
    if check:
        overrides["check"] = check
    config = load_config(args.config, overrides)
    settings = rule_settings(config)
    if config["source"]["kind"] not in ("parquet", "segments", "kafka"):
        raise UserError(f"source.kind {config['source']['kind']!r} cannot be checked", fix="use parquet or segments")
    spark = get_spark("offsets-audit-check", master=config["spark"]["master"],
                      extra_conf={k: str(v) for k, v in config["spark"]["conf"].items()})
    start = time.perf_counter()
    summary = run_job(spark, config, progress=False)
    findings = _read_findings(spark, summary, config)
    fail_on = config["check"]["fail_on"]
    run_id = config["run_id"]
    _write(config["check"].get("junit_xml"),
           junit_xml(findings, settings, fail_on, run_id, seconds=time.perf_counter() - start))
    _write(config["check"].get("json_summary"),
           json.dumps(json_summary(findings, fail_on, run_id, summary), indent=2, default=str))
    print(verdict_line(findings, fail_on, run_id), file=sys.stdout, flush=True)
    return 1 if failing(findings, fail_on) else 0
