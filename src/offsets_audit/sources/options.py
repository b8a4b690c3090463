"""Option handling shared by the sources: the Spark option text of a config value, and checked options."""

from __future__ import annotations

import json
import os
from urllib.parse import urlparse

from offsets_audit.errors import UserError
from offsets_audit.settings import Settings


def option_text(value) -> str:
    """An option value as Spark wants it: JSON for mappings and lists (offsets from YAML), true/false for bools."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value)
    return str(value)


def text_options(options: dict) -> dict:
    """Every option of ``options`` as Spark option text (``option_text``)."""
    return {str(k): option_text(v) for k, v in options.items()}


def required_path(source_config, kind: str) -> str:
    """The source config's ``path``; a local path must exist (a person's typo fails here, before Spark runs)."""
    path = source_config.get("path")
    if not path:
        raise UserError(f"the {kind} source has no path", fix=f"set path to the {kind} directory to read")
    path = str(path)
    local = urlparse(path).scheme in ("", "file")
    if local and not os.path.exists(path.removeprefix("file://")):
        raise UserError(f"{kind} source path {path} does not exist", fix="check the path key of the source config")
    return path


def int_option(options: dict, name: str, default, minimum: int):
    """Option ``name`` of the kafka-segments source as an int >= ``minimum`` (``default`` when absent)."""
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise UserError(f"kafka-segments option {name}={raw!r} is not an integer",
                        fix=f"pass a whole number >= {minimum}") from None
    if value < minimum:
        raise UserError(f"kafka-segments option {name}={value} is below {minimum}", fix=f"pass a value >= {minimum}")
    return value


def source_config(settings: Settings) -> dict:
    """The run's ``source`` settings as ``offsets_audit.sources.read`` takes them (kind, path, options)."""
    source = settings.source
    if source.kind in ("segments", "parquet") and not source.path:
        raise UserError(f"source.kind is {source.kind} but source.path is not set",
                        fix="set source.path in the config or pass --input PATH")
    if source.kind == "kafka" and "kafka.bootstrap.servers" not in source.options:
        raise UserError("source.kind is kafka but no bootstrap servers are given",
                        fix="set source.options['kafka.bootstrap.servers'] or pass --bootstrap-server HOST:PORT")
    out = {"kind": source.kind, **source.options}
    if source.reader != "auto":
        out["reader"] = source.reader
    if source.path:
        out["path"] = source.path
    return out
