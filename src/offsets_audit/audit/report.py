"""The self-contained HTML report: one file, inline SVG, no script, nothing fetched from the network.

``render_report(data)`` is pure (lists of dicts in, HTML out); ``sinks.report.write_report(spark, ...)`` reads the
tables the job wrote for one run, keeps what the page shows (a few thousand rows at most) and writes
``<output>/report/<run_id>.html``. Sections: the findings with their evidence first (a worst group's name links
to its timeline), then findings by rule, latency distribution per group type, rebalance rate over time, why
groups rebalance (causes over time, top culprits, each worst group's bumps labelled with their causes), the
epoch timeline of the worst groups (group epoch, target assignment epoch at its AssignmentTimestamp, member
epochs converging), the coordinator load (each __consumer_offsets partition's busiest minutes of assignor time and
the groups behind them) and the assignment-interval what-if (the cluster at each candidate interval, and the
groups with the most assignor time at their recommendation). Counts are printed with thousands separators and count axes have whole-number ticks.
"""
from __future__ import annotations

import datetime as _dt
import html
import math
import re
from collections.abc import Sequence

SEVERITY_COLORS = {"error": "#c62828", "warning": "#ef8f00", "info": "#1e88e5"}
SERIES_COLORS = ["#1e88e5", "#e53935", "#43a047", "#8e24aa", "#fb8c00", "#00897b"]
LATENCY_BINS = [(0, 1, "0"), (1, 100, "<100ms"), (100, 1000, "<1s"), (1000, 3000, "<3s"), (3000, 10_000, "<10s"),
                (10_000, 60_000, "<1min"), (60_000, 600_000, "<10min"), (600_000, math.inf, ">=10min")]
RATE_BUCKETS = [(1000, "second"), (10_000, "10 seconds"), (60_000, "minute"), (120_000, "2 minutes"),
                (300_000, "5 minutes"), (600_000, "10 minutes"), (1_800_000, "30 minutes"), (3_600_000, "hour"),
                (7_200_000, "2 hours"), (21_600_000, "6 hours"), (43_200_000, "12 hours"), (86_400_000, "day")]
WORST_GROUPS = 4
MAX_FINDINGS_LISTED = 300


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _n(value) -> str:
    """A count or figure as a person reads it: ``190,316``, ``0.25``; ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return f"{int(value):,}"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def _count_axis(largest: float, ticks: int = 4) -> float:
    """The top of a count axis with ``ticks`` equal whole-number steps (a round number: 1 to 8 times a power of
    ten, or 12, 15, 25 times one) reaching ``largest``: the grid lines then read 0, 30, 60, 90, 120 rebalances,
    never 59.5."""
    need = max(largest, 1) / ticks
    power = 10 ** math.floor(math.log10(need)) if need >= 1 else 1
    steps = [m * power for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)]
    step = next(s for s in steps if s >= need and float(s).is_integer())
    return int(step) * ticks


def _duration(ms: int) -> str:
    """A bucket width in words: ``second``, ``10 seconds``, ``20 minutes``, ``2 hours``, ``3 days``."""
    for unit_ms, unit in ((86_400_000, "day"), (3_600_000, "hour"), (60_000, "minute"), (1000, "second")):
        if ms >= unit_ms and ms % unit_ms == 0:
            count = ms // unit_ms
            return unit if count == 1 else f"{count:,} {unit}s"
    return f"{ms:,} ms"


def timeline_anchor(group_id) -> str:
    """The id of a group's epoch timeline in the page (group ids may hold any character)."""
    return "timeline-" + re.sub(r"[^A-Za-z0-9_-]", lambda m: f".{ord(m.group()):x}", str(group_id))


def _fmt_ms(ms) -> str:
    if ms is None:
        return "-"
    ms = float(ms)
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"


def _fmt_time(ms) -> str:
    if ms is None:
        return "-"
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


# -- SVG primitives -------------------------------------------------------------------------------

def _chart_frame(title: str, width: int, height: int, left: int, right: int, top: int, plot_h: float,
                 top_value: float) -> list[str]:
    """The opening of a vertical chart: the svg element, its title and five horizontal grid lines with values."""
    parts = [f'<svg class="chart" role="img" aria-label="{_e(title)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
             f'<text x="{left}" y="16" class="title">{_e(title)}</text>']
    for tick in range(5):
        value = top_value * tick / 4
        y = top + plot_h - plot_h * tick / 4
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                     f'<text x="{left - 4}" y="{y + 4:.1f}" class="tick" text-anchor="end">{_n(value)}</text>')
    return parts


