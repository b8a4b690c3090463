"""Configuration: documented defaults in ``conf/defaults.yaml`` overridden by a user's YAML file, built once
into the typed ``offsets_audit.settings.Settings`` every stage reads (``load_settings``).

Everything is checked when the settings are built, before any Spark work, and driven by the defaults file: a key
a user writes must exist there (rules included: every rule and threshold is listed), a value must have the
default's type, an enumerated value must be one the defaults file lists (a trailing ``# one of: a, b, c``
comment on the key's line, or ``CHOICES`` below), and a mapping whose default is empty (``{}``) holds the
user's own keys (``source.options``, ``spark.conf``, group overrides). Source options are checked per source
kind by ``offsets_audit.sources.check_options``; a number where the defaults have one may not be negative, and
text where they have text must be text (``run_id: 20240101`` is an int in YAML: quote it). A mistake is a
``UserError`` naming the file, the key and the fix, e.g. ``conf/x.yaml: unknown key 'output.fromat'; did you mean
'output.format'?``.

Checks that need the whole section go in the section's builder below (``_broker``, ``_spark``, ...), which turn
the merged YAML mapping into the typed values.
"""

from __future__ import annotations

import copy
import re
import datetime as _dt
import difflib
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import yaml

from offsets_audit.errors import UserError
from offsets_audit.settings import (
    AssignorSettings,
    BrokerSettings,
    CheckSettings,
    CoordinatorLoadSettings,
    OutputSettings,
    Settings,
    SourceSettings,
    SparkSettings,
    TopicMetadataSettings,
)
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
        if default >= 0 and value < 0:
            raise UserError(f"{origin}: '{dotted}' is {value}; it cannot be negative", fix="give 0 or more")
    elif isinstance(default, list):
        if not isinstance(value, list):
            raise UserError(f"{origin}: '{dotted}' must be a list", fix=f"e.g. {dotted.rsplit('.', 1)[-1]}: [a, b]")
    elif isinstance(default, str) and not isinstance(value, str):
        key = dotted.rsplit(".", 1)[-1]
        raise UserError(f"{origin}: '{dotted}' must be text, not the {_yaml_type(value)} {_shown(value)}",
                        fix=f"quote it: {key}: \"{value}\"" if isinstance(value, (int, float, _dt.date))
                        else f"e.g. {key}: {default}")
    choices = _choices_for(dotted)
    if choices is not None and value is not None and value not in choices:
        hint = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        raise UserError(f"{origin}: '{dotted}' is {value!r}",
                        fix=(f"did you mean '{hint[0]}'? " if hint else "") + f"use one of: {', '.join(choices)}")
    return value


def _yaml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, _dt.date):
        return "date"
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, list):
        return "list"
    return type(value).__name__


def _shown(value: Any) -> str:
    """A YAML value as the user wrote it (a number or a date as written, anything else quoted)."""
    return str(value) if isinstance(value, (int, float, _dt.date)) else repr(value)


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


def load_settings(path: str | Path | None = None, overrides: dict | None = None) -> Settings:
    """The run's ``Settings``: the defaults, then the YAML file at ``path``, then ``overrides`` (a nested dict
    from command-line flags), checked and typed. ``run_id`` unset: the UTC date of the run."""
    origin = "config"
    config = load_defaults()
    if path is not None:
        path = Path(path)
        origin = str(path)
        if path.is_dir():
            raise UserError(f"--config {path} is a directory, not a YAML file",
                            fix=f"pass the file itself, e.g. --config {path / 'nightly.yaml'}")
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
        _check_run_id(user.get("run_id"), origin)
        config = _merge(config, user, "", origin)
    if overrides:
        _check_run_id(overrides.get("run_id"), "command line")
        config = _merge(config, overrides, "", "command line")
    validate(config, origin)
    if not config.get("run_id"):
        config["run_id"] = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    else:
        from offsets_audit.sinks.paths import check_run_id

        check_run_id(config["run_id"])  # it names the run's files: no separators, no leading dot
    return settings_of(config, origin)


def _check_run_id(value: Any, origin: str) -> None:
    """``run_id`` is text: YAML reads an unquoted run id of digits as a number and one shaped like a calendar day as a
    ``datetime.date``, so either is refused with the quoting that keeps it text."""
    if value is not None and not isinstance(value, str):
        raise UserError(f"{origin}: 'run_id' must be text, not the {_yaml_type(value)} {_shown(value)}",
                        fix=f"quote it: run_id: \"{value}\"")


def settings_of(config: Mapping[str, Any], origin: str = "config") -> Settings:
    """The typed ``Settings`` of a merged, checked config mapping (the shape of ``conf/defaults.yaml``)."""
    from offsets_audit.audit.rules.registry import rule_settings

    return Settings(
        run_id=str(config.get("run_id") or ""),
        source=_source(config["source"]),
        output=OutputSettings(**config["output"]),
        spark=_spark(config["spark"], origin),
        broker=_broker(config["broker"], origin),
        topic_metadata=TopicMetadataSettings(**config["topic_metadata"]),
        assignors=_assignors(config["assignors"]),
        coordinator_load=_coordinator_load(config["coordinator_load"], origin),
        rules=rule_settings(config.get("rules"), origin),
        check=CheckSettings(**config["check"]),
    )


