"""``bench/README.md`` from the benches themselves: what each measures and how to run it (its docstring), and its
latest figures (the newest line of ``bench/results/<bench>.jsonl``), so the page never drifts from either.

    .venv/bin/python bench/report.py            # rewrite bench/README.md
    .venv/bin/python bench/report.py --check    # exit 1 when bench/README.md is not what this would write

``results.record`` rewrites the page after every bench run; ``tests/test_bench_report.py`` checks it is current.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
README = BENCH / "README.md"
#: Scripts in bench/ that are not benches: the results writer, this report, and helpers the benches import.
NOT_BENCHES = {"results", "report", "kafka_assign"}
#: Figures that come from a command, not a script of bench/ (``make demo``).
OTHER = {"demo": ("`make demo`: simulates 30 groups for an hour (every group kind, three injected faults) as log "
                  "segments and runs the whole job on them with local Spark; the job's time from a bare clone.",
                  ["make demo"]),
         "kafka_versions": ("`make test-kafka-versions`: a real broker of each Kafka release of the matrix, every "
                            "scenario the release supports run by Kafka's own clients, judged by Kafka's tools "
                            "(kafka-dump-log, kafka-consumer-groups and the share and streams tools) and by the "
                            "job's check and run; one line per release (tests/kafka_matrix.py).",
                            ["make test-kafka-versions"])}
#: Benches whose every line is about one thing of several (a Kafka release): the page shows the latest line of each.
PER_KEY = {"kafka_versions": "release"}
#: How many figure lines a bench shows at most (the JSON line has them all).
MAX_LINES = 24
MAX_VALUE = 240

INTRO = """# Benchmarks

