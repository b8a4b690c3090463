"""Configuration: documented defaults in ``conf/defaults.yaml`` overridden by a user's YAML file.

Every key a user writes must exist in the defaults (except inside free-form maps such as
``source.options``), and values must have the default's type; a mistake is a ``UserError`` naming the
file, the key and the fix, e.g. ``conf/x.yaml: unknown key 'output.fromat'; did you mean 'output.format'?``.
"""

from __future__ import annotations

import copy
import datetime as _dt
import difflib
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from offsets_audit.errors import UserError

#: Maps whose keys are the user's own (options, overrides, rule ids): checked by their owners, not here.
FREE_FORM = {"source.options", "spark.conf", "broker.group_overrides", "rules"}

#: Allowed values of enumerated keys.
CHOICES = {
    "source.kind": ("segments", "parquet", "kafka"),
    "output.format": ("parquet", "delta"),
    "topic_metadata.source": ("none", "file", "kafka"),
    "check.fail_on": ("info", "warning", "error", "never"),
}


def load_defaults() -> dict:
    """``conf/defaults.yaml``, packaged as ``offsets_audit/defaults.yaml`` (readable from a wheel or a zip)."""
    return yaml.safe_load((resources.files("offsets_audit") / "defaults.yaml").read_text(encoding="utf-8"))


def _merge(base: dict, override: dict, where: str, origin: str) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        dotted = f"{where}.{key}" if where else str(key)
        if key not in base:
            hint = difflib.get_close_matches(str(key), [str(k) for k in base], n=1)
            fix = f"did you mean '{(where + '.' if where else '') + hint[0]}'?" if hint else \
                f"valid keys here: {', '.join(sorted(map(str, base)))}"
            raise UserError(f"{origin}: unknown key '{dotted}'", fix=fix)
        default = base[key]
        if dotted in FREE_FORM:
            if value is None:
                value = {}
            if not isinstance(value, dict):
                raise UserError(f"{origin}: '{dotted}' must be a mapping", fix="write it as 'key: value' lines")
            out[key] = {**(default or {}), **value}
        elif isinstance(default, dict):
            if not isinstance(value, dict):
                raise UserError(f"{origin}: '{dotted}' must be a mapping",
                                fix=f"give its keys: {', '.join(sorted(map(str, default)))}")
            out[key] = _merge(default, value, dotted, origin)
        else:
            out[key] = _check_type(dotted, default, value, origin)
    return out


def _check_type(dotted: str, default: Any, value: Any, origin: str) -> Any:
    if value is None or default is None:
        pass
    elif isinstance(default, bool):
        if not isinstance(value, bool):
            raise UserError(f"{origin}: '{dotted}' must be true or false, not {value!r}", fix="write true or false")
    elif isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{origin}: '{dotted}' must be a whole number, not {value!r}",
                            fix=f"e.g. {dotted.rsplit('.', 1)[-1]}: {default}")
    elif isinstance(default, list):
        if not isinstance(value, list):
            raise UserError(f"{origin}: '{dotted}' must be a list", fix=f"e.g. {dotted.rsplit('.', 1)[-1]}: [a, b]")
    elif isinstance(default, str) and not isinstance(value, str):
        value = str(value)
    if dotted in CHOICES and value not in CHOICES[dotted]:
        raise UserError(f"{origin}: '{dotted}' is {value!r}", fix=f"use one of: {', '.join(CHOICES[dotted])}")
    return value


def load_config(path: str | Path | None = None, overrides: dict | None = None) -> dict:
    """Defaults, then the file at ``path``, then ``overrides`` (a nested dict from command-line flags)."""
    config = load_defaults()
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise UserError(f"config file {path} not found", fix="pass --config with a path to a YAML file, e.g. conf/nightly.yaml")
        try:
            with open(path, encoding="utf-8") as fh:
                user = yaml.safe_load(fh) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            raise UserError(f"{path}: not valid YAML{where}", fix="check indentation and quoting there") from None
        if not isinstance(user, dict):
            raise UserError(f"{path}: the top level must be a mapping of keys", fix="see conf/defaults.yaml")
        config = _merge(config, user, "", str(path))
    if overrides:
        config = _merge(config, overrides, "", "command line")
    if not config.get("run_id"):
        config["run_id"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    return config


def redacted(config: dict) -> dict:
    """A copy safe to print or log: secrets in source options (passwords, keys, JAAS configs) masked."""
    out = copy.deepcopy(config)
    options = out.get("source", {}).get("options", {}) or {}
    for key in list(options):
        lowered = key.lower()
        if any(word in lowered for word in ("password", "jaas", "secret", "key", "token", "credential")):
            options[key] = "***"
    return out


def source_config(config: dict) -> dict:
    """The ``source`` section of a loaded config as ``offsets_audit.sources.read`` takes it (kind, path, options)."""
    source = config["source"]
    if source["kind"] in ("segments", "parquet") and not source.get("path"):
        raise UserError(f"source.kind is {source['kind']} but source.path is not set",
                        fix="set source.path in the config or pass --input PATH")
    if source["kind"] == "kafka" and "kafka.bootstrap.servers" not in (source.get("options") or {}):
        raise UserError("source.kind is kafka but no bootstrap servers are given",
                        fix="set source.options['kafka.bootstrap.servers'] or pass --bootstrap-server HOST:PORT")
    out = {"kind": source["kind"], **(source.get("options") or {})}
    if source.get("path"):
        out["path"] = source["path"]
    return out
