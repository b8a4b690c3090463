"""``offsets-audit dump``: copy ``__consumer_offsets`` from Kafka or log segments into a Parquet dump.

A dump has SOURCE_SCHEMA's columns, partitioned by ``partition``; taken once, it can be audited many times
(``source: {kind: parquet, path: ...}``) without touching the cluster again.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from urllib.parse import urlparse

from offsets_audit.errors import UserError
from offsets_audit.sources.kafka import DEFAULT_TOPIC, is_secret


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
                        help="read a live cluster (kafka.bootstrap.servers)")
    source.add_argument("--segments", metavar="DIR", help="read broker log segments (a partition or log directory)")
    parser.add_argument("--output", required=True, metavar="PATH", help="Parquet directory to write")
    parser.add_argument("--overwrite", action="store_true", help="replace PATH if it exists")
    parser.add_argument("--topic", default=DEFAULT_TOPIC, help=f"topic to read (default {DEFAULT_TOPIC})")
    parser.add_argument("--starting-offsets", default="earliest",
                        help='earliest, or per-partition JSON like {"__consumer_offsets":{"0":23,"1":-2}}')
    parser.add_argument("--ending-offsets", default="latest",
                        help='latest, or per-partition JSON like {"__consumer_offsets":{"0":500,"1":-1}}')
    parser.add_argument("--isolation-level", default="read_committed", choices=["read_committed", "read_uncommitted"],
                        help="read_committed (default) leaves out aborted and still-open transactional records")
    parser.add_argument("--max-records-per-partition", type=int, metavar="N",
                        help="split partitions with more than N offsets into several Spark tasks")
    parser.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark Kafka source option, e.g. kafka.security.protocol=SASL_SSL (repeatable); "
                             "a value ${NAME} is read from the environment variable NAME")
    parser.add_argument("--command-config", metavar="FILE",
                        help="Kafka client properties (security.protocol, sasl.jaas.config, ssl.*, ...), as Kafka's "
                             "own tools take them: secrets stay out of the command line (and of ps)")
    parser.add_argument("--master", help="Spark master (default local[2] or $OFFSETS_AUDIT_MASTER)")
    parser.add_argument("--progress-interval", type=float, default=5.0, metavar="SECONDS",
                        help="seconds between progress lines on stderr")


def source_config(args: argparse.Namespace) -> dict:
    """The ``sources.read`` config the arguments describe."""
    if args.segments:
        return {"kind": "segments", "path": args.segments}
    config = {
        "kind": "kafka",
        "kafka.bootstrap.servers": args.bootstrap_server,
        "subscribe": args.topic,
        "startingOffsets": args.starting_offsets,
        "endingOffsets": args.ending_offsets,
        "kafka.isolation.level": args.isolation_level,
    }
    if args.max_records_per_partition:
        config["maxRecordsPerPartition"] = args.max_records_per_partition
    if getattr(args, "command_config", None):
        for key, value in client_properties(args.command_config).items():
            config[f"kafka.{key}"] = value
    for item in args.kafka_option:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            shown = f"{key}=***" if is_secret(key) else item
            raise UserError(f"--kafka-option {shown} is not KEY=VALUE", fix="write e.g. kafka.security.protocol=SSL")
        config[key.strip()] = from_environment(value, f"--kafka-option {key.strip()}")
    return config


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def from_environment(value: str, where: str) -> str:
    """``value`` with every ``${NAME}`` replaced by the environment variable NAME (a secret is then never on the
    command line); a variable that is not set is a one-line error naming it."""
    def variable(match):
        name = match.group(1)
        if name not in os.environ:
            raise UserError(f"{where} names the environment variable {name}, which is not set",
                            fix=f"export {name} before running, or give the value itself")
        return os.environ[name]

    return _VARIABLE.sub(variable, value)


def client_properties(path: str) -> dict[str, str]:
    """Kafka client properties from ``path`` (``key=value`` or ``key: value`` lines, ``#``/``!`` comments, a
    trailing backslash continuing a line), as Kafka's tools read ``--command-config``; ``${NAME}`` values come from
    the environment."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise UserError(f"--command-config {path} cannot be read ({exc.strerror})",
                        fix="pass a readable Kafka client properties file") from None
    properties: dict[str, str] = {}
    logical = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line.startswith(("#", "!"))):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", logical)
        if not match:
            raise UserError(f"--command-config {path}: line {number} is not key=value",
                            fix="write one property a line, e.g. security.protocol=SASL_SSL")
        key = match.group(1).removeprefix("kafka.")
        properties[key] = from_environment(match.group(2), f"--command-config {path} ({key})")
        logical = ""
    return properties


def _check_output(path: str, overwrite: bool) -> None:
    parsed = urlparse(path)
    if parsed.scheme not in ("", "file"):
        return
    local = path.removeprefix("file://")
    if os.path.exists(local) and os.listdir(local) and not overwrite:
        raise UserError(f"--output {path} already exists", fix="choose a new directory or add --overwrite")


def run(args: argparse.Namespace) -> int:
    from offsets_audit.sources import read
    from offsets_audit.sources.progress import SparkProgress
    from offsets_audit.spark_session import get_spark

    from offsets_audit.sources import preflight

    config = source_config(args)
    _check_output(args.output, args.overwrite)
    preflight(config)  # a wrong path, option or segment layout: one line before Spark starts
    spark = get_spark("offsets-audit dump", master=args.master)
    started = time.monotonic()
    df = read(spark, config)
    with SparkProgress(spark, "dump", interval_s=args.progress_interval):
        df.write.mode("overwrite" if args.overwrite else "error").partitionBy("partition").parquet(args.output)
    records = spark.read.parquet(args.output).count()
    elapsed = time.monotonic() - started
    origin = args.segments or f"{args.topic} at {args.bootstrap_server}"
    print(f"wrote {records:,} records from {origin} to {args.output} in {elapsed:.1f}s "
          f"({records / elapsed if elapsed > 0 else 0:,.0f} records/s)", file=sys.stdout)
    return 0
