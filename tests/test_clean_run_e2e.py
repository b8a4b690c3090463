"""A healthy cluster passes the gate: a clean simulated history and Kafka's own many-groups
history go through ``offsets-audit check`` (exit 0, PASS, every JUnit testcase passed), leave every table
of the run on disk (empty where nothing was found), and render in the HTML report (headless Chromium, no
console errors) and in the notebook, each saying in words that the run is clean."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from golden_files import golden_glob
from offsets_audit import sinks, tables
from replay_support import HISTORIES

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture(scope="module")
def sim_check(spark, tmp_path_factory):
    """A small healthy history: 5 groups, half an hour, 4 partitions, no faults; Parquet tables."""
    from offsets_audit.simulate import simulate

    tmp = tmp_path_factory.mktemp("clean-sim")
    simulate(str(tmp / "sim"), groups=5, hours=0.5, partitions=4, seed=7, formats=("segments",))
    assert json.loads((tmp / "sim" / "faults.json").read_text())["faults"] == []
    return _run_check_capturing(tmp, tmp / "sim" / "segments", "parquet", "c")


@pytest.fixture(scope="module")
def golden_check(spark, tmp_path_factory):
    """Kafka's many-groups history, each segment in its own __consumer_offsets-N folder; Delta tables."""
    tmp = tmp_path_factory.mktemp("many-groups")
    logs = tmp / "logs"
    folder = HISTORIES / "history-many-groups"
    for segment in golden_glob(folder, "history-many-groups-p*-00000000000000000000.log"):
        partition = int(re.search(r"-p(\d+)-", segment.name).group(1))
        target = logs / f"__consumer_offsets-{partition}"
        target.mkdir(parents=True)
        shutil.copy(segment, target / "00000000000000000000.log")
    assert len(list(logs.iterdir())) == 50
    return _run_check_capturing(tmp, logs, "delta", "golden")


def _run_check_capturing(tmp, source, fmt, run_id):
    import io
    from contextlib import redirect_stdout

    from offsets_audit.cli import main

    config = {"output": {"path": str(tmp / "out"), "format": fmt, "html_report": True},
              "check": {"fail_on": "error", "junit_xml": str(tmp / "junit.xml"),
                        "json_summary": str(tmp / "check.json")}}
    (tmp / "ci.yaml").write_text(yaml.safe_dump(config))
    stdout = io.StringIO()
    with redirect_stdout(stdout):
        code = main(["check", "--config", str(tmp / "ci.yaml"), "--input", str(source), "--input-format",
                     "segments", "--run-id", run_id])
    lines = stdout.getvalue().strip().splitlines()
    return {"code": code, "verdict": lines[-1] if lines else "", "out": tmp / "out", "tmp": tmp, "fmt": fmt,
            "run_id": run_id, "summary": json.loads((tmp / "check.json").read_text())}


CHECKS = ["sim_check", "golden_check"]


@pytest.mark.parametrize("which", CHECKS)
def test_check_passes_with_exit_0(which, request):
    result = request.getfixturevalue(which)
    assert result["code"] == 0, result["verdict"]
    assert result["verdict"].startswith(f"offsets-audit check: PASS run {result['run_id']}:"), result["verdict"]
    assert result["summary"]["verdict"] == "pass" and result["summary"]["findings_failing"] == 0


@pytest.mark.parametrize("which", CHECKS)
def test_junit_has_every_rule_passed(which, request):
    from offsets_audit.audit.rules.registry import RULES
    from offsets_audit.config import load_settings

    result = request.getfixturevalue(which)
    suite = ET.parse(result["tmp"] / "junit.xml").getroot().find("testsuite")
    cases = suite.findall("testcase")
    disabled = {rule for rule, setting in load_settings().rules.items() if not setting.enabled}
    assert {c.get("name") for c in cases} == set(RULES)
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    assert not [c.get("name") for c in cases if c.find("failure") is not None]
    assert {c.get("name") for c in cases if c.find("skipped") is not None} == disabled   # off by default only


@pytest.mark.parametrize("which", CHECKS)
def test_run_leaves_every_table_with_its_schema(which, request, spark):
    result = request.getfixturevalue(which)
    out, fmt, run_id = str(result["out"]), result["fmt"], result["run_id"]
    manifest = sinks.run_manifest(spark, out, run_id)
    assert manifest is not None and set(manifest["tables"]) == set(tables.TABLES) - {"decoded"}
    counts = {}
    for name in manifest["tables"]:
        df = sinks.read_table(spark, out, name, run_id, fmt)
        assert df is not None, f"table {name} missing after the run"
        assert [f.name for f in df.schema.fields] == tables.schema(name).fieldNames()
        counts[name] = df.count()
    assert counts["quarantine"] == 0                    # nothing bad in Kafka-made or simulated logs
    assert counts["group_state"] > 0 and counts["offsets"] > 0 and counts["rebalances"] > 0
    if which == "sim_check":
        assert counts["findings"] == 0, "an unfaulted simulated history must audit clean"
    else:                                               # Kafka's own history: no finding at error
        findings = sinks.read_table(spark, out, "findings", run_id, fmt).collect()
        assert not [f for f in findings if f["severity"] == "error"]


def _chromium(args, tmp_path):
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
           "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def _console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                    reason="chromium is not installed (apt-get install chromium); required when CI is set")
@pytest.mark.parametrize("which", CHECKS)
def test_report_renders_a_clean_run_in_chromium_saying_so(which, request, tmp_path):
    result = request.getfixturevalue(which)
    page = result["out"] / "report" / f"{result['run_id']}.html"
    html = page.read_text(encoding="utf-8")
    if which == "sim_check":
        assert "Clean run. No findings: every enabled rule passed" in html
        assert "no findings: every rule passed" in html and "nothing quarantined" in html
    else:
        assert "nothing quarantined" in html
    dom = _chromium(["--dump-dom", page.as_uri()], tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "__consumer_offsets audit, run" in dom.stdout and dom.stdout.count("<svg") >= 3
    assert _console_messages(dom.stderr) == []


@pytest.mark.parametrize("which", CHECKS)
def test_notebook_explores_a_clean_run(which, request, tmp_path):
    result = request.getfixturevalue(which)
    env = dict(os.environ, OFFSETS_AUDIT_TABLES=str(result["out"]), OFFSETS_AUDIT_FORMAT=result["fmt"],
               OFFSETS_AUDIT_RUN_ID="", OFFSETS_AUDIT_GROUP_ID="", OFFSETS_AUDIT_PLOTS=str(tmp_path / "plots"),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, str(REPO / "notebooks" / "explore.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"run id: {result['run_id']}" in done.stdout
    if which == "sim_check":
        assert f"run {result['run_id']} is clean: no findings" in done.stdout
    assert "exploring group " in done.stdout
