"""The README is the front door: short (at most 15 KB), nothing dated or per-commit in it, every page and bench it
points to exists, and its Figures table has one row per benchmark, each linking to that bench's latest figures."""

from __future__ import annotations

import re

from script_modules import REPO

README = REPO / "README.md"
LIMIT_BYTES = 15 * 1024


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _section(title: str) -> str:
    text = _text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_the_readme_stays_within_15_kb():
    size = len(_text().encode("utf-8"))
    assert size <= LIMIT_BYTES, f"README.md is {size:,} bytes, over {LIMIT_BYTES:,}: move detail to docs/ pages"


def test_nothing_dated_or_per_commit_in_the_readme():
    text = _text()
    months = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
    assert not re.findall(r"\b20\d\d-\d\d-\d\d", text), "a date: dated figures go to bench/results"
    assert not re.findall(rf"\b\d{{1,2}} ({months})\b|\b({months}) \d{{1,2}}\b", text), "a date"
    assert not re.findall(r"`[0-9a-f]{7,12}`", text), "a commit id: per-commit figures go to bench/results"
    assert not re.findall(r"\bissue \d+", text, re.I), "an issue number"
    assert not re.findall(r"load (average )?~?\d", text), "a machine's load: figures' context goes to bench/results"


def test_the_quickstart_is_two_commands():
    block = re.search(r"```bash\n(.*?)```", _section("Quickstart"), re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]


def test_every_file_the_readme_names_exists():
    for path in sorted(set(re.findall(r"`((?:docs|bench|schemas|conf|notebooks|jobs|tests)/[\w./-]+)`|"
                                      r"\]\(((?:docs|bench)/[\w./-]+?)(?:#[\w-]+)?\)", _text()))):
        name = path[0] or path[1]
        assert (REPO / name.rstrip("/")).exists(), f"README.md names {name}, which does not exist"


def test_the_figures_table_has_one_row_per_bench_each_linking_to_its_latest_figures():
    rows = [line for line in _section("Figures").splitlines() if line.startswith("| [")]
    names = [re.match(r"\| \[(\w+)\]\(bench/README\.md#(\w+)\)", row) for row in rows]
    assert rows and all(names), "each Figures row starts with [bench](bench/README.md#bench)"
    bench_page = (REPO / "bench" / "README.md").read_text(encoding="utf-8")
    seen = [match.group(1) for match in names if match]
    assert len(seen) == len(set(seen)), "one row per bench"
    for match in names:
        assert match and match.group(1) == match.group(2)
        assert f"\n## {match.group(1)}\n" in bench_page, f"bench/README.md has no section {match.group(1)}"