def _source(section: Mapping[str, Any]) -> SourceSettings:
    return SourceSettings(kind=section["kind"], path=None if section.get("path") is None else str(section["path"]),
                          reader=section.get("reader") or "auto", options=dict(section.get("options") or {}))


#: The master URLs Spark's ``SparkContext`` accepts (``SparkMasterRegex`` and the cluster managers' prefixes).
_MASTER = re.compile(r"local(\[(\d+|\*)(,\s*\d+)?\])?|local-cluster\[\d+,\s*\d+,\s*\d+\]|yarn|"
                     r"(spark|k8s|mesos)://\S+")
#: Spark keys a config commonly sets, by the kind of value Spark parses for them (``ConfigBuilder``'s intConf,
#: bytesConf, booleanConf, doubleConf): a value Spark would refuse with a stack trace is one line here instead,
#: and a key a letter or two away from one of them is named.
_SPARK_INTS = frozenset({
    "spark.sql.shuffle.partitions", "spark.default.parallelism", "spark.executor.cores", "spark.executor.instances",
    "spark.driver.cores", "spark.task.cpus", "spark.task.maxFailures", "spark.dynamicAllocation.minExecutors",
    "spark.dynamicAllocation.maxExecutors", "spark.dynamicAllocation.initialExecutors",
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum", "spark.sql.files.maxRecordsPerFile",
    "spark.sql.execution.arrow.maxRecordsPerBatch", "spark.sql.streaming.numRecentProgressUpdates"})
