"""The run's settings as typed, immutable values: what every stage reads instead of a nested dict.

``offsets_audit.config.load_settings`` builds one ``Settings`` from ``conf/defaults.yaml``, a user's YAML file and
the command line's overrides, and checks it while building (a mistake is one ``UserError`` line naming the key
and the fix, before any Spark work). The stages then read attributes (``settings.output.path``,
``settings.rules["rebalance_storm"].threshold("max_per_hour")``) whose types say what is allowed, and a mode is
a ``Literal`` a type checker holds a caller to.

Every field has a default so that the pure cores can run without a config file (``Settings()``, as a unit test
calls the audit): those defaults mean "not configured" (no broker interval, Kafka version unknown, every rule at
its registry default), whereas ``load_settings()`` gives the documented defaults of ``conf/defaults.yaml``. The
job always runs on the latter.

The values are frozen dataclasses of plain data: they pickle into the executors' Python workers with the
closures that read them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

SourceKind = Literal["segments", "parquet", "kafka"]
SourceReader = Literal["auto", "spark", "kafka-python"]
OutputFormat = Literal["parquet", "delta"]
TopicMetadataSource = Literal["none", "file", "kafka"]
Severity = Literal["info", "warning", "error"]
FailOn = Literal["info", "warning", "error", "never"]
#: A rule threshold's value: a number of ms or per hour, a switch, or a named level (``min_confidence``).
Threshold = int | bool | str


@dataclass(frozen=True, kw_only=True)
class SourceSettings:
    """Where the log comes from (``source:``): the kind, its path and the reader options of that kind."""

    kind: SourceKind = "segments"
    path: str | None = None
    #: kafka: ``auto`` (Spark's kafka source where the session has it, else kafka-python), ``spark`` or
    #: ``kafka-python``
    reader: SourceReader = "auto"
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class OutputSettings:
    """Where the tables go (``output:``)."""

    path: str = "out"
    format: OutputFormat = "parquet"
    #: ``<catalog>.<schema>``: every table by name instead, ``path`` then holds the summary JSON and the report
    catalog: str = ""
    write_decoded: bool = False
    html_report: bool = True


@dataclass(frozen=True, kw_only=True)
class SparkSettings:
    """The session the job builds when none is active (``spark:``)."""

    master: str = "local[2]"
    conf: Mapping[str, Any] = field(default_factory=dict)

    def conf_text(self) -> dict[str, str]:
        """``conf`` as the text Spark's ``SparkConf.set`` takes."""
        return {str(k): str(v) for k, v in self.conf.items()}


@dataclass(frozen=True, kw_only=True)
class BrokerSettings:
    """What the brokers were configured with (``broker:``), which the log does not hold: the assignment
    intervals of KIP-1263 (``group.<type>.assignment.interval.ms``), per-group overrides, a captured group
    configs snapshot (a path, or once loaded on the driver the snapshot itself), and the brokers' Kafka version.
    None: not configured."""

    consumer_assignment_interval_ms: int | None = None
    share_assignment_interval_ms: int | None = None
    streams_assignment_interval_ms: int | None = None
    group_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    group_overrides_complete: bool = False
    group_configs: str | Mapping[str, Any] | None = None
    kafka_version: str | None = None

    def assignment_interval_ms(self, group_type: str) -> int | None:
        """``broker.<group_type>_assignment_interval_ms`` (consumer, share, streams); None when not configured."""
        value = getattr(self, f"{group_type}_assignment_interval_ms", None)
        return None if value is None else int(value)


@dataclass(frozen=True, kw_only=True)
class TopicMetadataSettings:
    """Where the topics' partition counts come from for the assignor re-runs (``topic_metadata:``)."""

    source: TopicMetadataSource = "none"
    path: str | None = None


@dataclass(frozen=True, kw_only=True)
class AssignorSettings:
    """The assignor re-runs (``assignors:``): the audit's own, the what-if assignors, a user's plug-in."""

    audit: bool = True
    what_if: tuple[str, ...] = ()
    custom: str | None = None

    def what_if_names(self) -> list[str]:
        """The what-if assignors to run, the user's plug-in (``module:attribute``) last."""
        return [*self.what_if, *([self.custom] if self.custom else [])]


