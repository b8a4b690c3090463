"""The HTML report: content from the golden batching history, rendered in real headless Chromium."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from offsets_audit.audit import audit_events, summarize_latency
from offsets_audit.audit.report import render_report, worst_groups
from offsets_audit.config import load_config
from offsets_audit.replay import replay_records
from replay_support import HISTORIES, load_expected

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture(scope="module")
def report_html():
    config = load_config()
    # batch-override-0's real override (0) forgotten: the config says it runs on 1000 ms
    config["broker"]["group_overrides"] = {"batch-override-3000": {"assignment_interval_ms": 3000},
                                           "batch-override-0": {"assignment_interval_ms": 1000}}
    events = replay_records(load_expected(HISTORIES / "history-assignment-batching-00000000000000000000.expected.jsonl")).events
    findings, rebalances = audit_events(events, config)   # batch-override-0 breaks the 1000 ms default
    findings = [f.to_dict() for f in findings]
    for f in findings:
        f["message"] += " <script>alert(1)</script>"        # must come out escaped
    worst = worst_groups(findings, rebalances)
    timelines = {g: [e for e in events if e["group_id"] == g] for g in worst}
    summary = {"records": {"read": 500, "decoded": 500, "quarantined": 0}, "groups": {"consumer": 3}}
    return render_report({"run_id": "2026-11-22", "summary": summary, "findings": findings,
                          "rebalances": rebalances, "latency_summary": summarize_latency(rebalances),
                          "timelines": timelines}), worst


def test_report_has_every_plot(report_html):
    html, worst = report_html
    assert worst[0] == "batch-override-0"                    # the group with error findings comes first
    for section in ("findings-by-rule", "latency", "rate", "timelines", "findings"):
        assert f'id="{section}"' in html
    assert html.count("<svg") >= 5
    assert 'aria-label="Epoch timeline: batch-override-0"' in html
    assert "Rebalance latency, consumer groups (60 rebalances)" in html
    assert "assignment_interval_violated" in html


def test_report_is_self_contained_and_escaped(report_html):
    html, _ = report_html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)


def _chromium(args, tmp_path):
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
           "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="chromium is not installed (apt-get install chromium, or `make install` as root); required when CI is set")


@needs_chromium
def test_report_renders_in_headless_chromium(report_html, tmp_path):
    assert CHROMIUM is not None, "CI is set but chromium is missing: install the Debian package chromium"
    page = tmp_path / "report.html"
    page.write_text(report_html[0], encoding="utf-8")
    shot = tmp_path / "report.png"
    run = _chromium([f"--screenshot={shot}", "--window-size=1280,4000", page.as_uri()], tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert shot.stat().st_size > 20_000                     # a real picture, not a blank page
    assert _console_messages(run.stderr) == []
    dom = _chromium(["--dump-dom", page.as_uri()], tmp_path)
    assert dom.stdout.count("<svg") >= 5 and "Epoch timeline: batch-override-0" in dom.stdout
    assert _console_messages(dom.stderr) == []


@needs_chromium
def test_console_errors_are_caught(tmp_path):
    """The check above would see a broken page: a script error shows up as a console line."""
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>throw new Error('boom')</script></body></html>", encoding="utf-8")
    run = _chromium(["--dump-dom", page.as_uri()], tmp_path)
    assert any("boom" in line for line in _console_messages(run.stderr))