def _bar_chart(title: str, categories: list[str], series: list[tuple[str, list[int], str]], *, width=640,
               height=260, horizontal=False, y_label="") -> str:
    """Grouped bars; ``series`` = [(name, values per category, color)]."""
    if not categories:
        return _empty(title, width)
    if horizontal:
        return _hbar_chart(title, categories, series, width=width)
    left, right, top, bottom = 50, 10, 28, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    top_value = _count_axis(max([v for _, vs, _ in series for v in vs] + [1]))
    slot = plot_w / len(categories)
    bar_w = max(slot * 0.8 / max(len(series), 1), 1)
    parts = _chart_frame(title, width, height, left, right, top, plot_h, top_value)
    for i, category in enumerate(categories):
        x0 = left + i * slot + slot * 0.1
        for j, (name, values, color) in enumerate(series):
            v = values[i]
            h = plot_h * v / top_value
            parts.append(f'<rect x="{x0 + j * bar_w:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w:.1f}" '
                         f'height="{h:.1f}" fill="{color}"><title>{_e(name)} {_e(category)}: {_n(v)}</title></rect>')
        parts.append(f'<text x="{left + i * slot + slot / 2:.1f}" y="{top + plot_h + 14}" class="tick" '
                     f'text-anchor="middle">{_e(category)}</text>')
    parts.append(_legend([(n, c) for n, _, c in series], left, height - 14))
    if y_label:
        parts.append(f'<text x="12" y="{top + plot_h / 2}" class="tick" transform="rotate(-90 12 {top + plot_h / 2})" '
                     f'text-anchor="middle">{_e(y_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _hbar_chart(title, categories, series, width=640) -> str:
    row_h = 20
    left, top = 290, 28
    height = top + row_h * len(categories) + 30
    plot_w = width - left - 50
    totals = [sum(vs[i] for _, vs, _ in series) for i in range(len(categories))]
    top_value = max(totals + [1])
    parts = [f'<svg class="chart" role="img" aria-label="{_e(title)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
             f'<text x="10" y="16" class="title">{_e(title)}</text>']
    for i, category in enumerate(categories):
        y = top + i * row_h
        parts.append(f'<text x="{left - 6}" y="{y + 14}" class="tick" text-anchor="end">{_e(category)}</text>')
        x = left
        for name, values, color in series:
            w = plot_w * values[i] / top_value
            if w > 0:
                parts.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" fill="{color}">'
                             f'<title>{_e(category)} ({_e(name)}): {_n(values[i])}</title></rect>')
            x += w
        parts.append(f'<text x="{x + 4:.1f}" y="{y + 14}" class="tick">{_n(totals[i])}</text>')
    parts.append(_legend([(n, c) for n, _, c in series], 10, height - 10))
    parts.append("</svg>")
    return "".join(parts)


def _legend(entries, x, y) -> str:
    out = []
    for name, color in entries:
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{x + 14}" y="{y}" class="tick">{_e(name)}</text>')
        x += 24 + 7 * len(str(name))
    return "".join(out)


def _empty(title, width=640, message="no data") -> str:
    return (f'<svg class="chart" role="img" aria-label="{_e(title)}" width="{width}" height="60" '
            f'viewBox="0 0 {width} 60" xmlns="http://www.w3.org/2000/svg"><text x="10" y="16" class="title">'
            f'{_e(title)}</text><text x="10" y="42" class="tick">{_e(message)}</text></svg>')


def _timeline(group_id: str, events: list[dict], width=900, height=280) -> str:
    """Group epoch (step), target assignment epoch at its AssignmentTimestamp (step + dots), member epochs."""
    title = f"Epoch timeline: {group_id}"
    bumps = [(e["timestamp"], e["details"].get("new")) for e in events if e["event"] == "group_epoch_bumped"]
    targets = [((e["details"].get("assignment_timestamp") or e["timestamp"]), e["details"].get("assignment_epoch"),
                e["timestamp"]) for e in events if e["event"] == "target_assignment_computed"]
    members = [(e["timestamp"], e["details"].get("member_epoch"), e.get("member_id"))
               for e in events if e["event"] == "member_epoch_advanced" and (e["details"].get("member_epoch") or 0) >= 0]
    points = [t for t, _ in bumps] + [t for t, _, _ in targets] + [t for t, _, _ in members]
    epochs = [v for _, v in bumps] + [v for _, v, _ in targets] + [v for _, v, _ in members]
    points = [p for p in points if p is not None]
    epochs = [v for v in epochs if v is not None]
    if not points or not epochs:
        return _empty(title, width)
    left, right, top, bottom = 56, 16, 28, 44
    t0, t1 = min(points), max(points)
    span = max(t1 - t0, 1)
    e_max = _count_axis(max(epochs))
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(t):
        return left + plot_w * (t - t0) / span

    def y(v):
        return top + plot_h - plot_h * v / e_max

    def steps(series, color, name, dash=""):
        if not series:
            return ""
        d = f"M{x(series[0][0]):.1f},{y(series[0][1]):.1f}"
        for (t, v) in series[1:]:
            d += f" H{x(t):.1f} V{y(v):.1f}"
        d += f" H{x(t1):.1f}"
        return (f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2" {dash}>'
                f'<title>{_e(name)}</title></path>')

    parts = [f'<svg class="chart timeline" id="{_e(timeline_anchor(group_id))}" role="img" aria-label="{_e(title)}" '
             f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
             f'<text x="{left}" y="16" class="title">{_e(title)}</text>']
    for tick in range(5):
        v = e_max * tick / 4
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>'
                     f'<text x="{left - 4}" y="{y(v) + 4:.1f}" class="tick" text-anchor="end">{_n(v)}</text>')
    for tick in range(5):
        t = t0 + span * tick / 4
        anchor = "end" if tick == 4 else "middle"          # the last label ends at the plot's edge, not past it
        parts.append(f'<text x="{x(t):.1f}" y="{top + plot_h + 14}" class="tick" text-anchor="{anchor}">'
                     f'+{_fmt_ms(t - t0)}</text>')
    member_ids = sorted({m for _, _, m in members if m})
    parts.append(steps(sorted(bumps), "#e53935", "group epoch"))
    parts.append(steps(sorted((t, v) for t, v, _ in targets), "#1e88e5", "target assignment epoch",
                       'stroke-dasharray="5 3"'))
    for t, v, rec in targets:
        parts.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="4" fill="#1e88e5">'
                     f'<title>assignment epoch {v}: AssignmentTimestamp {_e(_fmt_time(t))}, '
                     f'written {_e(_fmt_time(rec))}</title></circle>')
    # Member epochs last, so they stay visible where they converge onto the assignment epoch.
    for t, v, m in members:
        parts.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" fill="#616161" fill-opacity="0.7">'
                     f'<title>member {_e(m)} epoch {v} at {_e(_fmt_time(t))}</title></circle>')
    parts.append(_legend([("group epoch", "#e53935"), ("target assignment epoch", "#1e88e5"),
                          (f"member epochs ({len(member_ids)} members)", "#616161")], left, height - 8))
    parts.append(f'<text x="{width - right}" y="16" class="tick" text-anchor="end">from {_e(_fmt_time(t0))} UTC</text>')
    parts.append("</svg>")
    return "".join(parts)


