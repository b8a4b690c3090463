"""Golden assignor vectors remade by Kafka's own assignors through the oracle, for any Kafka version.

``tests/golden/assignors/<assignor>.jsonl.xz`` holds assignor inputs and what Kafka's server-side assignor
(``UniformAssignor``, ``RangeAssignor``, ``SimpleAssignor``, the streams ``StickyTaskAssignor``) answered. This
command runs every input through the assignors of the Kafka version given (``tests/oracle.py assign``) and compares
the answers with the stored ones; ``--write`` stores the new answers (and Kafka's member iteration order) in place,
so a new Kafka release means running this command and reviewing the diff::

    python tests/golden_regen.py [--version 4.4.0] [--write] [ASSIGNOR ...]    # default: all four files

Each stored line keeps its input, case id and step; only ``expected`` and ``java_member_iteration_order`` are
replaced, and ``java_nanos`` (a timing) is left as it was so that a rerun on the same version changes nothing.
Exit status 1 when an answer differs (and ``--write`` was not given).
"""
from __future__ import annotations

import argparse
import json
import lzma
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kafka_jars  # noqa: E402
import oracle  # noqa: E402

ASSIGNORS = Path(__file__).resolve().parent / "golden" / "assignors"
FILES = ("uniform", "range", "simple", "streams_sticky")


def _read(name: str) -> list[dict]:
    with lzma.open(ASSIGNORS / f"{name}.jsonl.xz", "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def regenerate(name: str, version: str, scenarios: Sequence[str] | None = None) -> tuple[list[dict], list[str]]:
    """The stored cases of ``name`` (or of its ``scenarios`` only) with Kafka ``version``'s answers, and the case
    ids whose answer changed. A scenario's steps run in a chain: each step's members whose current assignment is
    the previous step's answer meet it as the coordinator would have kept it (tests/oracle.py ``chain``)."""
    cases = [c for c in _read(name) if scenarios is None or c["case_id"].rsplit("-step", 1)[0] in scenarios]
    answers = oracle.run_assignors(
        ({"assignor": c["assignor"], "case_id": c["case_id"], "input": c["input"]} for c in cases),
        version=version, chain=True)
    changed, out = [], []
    for case, answer in zip(cases, answers, strict=True):
        expected = {"error": answer.get("error"), "members": answer.get("members")}
        if expected != case["expected"]:
            changed.append(case["case_id"])
        out.append({**case, "expected": expected,
                    "java_member_iteration_order": answer.get("java_member_iteration_order")})
    return out, changed


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignors", nargs="*", help=f"any of {', '.join(FILES)} (default: all)")
    parser.add_argument("--version", default=kafka_jars.DEFAULT_KAFKA_VERSION)
    parser.add_argument("--write", action="store_true", help="store Kafka's answers in tests/golden/assignors")
    args = parser.parse_args(argv)
    unknown = [name for name in args.assignors if name not in FILES]
    if unknown:
        parser.error(f"no golden assignor file {unknown[0]!r}: choose from {', '.join(FILES)}")
    differ = False
    for name in args.assignors or FILES:
        cases, changed = regenerate(name, args.version)
        print(f"{name}: {len(cases)} cases on Kafka {args.version}, {len(changed)} answer(s) differ"
              + (": " + ", ".join(changed[:20]) if changed else ""))
        if args.write and changed:
            with lzma.open(ASSIGNORS / f"{name}.jsonl.xz", "wt", encoding="utf-8") as handle:
                for case in cases:
                    handle.write(json.dumps(case, separators=(",", ":")) + "\n")
        differ |= bool(changed)
    return 1 if differ and not args.write else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
