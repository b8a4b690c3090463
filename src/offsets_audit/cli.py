"""The ``offsets-audit`` command line.

Each sub-command is a module of ``offsets_audit.commands`` (or ``job``, ``demo``) exposing
``add_arguments(parser)`` and ``run(args) -> int``; this module only dispatches, so commands never collide in one file.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from offsets_audit.errors import UserError

#: sub-command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "decode": ("offsets_audit.commands.decode", "decode raw __consumer_offsets records into typed tables"),
    "dump": ("offsets_audit.commands.dump", "copy __consumer_offsets from Kafka or log segments into a Parquet dump"),
    "capture-topics": ("offsets_audit.commands.capture_topics", "capture a topic-metadata snapshot from a live cluster"),
    "run": ("offsets_audit.job", "run the audit job: source -> decode -> replay -> assignor audit -> audit -> sinks"),
    "check": ("offsets_audit.commands.check", "CI gate: exit 1 when findings pass the configured severity thresholds"),
    "simulate": ("offsets_audit.commands.simulate", "write a realistic generated __consumer_offsets history"),
    "demo": ("offsets_audit.demo", "simulate a small history and run the nightly job on it with local Spark"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="offsets-audit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module_name)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                p.set_defaults(_missing=True)
                continue
            raise
        module.add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_missing", False):
        print(f"offsets-audit: error: the '{args.command}' command is not part of this build", file=sys.stderr)
        return 2
    module = importlib.import_module(args._module)
    try:
        return int(module.run(args) or 0)
    except UserError as exc:
        print(f"offsets-audit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("offsets-audit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