# -- sections --------------------------------------------------------------------------------------

def _findings_by_rule(findings: list[dict]) -> str:
    counts: dict[str, dict[str, int]] = {}
    for f in findings:
        counts.setdefault(f["rule"], {}).setdefault(f["severity"], 0)
        counts[f["rule"]][f["severity"]] += 1
    rules = sorted(counts, key=lambda r: (-sum(counts[r].values()), r))
    if not rules:
        return _empty("Findings by rule", 900, "no findings: every rule passed")
    series = [(sev, [counts[r].get(sev, 0) for r in rules], color) for sev, color in SEVERITY_COLORS.items()]
    return _bar_chart("Findings by rule", rules, series, horizontal=True, width=900)


def _latency_distribution(rebalances: list[dict]) -> str:
    charts = []
    for group_type in sorted({r.get("group_type") or "?" for r in rebalances}):
        rows = [r for r in rebalances if (r.get("group_type") or "?") == group_type]
        if not any(r.get(metric) is not None for r in rows for metric in ("time_to_assignment_ms", "convergence_ms")):
            why = ("the log holds no JoinGroup start, only each generation's result" if group_type == "classic"
                   else "none of them has both its start and its end in the log")
            charts.append(f'<p class="no-latency">Rebalance latency, {_e(group_type)} groups ({_n(len(rows))} '
                          f'rebalances): not measurable, {_e(why)}.</p>')
            continue
        series = []
        for j, (metric, label) in enumerate((("time_to_assignment_ms", "time to target assignment"),
                                             ("convergence_ms", "time to convergence"))):
            values = [r[metric] for r in rows if r.get(metric) is not None]
            series.append((label, [sum(1 for v in values if lo <= v < hi) for lo, hi, _ in LATENCY_BINS],
                           SERIES_COLORS[j]))
        charts.append(_bar_chart(f"Rebalance latency, {group_type} groups ({_n(len(rows))} rebalances)",
                                 [name for _, _, name in LATENCY_BINS], series, y_label="rebalances"))
    return "".join(charts) or _empty("Rebalance latency", message="no rebalances in this run")