_SPARK_SIZES = frozenset({
    "spark.driver.memory", "spark.executor.memory", "spark.driver.memoryOverhead", "spark.executor.memoryOverhead",
    "spark.driver.maxResultSize", "spark.executor.pyspark.memory", "spark.memory.offHeap.size",
    "spark.sql.files.maxPartitionBytes", "spark.sql.autoBroadcastJoinThreshold",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes", "spark.kryoserializer.buffer.max"})
_SPARK_BOOLEANS = frozenset({
    "spark.sql.adaptive.enabled", "spark.sql.adaptive.coalescePartitions.enabled", "spark.dynamicAllocation.enabled",
    "spark.ui.enabled", "spark.eventLog.enabled", "spark.speculation", "spark.memory.offHeap.enabled",
    "spark.sql.execution.arrow.pyspark.enabled", "spark.python.worker.reuse", "spark.shuffle.service.enabled",
    "spark.sql.ansi.enabled"})
_SPARK_FRACTIONS = frozenset({"spark.memory.fraction", "spark.memory.storageFraction"})
_SPARK_KEYS = _SPARK_INTS | _SPARK_SIZES | _SPARK_BOOLEANS | _SPARK_FRACTIONS | frozenset({
    "spark.master", "spark.app.name", "spark.jars", "spark.jars.packages", "spark.jars.repositories",
    "spark.sql.extensions", "spark.sql.session.timeZone", "spark.serializer", "spark.local.dir",
    "spark.sql.warehouse.dir", "spark.sql.catalogImplementation", "spark.sql.sources.partitionOverwriteMode",
    "spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions", "spark.driver.extraClassPath",
    "spark.executor.extraClassPath", "spark.submit.deployMode", "spark.eventLog.dir", "spark.remote"})
#: JavaUtils.byteStringAs: whole numbers with an optional unit (a leading minus only where -1 turns it off).
_SPARK_SIZE = re.compile(r"-?\d+\s*([kmgtp]i?b?|b)?", re.IGNORECASE)


def _spark(section: Mapping[str, Any], origin: str) -> SparkSettings:
    """``spark:``; ``conf`` holds Spark's own keys, passed to the session as they are. The master URL and the
    values of the keys Spark parses as numbers, sizes or booleans are checked here, before a session starts; a
    ``spark.*`` key close to a known one (a typo Spark would take silently) is refused naming it."""
    master = section["master"]
    if not _MASTER.fullmatch(str(master).strip()):
        raise UserError(f"{origin}: 'spark.master' is {master!r}, not a master URL Spark knows",
                        fix="give local[N], local[*], spark://host:port, yarn or k8s://https://host:port "
                            "(or pass --master)")
    conf = dict(section.get("conf") or {})
    for key, value in conf.items():
        _check_spark_value(str(key), value, origin)
    return SparkSettings(master=master, conf=conf)


def _check_spark_value(key: str, value: Any, origin: str) -> None:
    where = f"{origin}: 'spark.conf.{key}'"
    text = str(value).strip()
    if key in _SPARK_INTS:
        if isinstance(value, bool) or not re.fullmatch(r"\d+", text) or int(text) <= 0:
            raise UserError(f"{where} is {value!r}; Spark takes a whole number above 0 here", fix=f"e.g. {key}: 8")
    elif key in _SPARK_SIZES:
        if isinstance(value, bool) or not _SPARK_SIZE.fullmatch(text) or (
                text.startswith("-") and key != "spark.sql.autoBroadcastJoinThreshold"):
            raise UserError(f"{where} is {value!r}; Spark takes a size here (a whole number and a unit)",
                            fix=f"e.g. {key}: 2g (units b, k, m, g, t)")
    elif key in _SPARK_BOOLEANS:
        if text.lower() not in ("true", "false"):
            raise UserError(f"{where} is {value!r}; Spark takes true or false here", fix=f"e.g. {key}: true")
    elif key in _SPARK_FRACTIONS:
        try:
            fraction = float(text)
        except ValueError:
            fraction = -1.0
        if isinstance(value, bool) or not 0 <= fraction <= 1:
            raise UserError(f"{where} is {value!r}; Spark takes a fraction from 0 to 1 here", fix=f"e.g. {key}: 0.6")
    elif key.startswith("spark.") and key not in _SPARK_KEYS:
        near = difflib.get_close_matches(key, sorted(_SPARK_KEYS), n=1, cutoff=0.92)
        if near:
            raise UserError(f"{where}: Spark has no key {key!r}; did you mean {near[0]!r}?",
                            fix=f"spell it {near[0]}")


def _broker(section: Mapping[str, Any], origin: str) -> BrokerSettings:
    """``broker:``; each ``group_overrides`` entry is ``{assignment_interval_ms: N}`` with N >= -1
    (-1: the broker default, as Kafka's ``GroupConfig`` takes it)."""
    overrides = dict(section.get("group_overrides") or {})
    for group_id, override in overrides.items():
        where = f"broker.group_overrides.{group_id}"
        if not isinstance(override, Mapping):
            raise UserError(f"{origin}: '{where}' must be a mapping", fix=f"e.g. {group_id}: {{assignment_interval_ms: 0}}")
        interval = override.get("assignment_interval_ms")
        if interval is not None and (isinstance(interval, bool) or not isinstance(interval, int) or interval < -1):
            raise UserError(f"{origin}: '{where}.assignment_interval_ms' is {interval!r}",
                            fix="give a whole number of ms, 0 or more (-1: the broker default)")
    return BrokerSettings(
        consumer_assignment_interval_ms=section.get("consumer_assignment_interval_ms"),
        share_assignment_interval_ms=section.get("share_assignment_interval_ms"),
        streams_assignment_interval_ms=section.get("streams_assignment_interval_ms"),
        group_overrides=overrides, group_overrides_complete=bool(section.get("group_overrides_complete")),
        group_configs=section.get("group_configs"), kafka_version=section.get("kafka_version"))


def _assignors(section: Mapping[str, Any]) -> AssignorSettings:
    return AssignorSettings(audit=bool(section["audit"]), what_if=tuple(str(n) for n in section.get("what_if") or ()),
                            custom=section.get("custom"))


def _coordinator_load(section: Mapping[str, Any], origin: str) -> CoordinatorLoadSettings:
    """``coordinator_load:``; each ``time_factors`` entry is a positive number or a mapping of them
    (``factor`` or ``scale``, ``exponent``, ``low``, ``high``); candidate intervals are ms, 0 or more."""
    factors = dict(section.get("time_factors") or {})
    for name, value in factors.items():
        where = f"coordinator_load.time_factors.{name}"
        entries = value if isinstance(value, Mapping) else {"factor": value}
        unknown = set(entries) - {"factor", "scale", "exponent", "low", "high", "cases"}
        bad = [k for k, v in entries.items() if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0]
        if unknown or bad or not ({"factor", "scale"} & set(entries)):
            raise UserError(f"{origin}: '{where}' is {value!r}",
                            fix=f"give a positive number (e.g. {name}: 1.5) or {{scale: 0.5, exponent: 1.3, "
                                "low: 0.5, high: 2}}")
    candidates = section.get("candidate_intervals_ms") or []
    if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in candidates):
        raise UserError(f"{origin}: 'coordinator_load.candidate_intervals_ms' is {candidates!r}",
                        fix="give whole numbers of ms, 0 or more, e.g. [0, 1000, 3000, 5000, 15000]")
    return CoordinatorLoadSettings(time_factors=factors, what_if=bool(section["what_if"]),
                                   candidate_intervals_ms=tuple(int(c) for c in candidates),
                                   budget_pct=int(section["budget_pct"]),
                                   max_added_heartbeats=int(section["max_added_heartbeats"]))


def redacted(settings: Settings) -> dict:
    """The YAML form of ``settings``, safe to print or log: secrets in source options (passwords, keys, JAAS
    configs) masked."""
    out = settings.as_dict()
    options = out.get("source", {}).get("options", {}) or {}
    for key in list(options):
        lowered = key.lower()
        if any(word in lowered for word in ("password", "jaas", "secret", "key", "token", "credential")):
            options[key] = "***"
    return out
