"""The HTML report: content from the golden batching history, rendered in real headless Chromium."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from offsets_audit.audit import audit_events, summarize_latency
from offsets_audit.audit.report import render_report, worst_groups
from offsets_audit.config import load_settings
from offsets_audit.replay import replay_records
from replay_support import HISTORIES, load_expected

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture(scope="module")
def report_html():
    # batch-override-0's real override (0) forgotten: the config says it runs on 1000 ms
    config = load_settings().replace(broker={"group_overrides": {
        "batch-override-3000": {"assignment_interval_ms": 3000}, "batch-override-0": {"assignment_interval_ms": 1000}}})
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


# -- what a person sees: titles, numbers, axes, the order of the page ---------------------------------------------

def _tick_labels(svg: str) -> list[str]:
    """The value labels of a chart's horizontal grid lines (right-aligned ticks)."""
    return re.findall(r'class="grid"/><text [^>]*class="tick" text-anchor="end">([^<]*)</text>', svg)


def test_time_buckets_name_their_width_and_never_say_zero_days():
    from offsets_audit.audit.report import _time_buckets

    hour = 3_600_000
    start, bucket, unit, n = _time_buckets(1_700_000_030_000, 1_700_000_030_000 + hour - 1, 60)
    assert (bucket, unit) == (120_000, "2 minutes") and n <= 60          # a minute's buckets would be 61
    for span in (0, 999, 59_999, hour - 1, hour, 5 * hour, 26 * hour, 40 * 86_400_000, 400 * 86_400_000):
        for most in (60, 120):
            t0 = 1_700_000_123_456
            start, bucket, unit, n = _time_buckets(t0, t0 + span, most)
            assert n <= most and start <= t0 and start + n * bucket > t0 + span
            assert not unit.startswith("0") and "0 days" not in unit


def test_rebalance_causes_title_names_a_real_bucket(report_html):
    from offsets_audit.audit.report import RATE_BUCKETS

    html, _ = report_html
    title = re.search(r"Rebalance causes per ([^<]+)</text>", html)
    assert title and title.group(1) in {unit for _, unit in RATE_BUCKETS} | {f"{k} days" for k in range(2, 400)}


def test_counts_are_printed_with_thousands_separators():
    html = render_report({"run_id": "r", "summary": {"records": {"read": 190_316, "decoded": 190_000,
                                                                  "quarantined": 1_316}, "groups": {"consumer": 1200}},
                          "findings": [], "rebalances": [], "latency_summary": [], "timelines": {}})
    assert "<b>190,316</b>records read" in html and "<b>1,316</b>quarantined" in html and "<b>1,200</b>groups" in html
    assert "190316" not in html and "1,316 record(s) quarantined" in html


def test_count_axes_have_whole_number_ticks(report_html):
    html, _ = report_html
    charts = re.findall(r'<svg class="chart"[^>]*>.*?</svg>', html, re.S)
    labels = [label for chart in charts for label in _tick_labels(chart)]
    assert labels, "no chart with a value axis"
    for label in labels:
        assert re.fullmatch(r"\d{1,3}(,\d{3})*", label), f"tick {label!r} is not a whole number"
    rows = [{"group_id": "g", "group_type": "consumer", "bump_time": 1_700_000_000_000 + k, "group_epoch": k + 1,
             "time_to_assignment_ms": 50, "convergence_ms": 80} for k in range(119)]
    ticks = _tick_labels(render_report({"run_id": "r", "rebalances": rows}).split('id="latency"')[1])
    assert ticks[:5] == ["0", "30", "60", "90", "120"]


def test_classic_groups_without_a_joingroup_start_get_one_line_not_an_empty_chart():
    rows = [{"group_id": f"legacy-{k}", "group_type": "classic", "bump_time": 1_700_000_000_000 + k, "group_epoch": k,
             "time_to_assignment_ms": None, "convergence_ms": None} for k in range(3)]
    rows.append({"group_id": "g", "group_type": "consumer", "bump_time": 1_700_000_000_000, "group_epoch": 1,
                 "time_to_assignment_ms": 10, "convergence_ms": 20})
    html = render_report({"run_id": "r", "rebalances": rows})
    assert 'aria-label="Rebalance latency, classic groups' not in html
    assert ("Rebalance latency, classic groups (3 rebalances): not measurable, the log holds no JoinGroup start, "
            "only each generation&#x27;s result.") in html
    assert 'aria-label="Rebalance latency, consumer groups (1 rebalances)"' in html


def test_findings_come_first_and_the_worst_groups_link_to_their_timelines(report_html):
    html, worst = report_html
    assert html.index('id="findings"') < html.index('id="findings-by-rule"') < html.index('id="latency"')
    anchor = "timeline-batch-override-0"
    assert f'id="{anchor}"' in html                                          # the timeline is the target
    findings = html[html.index('id="findings"'):html.index('id="findings-by-rule"')]
    assert f'<a href="#{anchor}" title="its epoch timeline">batch-override-0</a>' in findings
    top = html[:html.index('id="findings"')]
    assert f'<a href="#{anchor}">batch-override-0</a>' in top                # "Worst groups:" above the findings


def test_timeline_anchors_survive_any_group_id():
    from offsets_audit.audit.report import timeline_anchor

    assert timeline_anchor("orders-app_1") == "timeline-orders-app_1"
    odd = timeline_anchor('a b"<é>')
    assert re.fullmatch(r"timeline-[A-Za-z0-9_.-]+", odd) and odd != timeline_anchor("a_b")