def _time_buckets(t0: int, t1: int, most: int) -> tuple[int, int, str, int]:
    """``(start, bucket_ms, unit, count)``: the smallest ``RATE_BUCKETS`` width whose buckets, aligned on it, cover
    ``t0`` to ``t1`` in at most ``most`` buckets (whole days beyond the largest); ``unit`` names the width."""

    def count(bucket: int) -> int:
        return int((t1 - (t0 - t0 % bucket)) // bucket) + 1

    bucket = next((b for b, _ in RATE_BUCKETS if count(b) <= most), 0)
    if not bucket:
        day = RATE_BUCKETS[-1][0]
        bucket = day * math.ceil(count(day) / most)
        while count(bucket) > most:
            bucket += day
    return t0 - t0 % bucket, bucket, _duration(bucket), count(bucket)


def _rebalance_rate(rebalances: list[dict]) -> str:
    times = [r["bump_time"] for r in rebalances if r.get("bump_time") is not None]
    if not times:
        return _empty("Rebalances over time", message="no rebalances in this run")
    t0, t1 = min(times), max(times)
    start, bucket, unit, n = _time_buckets(t0, t1, 120)
    types = sorted({r.get("group_type") or "?" for r in rebalances})
    series = []
    for i, gt in enumerate(types):
        counts = [0] * n
        for r in rebalances:
            if (r.get("group_type") or "?") == gt and r.get("bump_time") is not None:
                counts[int((r["bump_time"] - start) // bucket)] += 1
        series.append((gt, counts, SERIES_COLORS[i % len(SERIES_COLORS)]))
    cut = (11, 19) if bucket < 60_000 else (11, 16) if bucket < 86_400_000 else (0, 10)
    labels = [_fmt_time(start + k * bucket)[cut[0]:cut[1]] for k in range(n)]
    step = max(1, n // 12)
    labels = [label if k % step == 0 else "" for k, label in enumerate(labels)]
    return _bar_chart(f"Rebalances (group epoch bumps) per {unit}", labels, series, width=900,
                      y_label="rebalances")


def _latency_table(summary: list[dict]) -> str:
    rows = [s for s in summary if s.get("level") == "group_type"]
    if not rows:
        return ""
    head = ("<tr><th>group type</th><th>rebalances</th><th>complete</th>"
            "<th>to assignment p50 / p95 / p99 / max</th><th>convergence p50 / p95 / p99 / max</th></tr>")
    body = []
    for s in rows:
        def q(metric):
            return " / ".join(_fmt_ms(s.get(f"{metric}_{p}")) for p in ("p50", "p95", "p99", "max"))
        body.append(f"<tr><td>{_e(s['group_type'])}</td><td>{_n(s.get('rebalances'))}</td>"
                    f"<td>{_n(s.get('complete'))}</td><td>{q('time_to_assignment_ms')}</td>"
                    f"<td>{q('convergence_ms')}</td></tr>")
    return f'<table class="latency">{head}{"".join(body)}</table>'


def _findings_table(findings: list[dict], linked: Sequence[str] = ()) -> str:
    """The findings, most serious first; the group of each finding in ``linked`` (the groups whose epoch timeline
    the page shows) links to that timeline."""
    if not findings:
        return "<p>No findings.</p>"
    rank = {"error": 0, "warning": 1, "info": 2}
    ordered = sorted(findings, key=lambda f: (rank.get(f["severity"], 3), f["rule"], str(f.get("group_id")),
                                              f.get("time") or 0))
    rows = []
    with_timeline = set(linked)
    for f in ordered[:MAX_FINDINGS_LISTED]:
        evidence = f.get("evidence") or []
        group = _e(f.get("group_id"))
        if f.get("group_id") in with_timeline:
            group = f'<a href="#{_e(timeline_anchor(f["group_id"]))}" title="its epoch timeline">{group}</a>'
        rows.append(f'<tr class="{_e(f["severity"])}"><td>{_e(f["severity"])}</td><td><code>{_e(f["rule"])}</code></td>'
                    f"<td>{group}</td><td>{_e(_fmt_time(f.get('time')))}</td><td>{_e(f['message'])}</td>"
                    f"<td><code>{_e(', '.join(list(evidence)[:8]))}{' ...' if len(evidence) > 8 else ''}</code></td></tr>")
    more = (f"<p>{_n(len(findings) - MAX_FINDINGS_LISTED)} more in the findings table.</p>"
            if len(findings) > MAX_FINDINGS_LISTED else "")
    return ("<table class=\"findings\"><tr><th>severity</th><th>rule</th><th>group</th><th>time (UTC)</th>"
            f"<th>message</th><th>evidence (partition:offset)</th></tr>{''.join(rows)}</table>{more}")


def worst_groups(findings: list[dict], rebalances: list[dict], n: int = WORST_GROUPS) -> list[str]:
    """Groups with the most serious findings, then the slowest convergence."""
    weight = {"error": 1000, "warning": 10, "info": 1}
    score: dict[str, float] = {}
    for f in findings:
        if f.get("group_id") is not None:
            score[f["group_id"]] = score.get(f["group_id"], 0) + weight.get(f["severity"], 0) * 1e9
    for r in rebalances:
        if r.get("group_id") is not None:
            score[r["group_id"]] = score.get(r["group_id"], 0) + (r.get("convergence_ms") or 0)
    return [g for g, _ in sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#212121;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
.chart{display:block;margin:8px 0 16px 0;background:#fff}
.title{font-size:13px;font-weight:600;fill:#212121}.tick{font-size:10px;fill:#555}.grid{stroke:#eee}
table{border-collapse:collapse;font-size:12px;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 6px;
text-align:left;vertical-align:top}tr.error td:first-child{color:#c62828;font-weight:600}
tr.warning td:first-child{color:#ef8f00;font-weight:600}.kpi{display:inline-block;margin-right:24px}
.kpi b{font-size:20px;display:block}.no-latency{font-size:13px;color:#555}.worst a{margin-right:12px}
"""


def _run_in_words(findings: list[dict], rebalances: list[dict], records: dict) -> str:
    """One sentence on what the run found, so a clean run reads as clean rather than as a blank page."""
    quarantined = records.get("quarantined") or 0
    lost = records.get("records_lost") or 0
    parts = [f"{len(findings):,} finding(s)" if findings else "No findings: every enabled rule passed",
             f"{len(rebalances):,} rebalance(s)" if rebalances else "no rebalances",
             (f"{quarantined:,} record(s) quarantined" + (f" and {lost:,} lost" if lost else "")
              if quarantined or lost else "nothing quarantined")]
    clean = not findings and not quarantined and not lost
    return (f'<p class="verdict {"clean" if clean else "found"}">{"Clean run. " if clean else ""}'
            f'{_e(", ".join(parts))}.</p>')


#: A run that did not estimate the coordinator load (an incremental run on a checkpoint whose earlier runs kept no
#: coordinator run rows) says so instead of showing an empty section as if no assignor had run.
_NOT_ESTIMATED = "<p>Not estimated by this run: {why}.</p>"


def render_report(data: dict) -> str:
    """HTML of the report from ``run_id``, ``summary``, ``findings``, ``rebalances``, ``latency_summary``,
    ``timelines`` ({group_id: events in log order, details as dicts}), the ``coordinator_load`` rows (with
    ``coordinator_load_totals``) and the ``assignment_interval_whatif`` rows."""
    findings = data.get("findings") or []
    rebalances = data.get("rebalances") or []
    summary = data.get("summary") or {}
    records = summary.get("records") or {}
    load_stage = str((summary.get("stages") or {}).get("coordinator_load") or "")
    severities = {s: sum(1 for f in findings if f["severity"] == s) for s in ("error", "warning", "info")}
    kpis = [("records read", records.get("read")), ("quarantined", records.get("quarantined")),
            ("groups", sum((summary.get("groups") or {}).values()) if summary.get("groups") else None),
            ("rebalances", len(rebalances)), ("errors", severities["error"]), ("warnings", severities["warning"])]
    shown = {g: evs for g, evs in (data.get("timelines") or {}).items()}
    timelines = "".join(_timeline(g, evs) for g, evs in shown.items())
    linked = [g for g, evs in shown.items() if evs]            # groups whose timeline is drawn
    worst = ("<p class=\"worst\">Worst groups: " + "".join(
        f'<a href="#{_e(timeline_anchor(g))}">{_e(g)}</a>' for g in linked) + "</p>") if linked else ""
    return "".join([
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>__consumer_offsets audit {_e(data.get('run_id'))}</title><style>{STYLE}</style></head><body>",
        f"<h1>__consumer_offsets audit, run {_e(data.get('run_id'))}</h1>", _run_in_words(findings, rebalances, records),
        "<div>",
        "".join(f'<span class="kpi"><b>{_n(v)}</b>{_e(k)}</span>' for k, v in kpis),
        "</div>", worst,
        "<h2 id=\"findings\">Findings</h2>", _findings_table(findings, linked),
        "<h2 id=\"findings-by-rule\">Findings by rule</h2>", _findings_by_rule(findings),
        "<h2 id=\"latency\">Rebalance latency</h2>", _latency_table(data.get("latency_summary") or []),
        _latency_distribution(rebalances),
        "<h2 id=\"rate\">Rebalance rate</h2>", _rebalance_rate(rebalances),
        "<h2 id=\"causes\">Why groups rebalance</h2>",
        causes_section(rebalances, list(shown) or worst_groups(findings, rebalances)),
        "<h2 id=\"timelines\">Epoch timelines of the worst groups</h2>",
        timelines or "<p>No group has findings or rebalances to show.</p>",
        "<h2 id=\"coordinator-load\">Coordinator load</h2>",
        _NOT_ESTIMATED.format(why=_e(load_stage[len("skipped: "):])) if load_stage.startswith("skipped") else
        coordinator_load_section(data.get("coordinator_load") or [], data.get("coordinator_load_totals")),
        "<h2 id=\"interval-whatif\">Assignment intervals: what if</h2>",
        interval_whatif_section(data.get("assignment_interval_whatif") or []),
        "</body></html>",
    ])


# -- why groups rebalance (rebalances.causes / cause_members, audit/causes.py) ----------------------

CAUSE_COLORS = {"member_joined": "#43a047", "member_left": "#e53935", "static_member_replaced": "#8e24aa",
                "subscription_changed": "#1e88e5", "regex_resolution_changed": "#3949ab",
                "topic_metadata_changed": "#fb8c00", "rack_changed": "#6d4c41", "assignor_changed": "#00897b",
                "assignment_configs_changed": "#00acc1", "group_converted": "#5e35b1",
                "topology_changed": "#f4511e", "process_joined": "#7cb342", "process_left": "#c0ca33",
                "member_metadata_changed": "#8d6e63", "share_partitions_initialized": "#26a69a",
                "protocol_changed": "#ab47bc", "leader_rejoined": "#78909c", "unknown": "#9e9e9e"}
MAX_CULPRITS_LISTED = 20


def _stacked_bars(title: str, labels: list[str], series: Sequence[tuple[str, Sequence[float], str]], *, width=900,
                  height=280, y_label="") -> str:
    """Vertical bars stacked per series (one bar per label)."""
    if not labels:
        return _empty(title, width)
    left, right, top, bottom = 50, 10, 28, 60
    plot_w, plot_h = width - left - right, height - top - bottom
    totals = [sum(vs[i] for _, vs, _ in series) for i in range(len(labels))]
    top_value = _count_axis(max(totals + [1]))
    slot = plot_w / len(labels)
    parts = _chart_frame(title, width, height, left, right, top, plot_h, top_value)
    for i, label in enumerate(labels):
        y = top + plot_h
        for name, values, color in series:
            h = plot_h * values[i] / top_value
            if h > 0:
                y -= h
                parts.append(f'<rect x="{left + i * slot + slot * 0.1:.1f}" y="{y:.1f}" width="{slot * 0.8:.1f}" '
                             f'height="{h:.1f}" fill="{color}"><title>{_e(label)} {_e(name)}: {_n(values[i])}'
                             f'</title></rect>')
        parts.append(f'<text x="{left + i * slot + slot / 2:.1f}" y="{top + plot_h + 14}" class="tick" '
                     f'text-anchor="middle">{_e(label)}</text>')
    legend = [(n, c) for n, _, c in series]
    parts.append(_legend(legend[:6], left, height - 24))
    if len(legend) > 6:
        parts.append(_legend(legend[6:12], left, height - 8))
    if y_label:
        parts.append(f'<text x="12" y="{top + plot_h / 2}" class="tick" transform="rotate(-90 12 {top + plot_h / 2})" '
                     f'text-anchor="middle">{_e(y_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _causes_over_time(rebalances: list[dict]) -> str:
    """Rebalances per time bucket, stacked per cause (a bump with two causes counts in both)."""
    rows = [r for r in rebalances if r.get("bump_time") is not None]
    if not rows:
        return _empty("Rebalance causes over time", 900)
    times = [r["bump_time"] for r in rows]
    t0, t1 = min(times), max(times)
    start, bucket, unit, n = _time_buckets(t0, t1, 60)
    counts: dict[str, list[int]] = {}
    for r in rows:
        for cause in r.get("causes") or ["unknown"]:
            counts.setdefault(cause, [0] * n)[int((r["bump_time"] - start) // bucket)] += 1
    order = sorted(counts, key=lambda c: (-sum(counts[c]), c))
    cut = (11, 19) if bucket < 60_000 else (11, 16) if bucket < 86_400_000 else (0, 10)
    labels = [_fmt_time(start + k * bucket)[cut[0]:cut[1]] for k in range(n)]
    step = max(1, math.ceil(n * (cut[1] - cut[0]) * 7 / 800))     # labels about 7 px a character
    labels = [label if k % step == 0 else "" for k, label in enumerate(labels)]
    series = [(c, counts[c], CAUSE_COLORS.get(c, "#757575")) for c in order]
    return _stacked_bars(f"Rebalance causes per {unit}", labels, series, y_label="rebalances")


def _top_culprits(rebalances: list[dict], n: int = MAX_CULPRITS_LISTED) -> str:
    """Client ids / hosts behind the most rebalances across all groups (``rebalance_causes`` client rows)."""
    stats: dict[tuple, dict] = {}
    for r in rebalances:
        seen = set()
        for m in r.get("cause_members") or ():
            key = (m.get("client_id"), m.get("client_host"))
            entry = stats.setdefault(key, {"rebalances": 0, "groups": set(), "causes": {}, "members": set()})
            entry["members"].add(m.get("member_id"))
            for c in m.get("causes") or ():
                entry["causes"][c] = entry["causes"].get(c, 0) + 1
            if key not in seen:
                seen.add(key)
                entry["rebalances"] += 1
                entry["groups"].add(r.get("group_id"))
    if not stats:
        return "<p>No rebalance was caused by a member.</p>"
    ordered = sorted(stats.items(), key=lambda kv: (-kv[1]["rebalances"], str(kv[0])))[:n]
    body = []
    for (client_id, client_host), e in ordered:
        causes = ", ".join(f"{c} {k}" for c, k in sorted(e["causes"].items(), key=lambda kv: (-kv[1], kv[0])))
        groups = sorted(str(g) for g in e["groups"])
        body.append(f"<tr><td>{_e(client_id)}</td><td>{_e(client_host)}</td><td>{_n(e['rebalances'])}</td>"
                    f"<td>{_n(len(groups))}: {_e(', '.join(groups[:5]))}{' ...' if len(groups) > 5 else ''}</td>"
                    f"<td>{_n(len(e['members']))}</td><td>{_e(causes)}</td></tr>")
    return ('<table class="culprits"><tr><th>client id</th><th>client host</th><th>rebalances caused</th>'
            f'<th>groups</th><th>member ids</th><th>causes</th></tr>{"".join(body)}</table>')


def _cause_timeline(group_id: str, rebalances: list[dict], width=900, height=240) -> str:
    """The group epoch of one group over time, each bump marked and labelled with its causes."""
    rows = sorted((r for r in rebalances if r.get("group_id") == group_id and r.get("bump_time") is not None),
                  key=lambda r: (r["bump_time"], r.get("bump_offset") or 0))
    title = f"Why {group_id} rebalanced"
    if not rows:
        return _empty(title, width)
    left, right, top, bottom = 56, 16, 28, 36
    t0, t1 = rows[0]["bump_time"], rows[-1]["bump_time"]
    span = max(t1 - t0, 1)
    e_max = max(max(r["group_epoch"] for r in rows), 1)
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(t):
        return left + plot_w * (t - t0) / span

    def y(v):
        return top + plot_h - plot_h * v / e_max

    parts = [f'<svg class="chart timeline" role="img" aria-label="{_e(title)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
             f'<text x="{left}" y="16" class="title">{_e(title)}</text>']
    d = f"M{x(t0):.1f},{y(rows[0]['group_epoch']):.1f}"
    for r in rows[1:]:
        d += f" H{x(r['bump_time']):.1f} V{y(r['group_epoch']):.1f}"
    parts.append(f'<path d="{d}" fill="none" stroke="#bdbdbd" stroke-width="1.5"/>')
    last_label_x = -1e9
    for r in rows:
        causes = r.get("causes") or ["unknown"]
        who = ", ".join(sorted({f"{m.get('client_id') or '?'}@{m.get('client_host') or '?'}"
                                for m in r.get("cause_members") or ()}))
        cx, cy = x(r["bump_time"]), y(r["group_epoch"])
        parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{CAUSE_COLORS.get(causes[0], "#757575")}">'
                     f'<title>epoch {r["group_epoch"]} at {_e(_fmt_time(r["bump_time"]))}: {_e(", ".join(causes))}'
                     f'{(" by " + _e(who)) if who else ""}</title></circle>')
        if cx - last_label_x > 70:       # label what fits; every marker keeps its tooltip
            anchor, dx = ("end", -5) if cx > width - right - 120 else ("start", 5)
            parts.append(f'<text x="{cx + dx:.1f}" y="{cy - 6:.1f}" class="tick" text-anchor="{anchor}">'
                         f'{_e(causes[0])}{"+" if len(causes) > 1 else ""}</text>')
            last_label_x = cx
    for tick in range(5):
        t = t0 + span * tick / 4
        anchor = "end" if tick == 4 else "middle"          # the last label ends at the plot's edge, not past it
        parts.append(f'<text x="{x(t):.1f}" y="{top + plot_h + 14}" class="tick" text-anchor="{anchor}">'
                     f'+{_fmt_ms(t - t0)}</text>')
    used = list(dict.fromkeys((r.get("causes") or ["unknown"])[0] for r in rows))
    parts.append(_legend([(c, CAUSE_COLORS.get(c, "#757575")) for c in used[:6]], left, height - 6))
    parts.append("</svg>")
    return "".join(parts)


def causes_section(rebalances: list[dict], groups: list[str]) -> str:
    """"Why groups rebalance": causes over time, the top culprits, and an annotated timeline per group."""
    if not rebalances:
        return "<p>No rebalances.</p>"
    timelines = "".join(_cause_timeline(g, rebalances) for g in groups if any(r.get("group_id") == g
                                                                               for r in rebalances))
    return "".join([_causes_over_time(rebalances), "<h3>Top culprits</h3>", _top_culprits(rebalances), timelines])


# -- Spark side ------------------------------------------------------------------------------------
# The writer that reads one run's tables back and writes this page beside them is offsets_audit.sinks.report.


# -- coordinator load and assignment intervals (coordinator_load, assignment_interval_whatif) ------------------

BUSIEST_MINUTES_LISTED = 12
WHATIF_GROUPS_LISTED = 12


def _share(value) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def coordinator_load_section(load: list[dict], totals: dict | None = None) -> str:
    """Each partition's busiest minute of estimated assignor time (a chart), then the busiest partition-minutes
    with the groups behind them. ``load``: ``coordinator_load`` rows (the busiest ones suffice); ``totals``: the
    run's ``runs`` and ``partitions`` over all its rows (else counted from ``load``)."""
    if not load:
        return "<p>No assignor runs in this run.</p>"
    totals = totals or {"runs": sum(m.get("assignor_runs") or 0 for m in load),
                        "partitions": len({m["partition"] for m in load})}
    timed = [m for m in load if m.get("estimated_ms") is not None]
    intro = (f"<p>{_n(totals.get('runs'))} assignor run(s) on "
             f"{_n(totals.get('partitions'))} <code>__consumer_offsets</code> partition(s). A coordinator runs "
             "a server-side assignor on its one thread: while it runs, the other groups of that partition wait. Time "
             "per run: the job's re-run of it times Kafka's factor for that assignor (the range: its lowest and "
             "highest factor).</p>")
    if not timed:
        return intro + "<p>No run was timed (the assignor audit is off): no estimate.</p>"
    busiest: dict[int, dict] = {}
    for m in timed:
        if m["partition"] not in busiest or m["estimated_ms"] > busiest[m["partition"]]["estimated_ms"]:
            busiest[m["partition"]] = m
    partitions = sorted(busiest, key=lambda p: -busiest[p]["estimated_ms"])[:24]

    def top_ms(m):
        top = (m.get("top_groups") or [{}])[0]
        return top.get("estimated_ms") or 0.0

    chart = _bar_chart("Busiest minute of each partition: estimated assignor time (ms)",
                       [str(p) for p in partitions],
                       [("its top group", [round(top_ms(busiest[p]), 1) for p in partitions], SERIES_COLORS[1]),
                        ("other groups", [round(busiest[p]["estimated_ms"] - top_ms(busiest[p]), 1) for p in partitions],
                         SERIES_COLORS[0])], width=900, y_label="ms")
    rows = []
    for m in sorted(timed, key=lambda m: -m["estimated_ms"])[:BUSIEST_MINUTES_LISTED]:
        groups = ", ".join(f"{_e(g.get('group_id'))} {_share(g.get('share'))} ({_n(g.get('runs'))} run(s))"
                           for g in m.get("top_groups") or [])
        rows.append(f"<tr><td>{_n(m['partition'])}</td><td>{_e(_fmt_time(m['minute_start_time'])[:16])}</td>"
                    f"<td>{_n(m.get('assignor_runs'))}</td><td>{_fmt_ms(m['estimated_ms'])} "
                    f"({_fmt_ms(m.get('estimated_ms_low'))} - {_fmt_ms(m.get('estimated_ms_high'))})</td>"
                    f"<td>{_share(m.get('share_of_minute'))}</td><td>{_fmt_ms(m.get('max_run_ms'))}</td>"
                    f"<td>{_n(m.get('groups_on_partition'))}</td><td>{groups}</td></tr>")
    table = ("<table class=\"coordinator-load\"><tr><th>partition</th><th>minute (UTC)</th><th>runs</th>"
             "<th>estimated time (range)</th><th>share of the minute</th><th>longest run</th>"
             "<th>groups on the partition</th><th>top groups (share of the partition's time)</th></tr>"
             f"{''.join(rows)}</table>")
    return intro + chart + table


def interval_whatif_section(rows: list[dict]) -> str:
    """The cluster at each candidate interval and at every group's recommendation, then the groups with the most
    recorded assignor time: their recommended interval and what it changes."""
    groups = [r for r in rows if r.get("level") == "group"]
    if not groups:
        return "<p>No consumer, share or streams group bumped its epoch in this run.</p>"
    cluster = [r for r in rows if r.get("level") == "cluster"]
    intro = ("<p>Each group's recorded triggers (group-epoch bumps) replayed through KIP-1263's rule "
             "(<code>canComputeNextTargetAssignment</code>: compute on a heartbeat once the interval since the last "
             "assignment has passed) at other intervals. The recommendation: a group whose busiest minute of assignor "
             "time is within the budget at its own interval keeps it; a group over the budget gets the smallest "
             "interval bringing it within, adding at most a heartbeat interval to its p95 time to assignment.</p>")
    per_interval = sorted((r for r in cluster if r.get("candidate") == "candidate"), key=lambda r: r["interval_ms"])
    chart = _bar_chart("All groups at each interval: assignor runs",
                       [_fmt_ms(r["interval_ms"]) for r in per_interval],
                       [("runs", [r.get("runs") or 0 for r in per_interval], SERIES_COLORS[0])], y_label="runs")
    lines = []
    for r in per_interval + [r for r in cluster if r.get("candidate") == "recommended"]:
        label = "each at its recommendation" if r.get("candidate") == "recommended" else f"all at {_fmt_ms(r['interval_ms'])}"
        lines.append(f"<tr><td>{_e(label)}</td><td>{_n(r.get('groups'))}</td><td>{_n(r.get('recorded_runs'))}</td>"
                     f"<td>{_n(r.get('runs'))}</td><td>{_n(r.get('runs_saved'))}</td>"
                     f"<td>{_fmt_ms(r.get('coordinator_ms'))}</td><td>{_fmt_ms(r.get('time_to_assignment_p95_ms'))}</td>"
                     f"<td>{_fmt_ms(r.get('added_p95_ms'))}</td></tr>")
    cluster_table = ("<table class=\"whatif-cluster\"><tr><th>cluster</th><th>groups</th><th>recorded runs</th>"
                     "<th>runs</th><th>runs saved</th><th>assignor time</th><th>worst group's p95 to assignment</th>"
                     "<th>most p95 added</th></tr>" + "".join(lines) + "</table>")
    recorded = {r["group_id"]: r for r in groups if r.get("candidate") == "recorded"}
    chosen = {r["group_id"]: r for r in groups if r.get("recommended")}
    ranked = sorted(recorded.values(), key=lambda r: (-(r.get("coordinator_ms") or 0.0), -(r.get("runs") or 0),
                                                     str(r["group_id"])))[:WHATIF_GROUPS_LISTED]
    body = []
    for r in ranked:
        c = chosen.get(r["group_id"])
        verdict = ("-" if c is None else "keep: within budget at its interval" if c.get("candidate") == "recorded"
                   else "change: within budget then" if c.get("meets_budget")
                   else "over budget at every allowed interval")
        check = {True: "yes", False: "no", None: "-"}[r.get("replay_matches_log")]
        if r.get("replay_matches_log") is False and r.get("replay_note"):
            check = f"no: {r['replay_note']}"
        body.append(f"<tr><td>{_e(r['group_id'])}</td><td>{_e(r.get('group_type'))}</td>"
                    f"<td title=\"{_e(r.get('interval_source'))}\">{_fmt_ms(r.get('recorded_interval_ms'))}"
                    f"{'' if r.get('interval_known') else ' (assumed)'}</td><td>{check}</td>"
                    f"<td>{_n(r.get('runs'))} / {_share(r.get('peak_minute_share'))}</td>"
                    f"<td>{_fmt_ms(r.get('time_to_assignment_p95_ms'))}</td>"
                    f"<td>{'-' if c is None else _fmt_ms(c['interval_ms'])}</td>"
                    f"<td>{'-' if c is None else _n(c.get('runs'))} / {'-' if c is None else _share(c.get('peak_minute_share'))}</td>"
                    f"<td>{'-' if c is None else _fmt_ms(c.get('time_to_assignment_p95_ms'))}</td><td>{_e(verdict)}</td></tr>")
    group_table = ("<table class=\"whatif-groups\"><tr><th>group</th><th>type</th><th>recorded interval</th>"
                   "<th>replay = log</th><th>runs / busiest minute now</th><th>p95 to assignment now</th>"
                   "<th>recommended interval</th><th>runs / busiest minute then</th><th>p95 then</th><th></th></tr>"
                   + "".join(body) + "</table>")
    return intro + chart + cluster_table + group_table
