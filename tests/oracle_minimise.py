"""Shrink a Kafka-made history that shows a difference to the fewest steps that still show it.

Delta debugging over a scenario's steps: each round plays every candidate (the scenario without one chunk of its
steps) through Kafka's coordinator in one JVM, each on its own partition, and keeps the first candidate whose
differences (``oracle_diff``) still hold a line that ``keep`` accepts; chunks halve when no candidate does. The
result is what tests/oracle_regressions/ keeps (``save``)::

    python tests/oracle_minimise.py SCENARIOS.jsonl NAME 'rerun: ' OUT.json [--version V]
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kafka_jars  # noqa: E402
import oracle  # noqa: E402
import oracle_diff  # noqa: E402


def differences(scenarios: list[dict[str, Any]], version: str) -> dict[str, list[str]]:
    """Every difference of each scenario (by name), replay and audit, through the pure core."""
    from offsets_audit.replay import replay_records
    from offsets_audit.sources.segments import read_segment

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        oracle.write_histories(scenarios, out, version=version)
        topics = [t for s in scenarios for t in oracle.load_state(out, s["name"])["topics"]]
        (out / "topics.json").write_text(json.dumps({"topics": topics}))
        loaded = {s["partition"]: s for s in oracle.replay_folder(
            out, out / "topics.json", epochs=True, version=version,
            broker_configs={str(s["partition"]): s.get("broker") or {} for s in scenarios})}
        found: dict[str, list[str]] = {}
        for s in scenarios:
            records = list(read_segment(out / f"__consumer_offsets-{s['partition']}" / "00000000000000000000.log",
                                        s["partition"]))
            lines = oracle_diff.replay_differences(records, loaded[s["partition"]])
            lines += oracle_diff.audit_differences(replay_records(records), s, oracle.load_state(out, s["name"]),
                                                   version)
            found[s["name"]] = lines
        return found


def minimise(scenario: dict[str, Any], keep: Callable[[str], bool], *,
             version: str = kafka_jars.DEFAULT_KAFKA_VERSION, max_rounds: int = 40) -> dict[str, Any]:
    """The smallest scenario (fewest steps) found whose differences still hold a line ``keep`` accepts."""
    current = dict(scenario, partition=0)
    if not any(keep(line) for line in differences([current], version)[current["name"]]):
        raise ValueError(f"{scenario['name']} shows no such difference")
    chunk = max(1, len(current["steps"]) // 2)
    for _ in range(max_rounds):
        steps = current["steps"]
        candidates = []
        for start in range(0, len(steps), chunk):
            trial = dict(current, name=f"{scenario['name']}-{start}", partition=len(candidates),
                         steps=steps[:start] + steps[start + chunk:])
            candidates.append(trial)
        found = differences(candidates, version) if candidates else {}
        better = next((c for c in candidates if any(keep(line) for line in found[c["name"]])), None)
        if better is not None:
            current = dict(better, name=scenario["name"], partition=0)
            chunk = min(chunk, max(1, len(current["steps"]) // 2))
        elif chunk > 1:
            chunk //= 2
        else:
            break
    return current


def main(argv: list[str]) -> int:
    version = kafka_jars.DEFAULT_KAFKA_VERSION
    if "--version" in argv:
        at = argv.index("--version")
        version = argv[at + 1]
        del argv[at:at + 2]
    path, name, needle, out = argv
    scenario = next(json.loads(line) for line in Path(path).read_text().splitlines()
                    if line.strip() and json.loads(line)["name"] == name)
    small = minimise(scenario, lambda line: needle in line, version=version)
    Path(out).write_text(json.dumps(small, indent=1) + "\n")
    print(f"{name}: {len(scenario['steps'])} steps -> {len(small['steps'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
