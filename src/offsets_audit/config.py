"""Configuration: documented defaults in ``conf/defaults.yaml`` overridden by a user's YAML file.

Everything is checked when the config is loaded, before any Spark work, and driven by the defaults file: a key
a user writes must exist there (rules included: every rule and threshold is listed), a value must have the
default's type, an enumerated value must be one the defaults file lists (a trailing ``# one of: a, b, c``
comment on the key's line, or ``CHOICES`` below), and a mapping whose default is empty (``{}``) holds the
user's own keys (``source.options``, ``spark.conf``, group overrides). Source options are checked per source
kind by ``offsets_audit.sources.check_options``. A mistake is a ``UserError`` naming the file, the key and the
fix, e.g. ``conf/x.yaml: unknown key 'output.fromat'; did you mean 'output.format'?``.
"""

from __future__ import annotations

import copy
import re
import datetime as _dt
import difflib
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from offsets_audit.errors import UserError
from offsets_audit.sources.options import source_config  # noqa: F401  (offsets_audit.config.source_config)

#: Maps whose keys are the user's own (options, overrides); any mapping whose default is ``{}`` is one too.
FREE_FORM = {"source.options", "spark.conf", "broker.group_overrides"}

#: Allowed values of enumerated keys (``*`` matches one key); ``# one of:`` comments in the defaults add more.
CHOICES = {
    "source.kind": ("segments", "parquet", "kafka"),
    "output.format": ("parquet", "delta"),
    "topic_metadata.source": ("none", "file", "kafka"),
    "check.fail_on": ("info", "warning", "error", "never"),
    "rules.*.severity": ("info", "warning", "error"),
    "rules.*.min_confidence": ("low", "medium", "high"),
}

_ONE_OF = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.\-]+):[^#]*#.*?\bone of:\s*(?P<values>[^#]+)$")
_KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.\-]+):")


def _defaults_text() -> str:
    return (resources.files("offsets_audit") / "defaults.yaml").read_text(encoding="utf-8")


def load_defaults() -> dict:
    """``conf/defaults.yaml``, packaged as ``offsets_audit/defaults.yaml`` (readable from a wheel or a zip)."""
    return yaml.safe_load(_defaults_text())


def documented_choices(text: str | None = None) -> dict[str, tuple[str, ...]]:
    """``{dotted key: values}`` from ``key: value  # ... one of: a, b, c`` lines of the defaults file."""
    text = _defaults_text() if text is None else text
    found: dict[str, tuple[str, ...]] = {}
    path: list[tuple[int, str]] = []
    for line in text.splitlines():
        match = _KEY_LINE.match(line)
        if not match or line.lstrip().startswith("#"):
            continue
        indent = len(match.group("indent"))
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, match.group("key")))
        one_of = _ONE_OF.match(line)
        if one_of:
            values = tuple(v.strip().strip("'\"") for v in re.split(r"[,|]", one_of.group("values")) if v.strip())
            found[".".join(key for _, key in path)] = values
    return found


def _choices_for(dotted: str) -> tuple | None:
    table = {**CHOICES, **_documented()}
    if dotted in table:
        return table[dotted]
    parts = dotted.split(".")
    for pattern, values in table.items():
        pattern_parts = pattern.split(".")
        if len(pattern_parts) == len(parts) and all(p in ("*", q) for p, q in zip(pattern_parts, parts)):
            return values
    return None


_DOCUMENTED: dict | None = None


def _documented() -> dict:
    global _DOCUMENTED
    if _DOCUMENTED is None:
        _DOCUMENTED = documented_choices()
    return _DOCUMENTED


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
        if dotted in FREE_FORM or (isinstance(default, dict) and not default):
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
    choices = _choices_for(dotted)
    if choices is not None and value is not None and value not in choices:
        hint = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        raise UserError(f"{origin}: '{dotted}' is {value!r}",
                        fix=(f"did you mean '{hint[0]}'? " if hint else "") + f"use one of: {', '.join(choices)}")
    return value


def validate(config: dict, origin: str = "config") -> None:
    """Checks that need more than one key or another module's knowledge, run before any Spark work: the source
    options for the chosen source kind, what-if assignor names, paths that a setting requires."""
    from offsets_audit.sources import SOURCE_OPTIONS, check_options

    source = config.get("source") or {}
    kind = source.get("kind")
    options = source.get("options") or {}
    if kind in SOURCE_OPTIONS:
        try:
            check_options(kind, {k: v for k, v in options.items() if v is not None})
        except UserError as exc:
            raise UserError(f"{origin}: {exc}") from None
    assignors = config.get("assignors") or {}
    if assignors.get("what_if"):
        from offsets_audit.assignors import known_assignors

        names = known_assignors()
        for name in assignors["what_if"]:
            if name not in names and ":" not in str(name):  # module:attribute plug-ins load later
                hint = difflib.get_close_matches(str(name), names, n=1)
                raise UserError(f"{origin}: 'assignors.what_if' names an unknown assignor {name!r}",
                                fix=(f"did you mean '{hint[0]}'? " if hint else "")
                                + f"known: {', '.join(names)}; own assignors go in assignors.custom")
    metadata = config.get("topic_metadata") or {}
    if metadata.get("source") == "file" and not metadata.get("path"):
        raise UserError(f"{origin}: 'topic_metadata.source' is file but 'topic_metadata.path' is not set",
                        fix="set topic_metadata.path (or pass --topic-metadata FILE)")


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
    validate(config, str(path) if path is not None else "config")
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