@dataclass(frozen=True, kw_only=True)
class CoordinatorLoadSettings:
    """The coordinator load and the assignment-interval what-if (``coordinator_load:``): per-assignor
    replacements of the measured time conversion (a number, or ``{factor | scale, exponent, low, high}``), the
    what-if's switch and candidate intervals, and the recommendation's budget (a group's busiest minute of
    assignor time, percent of the minute) and latency limit (heartbeat intervals added to its p95)."""

    time_factors: Mapping[str, Any] = field(default_factory=dict)
    what_if: bool = True
    candidate_intervals_ms: tuple[int, ...] = (0, 1000, 3000, 5000, 15000)
    budget_pct: int = 5
    max_added_heartbeats: int = 1


@dataclass(frozen=True, kw_only=True)
class RuleSettings:
    """One audit rule's switch, severity and thresholds (``rules.<rule_id>:``)."""

    enabled: bool
    severity: Severity
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)

    def threshold(self, name: str) -> Any:
        """A threshold the rule's registry entry declares (a name it does not declare is a programming error)."""
        return self.thresholds[name]

    def as_dict(self) -> dict[str, Any]:
        """The YAML form: ``{enabled, severity, **thresholds}``."""
        return {"enabled": self.enabled, "severity": self.severity, **self.thresholds}


@dataclass(frozen=True, kw_only=True)
class CheckSettings:
    """The gate of ``offsets-audit check`` (``check:``)."""

    fail_on: FailOn = "error"
    junit_xml: str | None = None
    json_summary: str | None = None
    trust_after_gap: bool = False
    fail_on_quarantine: bool = False
    #: an input with no records stops the gate (exit 2): a run that audited nothing has no verdict
    fail_on_empty: bool = True


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Everything one run is configured with; the sections mirror ``conf/defaults.yaml``.

    ``rules`` maps every rule id to its ``RuleSettings`` (empty: every rule at its registry default, which the
    audit fills in). ``topic_ids`` (topic name -> id) is not a YAML key: a caller that knows the topics' ids
    (a simulated cluster, a topic snapshot) gives them for the commits whose values name none."""

    run_id: str = ""
    source: SourceSettings = field(default_factory=SourceSettings)
    output: OutputSettings = field(default_factory=OutputSettings)
    spark: SparkSettings = field(default_factory=SparkSettings)
    broker: BrokerSettings = field(default_factory=BrokerSettings)
    topic_metadata: TopicMetadataSettings = field(default_factory=TopicMetadataSettings)
    assignors: AssignorSettings = field(default_factory=AssignorSettings)
    coordinator_load: CoordinatorLoadSettings = field(default_factory=CoordinatorLoadSettings)
    rules: Mapping[str, RuleSettings] = field(default_factory=dict)
    check: CheckSettings = field(default_factory=CheckSettings)
    topic_ids: Mapping[str, str] = field(default_factory=dict)

    def replace(self, **changes: Any) -> Settings:
        """A copy with top-level fields changed; a section given as a mapping changes only the keys it names
        (``settings.replace(broker={"kafka_version": None})``)."""
        updates: dict[str, Any] = {}
        for name, value in changes.items():
            current = getattr(self, name)
            if dataclasses.is_dataclass(current) and isinstance(value, Mapping):
                updates[name] = dataclasses.replace(current, **value)  # type: ignore[type-var]
            else:
                updates[name] = value
        return dataclasses.replace(self, **updates)

    def as_dict(self) -> dict[str, Any]:
        """The YAML form of the settings (the shape of ``conf/defaults.yaml``), for printing and hashing;
        ``topic_ids`` are not a YAML key and are left out."""
        out: dict[str, Any] = {"run_id": self.run_id or None}
        for name in ("source", "output", "spark", "broker", "topic_metadata", "assignors", "coordinator_load"):
            section = getattr(self, name)
            out[name] = {f.name: _plain(getattr(section, f.name)) for f in dataclasses.fields(section)}
        out["rules"] = {rule_id: rule.as_dict() for rule_id, rule in self.rules.items()}
        out["check"] = {f.name: getattr(self.check, f.name) for f in dataclasses.fields(self.check)}
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
