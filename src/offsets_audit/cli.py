"""The ``offsets-audit`` command line.

Each sub-command is a module of ``offsets_audit.commands`` (or ``job``, ``demo``) exposing
``add_arguments(parser)`` and ``run(args) -> int``; this module only dispatches, so commands never collide in one file.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from offsets_audit.errors import UserError, environment_failure, unreadable_input

#: sub-command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "decode": ("offsets_audit.commands.decode", "decode raw __consumer_offsets records into typed tables"),
    "dump": ("offsets_audit.commands.dump", "copy __consumer_offsets from Kafka or log segments into a Parquet dump"),
    "capture-topics": ("offsets_audit.commands.capture_topics", "capture a topic-metadata snapshot from a live cluster"),
    "capture-group-configs": ("offsets_audit.group_configs",
                              "capture every group's configs and the brokers' group.* defaults from a live cluster"),
    "run": ("offsets_audit.job", "run the audit job: source -> decode -> replay -> assignor audit -> audit -> sinks"),
    "check": ("offsets_audit.commands.check", "CI gate: exit 1 when findings pass the configured severity thresholds"),
    "simulate": ("offsets_audit.commands.simulate", "write a realistic generated __consumer_offsets history"),
    "demo": ("offsets_audit.demo", "simulate a small history and run the nightly job on it with local Spark"),
}

#: Sub-commands that run Spark work: each takes ``--remote`` for a Spark Connect server.
SPARK_COMMANDS = ("decode", "dump", "run", "check", "demo")


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
        if name in SPARK_COMMANDS:
            p.add_argument("--remote", metavar="URL",
                           help="run on Spark Connect: sc://host:port/;token=... (Databricks serverless and shared "
                                "clusters, a Connect server), or local[N] for a local one; the same as "
                                "SPARK_REMOTE=URL")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_missing", False):
        print(f"offsets-audit: error: the '{args.command}' command is not part of this build", file=sys.stderr)
        return 2
    module = importlib.import_module(args._module)
    if getattr(args, "remote", None):
        os.environ["SPARK_REMOTE"] = args.remote  # PySpark's own convention: spark_session.get_spark reads it
    try:
        return int(module.run(args) or 0)
    except UserError as exc:
        print(f"offsets-audit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("offsets-audit: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - only input files Spark could not read and a full or read-only
        # disk become one line
        message = unreadable_input(exc) or environment_failure(exc)
        if message is None:
            raise
        print(f"offsets-audit: error: {message}", file=sys.stderr)
        return 2


def task_main(argv: list[str] | None = None) -> None:
    """``main`` for a Databricks ``python_wheel_task``, which calls its entry point and ignores what it returns:
    a non-zero status (a mistake in the settings or the input, exit 2) is raised as ``SystemExit`` so the task
    fails instead of passing."""
    status = main(argv)
    if status:
        raise SystemExit(status)


if __name__ == "__main__":
    sys.exit(main())