Each script here measures one part of the pipeline against a reference: Kafka's own code (its Java decoder, its
assignors' `assign()`), decoding alone (the floor of any job that reads every record) or another way of running
the same job. Every bench ends by appending one JSON line to `results/<bench>.jsonl` (`results.py`'s `record`):
the command, the git commit (`+dirty` for uncommitted code), the UTC date, the machine (cores, CPU, memory, load
average, Python and Java) and its figures. Figures from a shared machine are noisy: compare ratios measured in one
run, and say what else ran.

This page is generated (`bench/report.py`, run by every bench after it records): for each bench, what it
measures and how to run it, from its docstring, and its latest line. Older lines stay in the JSON files;
`results/archive.md` keeps the dated history measured before the JSON lines existed.
"""


def _docstring(script: Path) -> str:
    return ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""


def describe(script: Path) -> tuple[str, list[str]]:
    """(what the bench measures: its docstring's first paragraph, the command lines its docstring shows)."""
    text = _docstring(script)
    paragraphs = [" ".join(line.strip() for line in part.splitlines()) for part in text.split("\n\n") if part.strip()]
    what = paragraphs[0] if paragraphs else ""
    name = f"bench/{script.name}"
    commands = []
    for line in text.splitlines():
        stripped = line.strip().strip("`")
        if name in stripped and (stripped.startswith((".venv/bin/python", "python", "KAFKA_BOOTSTRAP="))
                                 or stripped.startswith("Run:")):
            command = stripped.removeprefix("Run:").strip().strip("`").split("``")[0].strip()
            if command not in commands:
                commands.append(command)
    return what, commands or [f".venv/bin/python {name}"]


def latest(bench: str) -> dict[str, Any] | None:
    path = RESULTS / f"{bench}.jsonl"
    if not path.is_file():
        return None
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return json.loads(lines[-1]) if lines else None


def latest_per_key(bench: str, key: str) -> list[dict[str, Any]]:
    """The newest line for each value of the figure ``key`` (newest value first, numbered versions by number)."""
    path = RESULTS / f"{bench}.jsonl"
    if not path.is_file():
        return []
    newest: dict[str, dict[str, Any]] = {}
    for text in path.read_text(encoding="utf-8").splitlines():
        if text.strip():
            line = json.loads(text)
            newest[str((line.get("figures") or {}).get(key))] = line

    def order(value: str) -> tuple[int, ...]:
        return tuple(int(p) if p.isdigit() else -1 for p in value.split("."))

    return [newest[value] for value in sorted(newest, key=order, reverse=True)]


def _number(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:g}"
    return str(value)


def _value(value: Any) -> str:
    """One figure as text: numbers with thousands separators, a list's items with " / ", a mapping's as "key value"."""
    if isinstance(value, list):
        text = " / ".join(_value(v) for v in value)
    elif isinstance(value, dict):
        text = ", ".join(f"{k} {_value(v)}" for k, v in value.items())
        text = f"({text})"
    else:
        text = _number(value)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def figure_lines(figures: dict[str, Any], prefix: str = "", depth: int = 0) -> list[str]:
    """``- name: value`` lines of a bench's figures; a nested mapping's keys are joined with dots (two levels)."""
    lines = []
    for key, value in figures.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and depth < 1 and value:
            lines += figure_lines(value, name + ".", depth + 1)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for index, item in enumerate(value):  # one line per run or size
                text = _value(item)
                text = text[1:-1] if text.endswith(")") else text[1:]
                lines.append(f"- `{name}[{index}]`: {text.replace('|', '/')}")
        else:
            lines.append(f"- `{name}`: {_value(value).replace('|', '/')}")
    return lines


def _machine(machine: dict[str, Any]) -> str:
    parts = [f"{machine['cores']} cores" if machine.get("cores") else "", machine.get("cpu") or ""]
    if machine.get("memory_gib"):
        parts.append(f"{machine['memory_gib']} GiB")
    if machine.get("load_average"):
        parts.append("load average " + " / ".join(_number(x) for x in machine["load_average"]))
    return ", ".join(p for p in parts if p)


def _latest_block(bench: str, line: dict[str, Any]) -> list[str]:
    where = f"{line.get('date', '?')}, commit `{line.get('commit', '?')}`, {_machine(line.get('machine') or {})}"
    out = [f"Latest ({where}): `{line.get('command', '')}`"]
    if line.get("archived_from"):
        out.append(f"(archived: {line['archived_from']})")
    if line.get("note"):
        out.append(f"({line['note']})")
    out.append("")
    lines = figure_lines(line.get("figures") or {})
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES] + [f"- … {len(lines) - MAX_LINES} more in `results/{bench}.jsonl`"]
    return out + lines + [""]


def section(bench: str, what: str, commands: list[str], line: dict[str, Any] | list[dict[str, Any]] | None,
            script: str | None) -> str:
    """A bench's part of the page; ``line`` is its latest line, or a list of them (one per key, ``PER_KEY``)."""
    out = [f"## {bench}", "", what + (f" ([{script}]({script}))" if script else ""), "", "```", *commands, "```", ""]
    lines = line if isinstance(line, list) else [] if line is None else [line]
    if not lines:
        out += ["Not run yet: no `results/" + bench + ".jsonl`.", ""]
        return "\n".join(out)
    for each in lines:
        out += _latest_block(bench, each)
    return "\n".join(out)


def benches() -> list[tuple[str, Path | None]]:
    """Every bench: the scripts of bench/ and the figures of other commands (``OTHER``), by name."""
    found: dict[str, Path | None] = {p.stem: p for p in sorted(BENCH.glob("*.py")) if p.stem not in NOT_BENCHES}
    for name in OTHER:
        found.setdefault(name, None)
    for path in sorted(RESULTS.glob("*.jsonl")):
        found.setdefault(path.stem, None)
    return sorted(found.items())


def render() -> str:
    parts = [INTRO]
    names = [name for name, _ in benches()]
    parts.append("Benches: " + ", ".join(f"[`{n}`](#{n})" for n in names) + ".\n")
    for name, script in benches():
        if script is not None:
            what, commands = describe(script)
        else:
            what, commands = OTHER.get(name, ("Figures recorded under this name by another command.", []))
        line = latest_per_key(name, PER_KEY[name]) if name in PER_KEY else latest(name)
        parts.append(section(name, what, commands, line, script.name if script else None))
    return "\n".join(parts).rstrip() + "\n"


def write() -> Path:
    README.write_text(render(), encoding="utf-8")
    return README


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when bench/README.md is not current")
    args = parser.parse_args(argv)
    if args.check:
        current = README.read_text(encoding="utf-8") if README.is_file() else ""
        if current != render():
            print("bench/README.md is not current: run .venv/bin/python bench/report.py", file=sys.stderr)
            return 1
        return 0
    print(f"wrote {write()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
