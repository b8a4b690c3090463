"""Benchmark results live in ``bench/results``: every bench records its figures there once at its end, and
``bench/README.md`` is generated from the benches' docstrings and their latest JSON lines, never edited by hand."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from script_modules import REPO, load_script

BENCH = REPO / "bench"


@pytest.fixture(scope="module")
def report():
    return load_script("bench/report.py", "offsets_audit_bench_report")


@pytest.fixture(scope="module")
def results():
    return load_script("bench/results.py", "offsets_audit_bench_results")


def _bench_scripts() -> list[Path]:
    not_benches = load_script("bench/report.py", "offsets_audit_bench_report").NOT_BENCHES
    return sorted(p for p in BENCH.glob("*.py") if p.stem not in not_benches)


def test_bench_readme_is_what_the_report_script_writes(report):
    assert (BENCH / "README.md").read_text(encoding="utf-8") == report.render(), \
        "bench/README.md is stale: run .venv/bin/python bench/report.py"


@pytest.mark.parametrize("script", _bench_scripts(), ids=lambda p: p.name)
def test_every_bench_records_its_figures_once_at_its_end(script):
    tree = ast.parse(script.read_text(encoding="utf-8"))
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == "results"
               and any(alias.name == "record" for alias in node.names)]
    assert imports, f"{script.name} does not import results.record"
    local = imports[0].names[0].asname or "record"
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
             and node.func.id == local]
    assert calls, f"{script.name} never calls {local}(...)"
    assert isinstance(calls[0].args[0], ast.Constant) and calls[0].args[0].value, "the bench's name comes first"


def test_every_bench_has_its_section_and_a_docstring_that_says_what_it_measures(report):
    page = (BENCH / "README.md").read_text(encoding="utf-8")
    for script in _bench_scripts():
        what, commands = report.describe(script)
        assert what, f"{script.name} has no docstring"
        assert f"\n## {script.stem}\n" in page
        assert any(f"bench/{script.name}" in command for command in commands)


def test_a_recorded_line_carries_the_command_commit_date_machine_and_figures(results, tmp_path):
    path = results.record("demo_bench", {"records_per_s": 1234.5, "nested": {"a": 1}},
                          argv=[str(BENCH / "decode.py"), "--rows", "10"], results_dir=tmp_path)
    results.record("demo_bench", {"records_per_s": 99}, argv=["bench/decode.py"], results_dir=tmp_path)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [line["figures"]["records_per_s"] for line in lines] == [1234.5, 99]
    first = lines[0]
    assert first["bench"] == "demo_bench" and first["command"] == "bench/decode.py --rows 10"
    assert first["commit"] and first["date"].endswith("Z")
    assert first["machine"]["cores"] and "cpu" in first["machine"] and "load_average" in first["machine"]
    assert results.latest("demo_bench", results_dir=tmp_path)["figures"] == {"records_per_s": 99}


def test_every_results_file_holds_json_lines_the_report_can_show(report):
    for path in sorted((BENCH / "results").glob("*.jsonl")):
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = json.loads(text)
            assert {"bench", "date", "commit", "command", "machine", "figures"} <= set(line), f"{path.name}:{number}"
            assert line["bench"] == path.stem
            assert report.figure_lines(line["figures"])


def test_figures_read_as_a_person_reads_them(report):
    lines = report.figure_lines({"records_per_s": 190316, "ratio": 0.359, "range": [293251, 306091],
                                 "stages_s": {"read": 7.6}, "sizes": [{"records": 464486, "wall_s": 35.0}]})
    assert lines == ["- `records_per_s`: 190,316", "- `ratio`: 0.359", "- `range`: 293,251 / 306,091",
                     "- `stages_s.read`: 7.6", "- `sizes[0]`: records 464,486, wall_s 35"]


def test_a_per_release_bench_shows_the_latest_line_of_each_release(report, results, tmp_path, monkeypatch):
    for release, verdict in (("4.0.2", "failed"), ("4.4.0", "passed"), ("4.0.2", "passed"), ("3.9.1", "passed")):
        results.record("kafka_versions", {"release": release, "verdict": verdict}, argv=["make"],
                       results_dir=tmp_path)
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    lines = report.latest_per_key("kafka_versions", "release")
    assert [(line["figures"]["release"], line["figures"]["verdict"]) for line in lines] == \
        [("4.4.0", "passed"), ("4.0.2", "passed"), ("3.9.1", "passed")]
    text = report.section("kafka_versions", "what", ["make"], lines, None)
    assert text.count("Latest (") == 3 and "failed" not in text
