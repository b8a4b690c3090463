"""Group configs: what each group's coordinator was configured with, which ``__consumer_offsets`` does not hold.

Group configs (KIP-848 ``GroupConfig``: ``consumer.assignment.interval.ms``, ``consumer.session.timeout.ms``, the
``share.*`` and ``streams.*`` ones) live in the cluster's metadata, set by ``kafka-configs --entity-type groups``;
the brokers' defaults (``group.consumer.assignment.interval.ms``, ``group.consumer.session.timeout.ms``, ...) in
their configuration. The audit judges assignment batching against them, so it reads a snapshot:

* ``offsets-audit capture-group-configs --bootstrap-server HOST:PORT --output FILE`` writes one (JSON, or Parquet
  when FILE ends in ``.parquet``): DescribeConfigs of every group (``GROUP`` resources, found by ListGroups and,
  where the broker has it, ListConfigResources) and of every broker, restricted to ``group.*`` keys;
* the job reads it from ``broker.group_configs`` (or fetches it itself when ``source.kind`` is ``kafka``).

JSON layout::

    {"captured_at_ms": 1760000000000, "bootstrap_server": "kafka:9092", "complete": true,
     "broker": {"group.consumer.assignment.interval.ms": {"value": "1000", "source": "DEFAULT_CONFIG"}, ...},
     "groups": {"orders": {"consumer.assignment.interval.ms": {"value": "0", "source": "DYNAMIC_GROUP_CONFIG"}}}}

A value may also be written bare (``"orders": {"consumer.assignment.interval.ms": 0}``). ``complete`` says the
capture listed every group that had a dynamic config (ListConfigResources answered), so a group absent from
``groups`` runs on the broker default. ``refused`` (``{"<group>": "GROUP_AUTHORIZATION_FAILED"}``) names the groups
whose DescribeConfigs the cluster answered with an error (e.g. an ACL denying DESCRIBE_CONFIGS): their configs are
unknown, never the defaults, so the rules that depend on them do not judge those groups against defaults. Parquet
layout: one row per entry, columns ``resource_type`` (``broker``/``group``), ``resource_name``, ``config_name``,
``config_value``, ``config_source``, ``captured_at_ms``, ``complete``; a refused group is one row with no
``config_name``, ``config_source`` ``REFUSED`` and the error as ``config_value``.

``assignment_interval(broker, group_id, group_type)`` (``broker``: the run's ``BrokerSettings``) answers which interval a group ran with, whether that is
known, and where the answer came from (each finding quotes it).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from offsets_audit.errors import UserError
from offsets_audit.settings import BrokerSettings, Settings

#: Kafka's default ``group.<type>.assignment.interval.ms`` (``GroupCoordinatorConfig``, KIP-1263).
KAFKA_DEFAULT_ASSIGNMENT_INTERVAL_MS = 1000
GROUP_TYPES = ("consumer", "share", "streams")
#: Broker keys kept in a snapshot (``group.`` prefix): intervals, session timeouts, heartbeat intervals, ...
BROKER_PREFIX = "group."
DYNAMIC_GROUP_CONFIG = "DYNAMIC_GROUP_CONFIG"
#: ``config_source`` of a Parquet snapshot's row for a group whose configs the cluster refused.
REFUSED = "REFUSED"
#: A streams group's task assignor when its configs were refused and the brokers offer more than one: not known.
UNKNOWN_ASSIGNOR = "(unknown: the group's configs were refused)"


def group_interval_key(group_type: str) -> str:
    """``GroupConfig``: ``consumer.assignment.interval.ms`` and its share / streams siblings."""
    return f"{group_type}.assignment.interval.ms"


def broker_interval_key(group_type: str) -> str:
    """``GroupCoordinatorConfig``: ``group.consumer.assignment.interval.ms`` and siblings."""
    return f"group.{group_type}.assignment.interval.ms"


# ---------------------------------------------------------------------------------------------------------------
# the snapshot

def _entry(value: Any) -> dict:
    if isinstance(value, Mapping):
        return {"value": None if value.get("value") is None else str(value.get("value")),
                "source": value.get("source") or value.get("config_source")}
    return {"value": None if value is None else str(value), "source": None}


def parse_group_configs(obj: Any, where: str = "group configs") -> dict:
    """The normalised snapshot (plain data: it travels to the executors with the config)."""
    if not isinstance(obj, Mapping):
        raise UserError(f"{where}: expected a JSON object with 'broker' and 'groups'",
                        fix='write {"broker": {...}, "groups": {"<group>": {"consumer.assignment.interval.ms": 0}}}')
    groups = obj.get("groups") or {}
    broker = obj.get("broker") or {}
    if not isinstance(groups, Mapping) or not isinstance(broker, Mapping):
        raise UserError(f"{where}: 'groups' and 'broker' must be objects", fix="see docs/usage.md (group configs)")
    out_groups = {}
    for group_id, configs in groups.items():
        if not isinstance(configs, Mapping):
            raise UserError(f"{where}: group {group_id!r} must map config names to values",
                            fix='e.g. "orders": {"consumer.assignment.interval.ms": "0"}')
        out_groups[str(group_id)] = {str(k): _entry(v) for k, v in configs.items()}
    refused = obj.get("refused") or {}
    if not isinstance(refused, Mapping):
        raise UserError(f"{where}: 'refused' must map group ids to the error the cluster gave",
                        fix='e.g. "refused": {"orders": "GROUP_AUTHORIZATION_FAILED"}')
    return {"normalised": True, "where": obj.get("where") or where, "captured_at_ms": obj.get("captured_at_ms"),
            "bootstrap_server": obj.get("bootstrap_server"), "complete": bool(obj.get("complete", False)),
            "broker": {str(k): _entry(v) for k, v in broker.items()}, "groups": out_groups,
            "refused": {str(g): str(e) for g, e in refused.items()}}


def refused_groups(snapshot: Mapping | None) -> dict[str, str]:
    """The snapshot's groups whose configs the cluster refused, with its error (none without a snapshot)."""
    return dict((snapshot or {}).get("refused") or {})


def _from_rows(rows: list[Mapping], where: str) -> dict:
    snapshot: dict = {"broker": {}, "groups": {}, "complete": False, "captured_at_ms": None}
    for r in rows:
        kind = str(r.get("resource_type") or "").lower()
        entry = {"value": r.get("config_value"), "source": r.get("config_source")}
        if kind == "broker":
            snapshot["broker"][r["config_name"]] = entry
        elif kind == "group" and r.get("config_source") == REFUSED and r.get("config_name") is None:
            snapshot.setdefault("refused", {})[r["resource_name"]] = r.get("config_value")
        elif kind == "group":
            snapshot["groups"].setdefault(r["resource_name"], {})[r["config_name"]] = entry
        else:
            raise UserError(f"{where}: row with resource_type {r.get('resource_type')!r}",
                            fix="resource_type must be 'broker' or 'group'")
        snapshot["complete"] = snapshot["complete"] or bool(r.get("complete"))
        snapshot["captured_at_ms"] = r.get("captured_at_ms") or snapshot["captured_at_ms"]
    return parse_group_configs(snapshot, where)


def load_group_configs(path: str | Path) -> dict:
    """Read a snapshot written by ``capture-group-configs`` (JSON, or a Parquet file/folder)."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"group configs snapshot {p} not found",
                        fix="write one with `offsets-audit capture-group-configs --bootstrap-server HOST:PORT "
                            f"--output {p}` or fix broker.group_configs")
    if p.is_dir() or p.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(p).to_pylist()
        except Exception as exc:
            raise UserError(f"{p}: not a readable Parquet group-configs snapshot ({exc})",
                            fix="re-capture it with `offsets-audit capture-group-configs`") from None
        return _from_rows(rows, str(p))
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{p}: not a readable JSON group-configs snapshot ({exc})",
                        fix="re-capture it with `offsets-audit capture-group-configs`") from None
    return parse_group_configs(obj, str(p))


def write_group_configs(snapshot: Mapping, path: str | Path) -> Path:
    """Write a snapshot as JSON, or as Parquet rows when ``path`` ends in ``.parquet``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = [{"resource_type": "broker", "resource_name": "", "config_name": k, "config_value": e["value"],
                 "config_source": e["source"]} for k, e in sorted(snapshot["broker"].items())]
        rows += [{"resource_type": "group", "resource_name": g, "config_name": k, "config_value": e["value"],
                  "config_source": e["source"]}
                 for g, configs in sorted(snapshot["groups"].items()) for k, e in sorted(configs.items())]
        rows += [{"resource_type": "group", "resource_name": g, "config_name": None, "config_value": error,
                  "config_source": REFUSED} for g, error in sorted(refused_groups(snapshot).items())]
        for r in rows:
            r.update(captured_at_ms=snapshot.get("captured_at_ms"), complete=bool(snapshot.get("complete")))
        schema = pa.schema([("resource_type", pa.string()), ("resource_name", pa.string()),
                            ("config_name", pa.string()), ("config_value", pa.string()),
                            ("config_source", pa.string()), ("captured_at_ms", pa.int64()), ("complete", pa.bool_())])
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), p)
        return p
    body = {k: snapshot.get(k) for k in ("captured_at_ms", "bootstrap_server", "complete", "broker", "groups")}
    if refused_groups(snapshot):
        body["refused"] = refused_groups(snapshot)
    p.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return p


# ---------------------------------------------------------------------------------------------------------------
# the interval a group ran with

@dataclass(frozen=True)
class IntervalBasis:
    """The assignment interval a group is judged against: ``known`` is false when a group config may override
    ``interval_ms`` unseen (no snapshot), and ``source`` says where the value came from."""

    interval_ms: int | None
    known: bool
    source: str


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(str(value).strip())
    except ValueError:
        return None


def loaded_group_configs(broker: BrokerSettings) -> Mapping | None:
    """``broker.group_configs``: a loaded snapshot, or a path (read and cached on first use)."""
    value = broker.group_configs
    if value is None or (isinstance(value, Mapping) and value.get("normalised")):
        return value
    if isinstance(value, Mapping):  # written inline (tests, notebooks): normalise it
        return parse_group_configs(value, "broker.group_configs in the config")
    return _load_cached(str(value))


_CACHE: dict[str, dict] = {}


def _load_cached(path: str) -> dict:
    if path not in _CACHE:
        _CACHE[path] = load_group_configs(path)
    return _CACHE[path]


def assignment_interval(broker: BrokerSettings, group_id: str | None,
                        group_type: str | None) -> IntervalBasis | None:
    """``GroupConfigManager``'s answer for one group's ``<type>.assignment.interval.ms``, as far as it is known:

    1. ``broker.group_overrides.<group>.assignment_interval_ms`` in the audit's config (not -1): known; a group
       absent from it is known too when ``broker.group_overrides_complete`` says the list is complete;
    2. the snapshot's group config for the group: known;
    3. a complete snapshot without an entry for the group: the broker default (snapshot, else config): known;
    4. otherwise the broker default (``broker.<type>_assignment_interval_ms``, else Kafka's 1000 ms), which a
       group config may have overridden unseen: not known.
    """
    if group_type not in GROUP_TYPES:
        return None
    override = _int((broker.group_overrides.get(group_id or "") or {}).get("assignment_interval_ms"))
    if override is not None and override != -1:
        return IntervalBasis(override, True, f"broker.group_overrides.{group_id}.assignment_interval_ms in the config")
    snapshot = loaded_group_configs(broker)
    configured = broker.assignment_interval_ms(group_type)
    if snapshot is None and broker.group_overrides_complete:
        value = configured if configured is not None else KAFKA_DEFAULT_ASSIGNMENT_INTERVAL_MS
        return IntervalBasis(value, True, f"broker.{group_type}_assignment_interval_ms={value} in the config "
                                          "(broker.group_overrides_complete: the group has no override)")
    if snapshot is not None:
        where = snapshot.get("where") or "the group configs snapshot"
        entry = (snapshot["groups"].get(group_id) or {}).get(group_interval_key(group_type)) or {}
        group_value = _int(entry["value"]) if entry else None
        if group_value is not None:
            kind = "broker default reported for the group" if entry.get("source") not in (None, DYNAMIC_GROUP_CONFIG) \
                else "group config"
            return IntervalBasis(group_value, True, f"{kind} {group_interval_key(group_type)}={group_value} in {where}")
        broker_entry = snapshot["broker"].get(broker_interval_key(group_type))
        default = _int(broker_entry["value"]) if broker_entry else None
        default_source = f"broker config {broker_interval_key(group_type)}={default} in {where}"
        if default is None:
            default = configured if configured is not None else KAFKA_DEFAULT_ASSIGNMENT_INTERVAL_MS
            default_source = (f"broker.{group_type}_assignment_interval_ms={default} in the config"
                              if configured is not None else f"Kafka's default {default} ms")
        refused = refused_groups(snapshot).get(group_id or "")
        if refused is not None:
            return IntervalBasis(default, False, f"{default_source}; the cluster refused the group's configs "
                                                 f"({refused}), so a group config may override it")
        if snapshot.get("complete"):
            return IntervalBasis(default, True, f"{default_source} (no group config for the group in {where})")
        return IntervalBasis(default, False, f"{default_source}; {where} does not list every group's configs, "
                                             "so a group config may override it")
    if configured is not None:
        return IntervalBasis(configured, False, f"broker.{group_type}_assignment_interval_ms={configured} in the "
                                                "config; no group configs snapshot (broker.group_configs), so a "
                                                "group config may override it")
    return IntervalBasis(KAFKA_DEFAULT_ASSIGNMENT_INTERVAL_MS, False,
                         f"Kafka's default {KAFKA_DEFAULT_ASSIGNMENT_INTERVAL_MS} ms; no group configs snapshot "
                         "(broker.group_configs), so a group config may override it")


#: Kafka's built-in server-side assignors by class: ``group.<type>.assignors`` lists names or class names.
BUILTIN_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
    "org.apache.kafka.coordinator.group.assignor.SimpleAssignor": "simple",
    "org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor": "sticky",
}
#: ``group.streams.assignors``' default and the name a streams group's re-run takes when nothing says otherwise.
KAFKA_DEFAULT_STREAMS_ASSIGNOR = "sticky"
#: The streams group config naming the group's task assignor (Kafka 4.4).
STREAMS_ASSIGNOR_NAME = "streams.assignor.name"


def configured_assignors(value: Any) -> list[str]:
    """The names of a ``group.<type>.assignors`` value (``GroupCoordinatorConfig``: a list of assignor names or
    classes; a built-in class stands for its name, another class for itself)."""
    if value is None:
        return []
    items = value if isinstance(value, (list, tuple)) else str(value).strip("[]").split(",")
    names = [str(item).strip().strip("'\"") for item in items]
    return [BUILTIN_ASSIGNOR_CLASSES.get(name, name) for name in names if name]


def assignor_choice(broker: BrokerSettings) -> dict[str, Any]:
    """Which assignor each group's coordinator ran, as far as the group configs snapshot says (plain data for the
    executors): ``consumer``, the first of the brokers' ``group.consumer.assignors``
    (``GroupCoordinatorConfig.consumerGroupAssignors``, the default of a consumer group whose members name none),
    ``None`` when not known; ``streams``, per streams group id its assignor (``GroupMetadataManager
    .streamsGroupAssignor``: the group config ``streams.assignor.name`` if the brokers' ``group.streams.assignors``
    offer it, else their first), with ``""`` for the groups the snapshot does not name and ``UNKNOWN_ASSIGNOR`` for
    a group whose configs the cluster refused when the brokers may offer more than one."""
    snapshot = loaded_group_configs(broker) or {"broker": {}, "groups": {}}
    brokers = snapshot.get("broker") or {}

    def value(entry: Any) -> Any:
        return entry.get("value") if isinstance(entry, Mapping) else entry

    consumer = configured_assignors(value(brokers.get("group.consumer.assignors")))
    streams_offered = configured_assignors(value(brokers.get("group.streams.assignors")))
    streams_default = streams_offered[0] if streams_offered else KAFKA_DEFAULT_STREAMS_ASSIGNOR
    streams = {"": streams_default}
    for group_id, configs in (snapshot.get("groups") or {}).items():
        named = value((configs or {}).get(STREAMS_ASSIGNOR_NAME))
        if named is None or str(named).strip() == "":
            continue
        named = str(named).strip()
        # A name the brokers do not offer falls back to their default (when their list is known).
        streams[group_id] = named if not streams_offered or named in streams_offered else streams_default
    if len(streams_offered) != 1:
        # A refused group's streams.assignor.name is unknown; it matters unless the brokers offer one assignor only.
        for group_id in refused_groups(snapshot):
            streams.setdefault(group_id, UNKNOWN_ASSIGNOR)
    return {"consumer": consumer[0] if consumer else None, "streams": streams}


#: Kafka's defaults (``GroupCoordinatorConfig``) of the group settings the what-if reads besides the interval.
KAFKA_DEFAULT_HEARTBEAT_INTERVAL_MS = 5000
KAFKA_DEFAULT_STREAMS_INITIAL_REBALANCE_DELAY_MS = 3000


def group_setting_ms(broker: BrokerSettings, group_id: str | None, group_type: str, name: str,
                     kafka_default: int) -> tuple[int, str]:
    """``GroupConfigManager``'s answer for one group's ``<type>.<name>`` (e.g. ``heartbeat.interval.ms``,
    ``initial.rebalance.delay.ms``): the group's config in the snapshot, else the broker's
    ``group.<type>.<name>`` in the snapshot, else Kafka's default; with where the value came from."""
    snapshot = loaded_group_configs(broker)
    group_key, broker_key = f"{group_type}.{name}", f"group.{group_type}.{name}"
    if snapshot is not None:
        where = snapshot.get("where") or "the group configs snapshot"
        entry = (snapshot["groups"].get(group_id) or {}).get(group_key)
        value = _int(entry["value"]) if entry else None
        if value is not None:
            return value, f"group config {group_key}={value} in {where}"
        entry = snapshot["broker"].get(broker_key)
        value = _int(entry["value"]) if entry else None
        if value is not None:
            return value, f"broker config {broker_key}={value} in {where}"
    return kafka_default, f"Kafka's default {broker_key}={kafka_default}"


def with_group_configs(settings: Settings) -> Settings:
    """The settings with ``broker.group_configs`` loaded on the driver (plain data shipped to the executors), and,
    for a live-cluster source without a snapshot, fetched from that cluster. A fetch that fails leaves it unset
    (the rules then say the interval is not known) and is reported on stderr."""
    import sys

    value = settings.broker.group_configs
    snapshot: Mapping | None = None
    if isinstance(value, Mapping):
        snapshot = loaded_group_configs(settings.broker)
    elif value is not None:
        snapshot = load_group_configs(value)
    else:
        bootstrap = settings.source.options.get("kafka.bootstrap.servers")
        if settings.source.kind == "kafka" and bootstrap:
            try:
                snapshot = capture_group_configs(bootstrap)
            except Exception as exc:  # an admin API the cluster refuses must not stop the audit
                print(f"offsets-audit: could not fetch group configs from {bootstrap} ({type(exc).__name__}: "
                      f"{exc}); assignment intervals are judged as not known", file=sys.stderr)
    if snapshot is None:
        return settings
    if refused_groups(snapshot) and not snapshot.get("refusal_reported"):
        print(refusal_warning(snapshot), file=sys.stderr)
        snapshot = {**snapshot, "refusal_reported": True}   # the run's later loads of it say nothing more
    return settings.replace(broker={"group_configs": snapshot})


def refusal_warning(snapshot: Mapping) -> str:
    """The one line a run prints when the cluster refused some groups' configs: how many, Kafka's error, the fix."""
    refused = refused_groups(snapshot)
    errors = sorted(set(refused.values()))
    where = snapshot.get("bootstrap_server") or snapshot.get("where") or "the cluster"
    if all(error.endswith("AUTHORIZATION_FAILED") for error in errors):
        fix = ("grant this client's principal DESCRIBE_CONFIGS on those groups (kafka-acls --add --allow-principal "
               "User:<principal> --operation DescribeConfigs --group <group>), or give a snapshot captured with that "
               "right as broker.group_configs (--group-configs)")
    else:  # not a permission: a cluster without group configs (before Kafka 3.8), or another answer
        fix = "give a snapshot of the groups' configs as broker.group_configs (--group-configs)"
    return (f"offsets-audit: warning: {where} refused the configs of {len(refused)} group(s) "
            f"({', '.join(errors)}); their group configs are unknown, so the rules that depend on them (assignment "
            f"intervals, a streams group's task assignor) do not judge those groups against defaults. Fix: {fix}")


# ---------------------------------------------------------------------------------------------------------------
# capture from a live cluster

def describe_configs_request(resources: list[tuple[int, str]], version: int = 4):
    """A ``DescribeConfigsRequest`` (kafka-python's protocol layer, generated from Kafka's message JSON) for
    ``[(resource_type, name)]``: every key of every resource (``configuration_keys`` null), no synonyms."""
    from kafka.protocol.admin import DescribeConfigsRequest

    request_class = DescribeConfigsRequest[version]
    resource_class = request_class.DescribeConfigsResource
    return request_class(resources=[resource_class(resource_type=t, resource_name=n, configuration_keys=None)
                                    for t, n in resources], include_synonyms=False, include_documentation=False)


def configs_from_response(response) -> dict[tuple[int, str], dict[str, dict]]:
    """``{(resource_type, name): {config: {"value", "source"}}}`` of a ``DescribeConfigsResponse``; a resource
    answered with an error is left out."""
    from kafka.admin import ConfigSourceType

    out: dict = {}
    for result in response.results:
        if result.error_code:
            continue
        entries = {}
        for c in result.configs:
            try:
                source = ConfigSourceType(c.config_source).name
            except (ValueError, AttributeError):
                source = str(getattr(c, "config_source", None))
            entries[c.name] = {"value": c.value, "source": source}
        out[(result.resource_type, result.resource_name)] = entries
    return out


def capture_group_configs(bootstrap_server: str, *, groups: list[str] | tuple = (), timeout_ms: int = 30_000,
                          admin_client=None) -> dict:
    """Every group's configs and the brokers' ``group.*`` configs, as a snapshot (``parse_group_configs``).

    Groups are the ones ListGroups and ListConfigResources name, plus ``groups`` (e.g. groups without members on
    a broker older than 4.1, which only ListConfigResources would list)."""
    from kafka.admin import ConfigResourceType

    own = admin_client is None
    if own:
        from kafka.admin import KafkaAdminClient

        from offsets_audit.kafka_client import client_settings

        # The wait for a first broker is bounded by the same timeout.
        settings = {"bootstrap_servers": bootstrap_server, "request_timeout_ms": timeout_ms,
                    "client_id": "offsets-audit-capture-group-configs"}
        try:
            admin = KafkaAdminClient(**client_settings(KafkaAdminClient, settings, timeout_ms))
        except Exception as exc:  # NoBrokersAvailable and friends
            raise UserError(f"cannot reach Kafka at {bootstrap_server} ({type(exc).__name__}: {exc})",
                            fix="check --bootstrap-server HOST:PORT and that the cluster is up") from None
    else:
        admin = admin_client
    try:
        group_ids = {g.get("group_id") if isinstance(g, Mapping) else g[0] for g in admin.list_groups() or ()}
        complete = False
        try:  # KIP-1142 (Kafka 4.1): groups that have dynamic configs, members or not
            listed = admin.list_config_resources([ConfigResourceType.GROUP])
            group_ids |= set(listed.get("group") or ())
            complete = True
        except Exception:  # older brokers (and tansu) lack ListConfigResources
            complete = False
        named = {g for g in (*group_ids, *(groups or ())) if g is not None}
        resources = [(ConfigResourceType.GROUP.value, g) for g in sorted(named)]
        brokers = [b.get("broker_id", b.get("node_id")) for b in (admin.describe_cluster().get("brokers") or ())]
        group_configs: dict = {}
        refused: dict[str, str] = {}
        if resources:
            group_configs, refused = describe_groups(admin, resources)
        broker_configs: dict = {}
        for broker_id in brokers:
            try:
                answered = admin.describe_configs([_resource(ConfigResourceType.BROKER, str(broker_id))],
                                                  config_filter="all")
            except Exception:  # a broker that refuses DescribeConfigs: its defaults stay unknown
                continue
            for configs in (answered.get("broker") or {}).values():
                for k, v in configs.items():
                    if k.startswith(BROKER_PREFIX) and k not in broker_configs:
                        broker_configs[k] = {"value": v.get("value"), "source": v.get("config_source")}
    finally:
        if own:
            admin.close()
    return parse_group_configs({"captured_at_ms": int(time.time() * 1000), "bootstrap_server": bootstrap_server,
                                "complete": complete, "broker": broker_configs, "groups": group_configs,
                                "refused": refused},
                               where=f"group configs captured from {bootstrap_server}")


def describe_groups(admin, resources: list[tuple[int, str]]) -> tuple[dict, dict[str, str]]:
    """DescribeConfigs of the ``GROUP`` resources: ``(configs per group, error per refused group)``.

    The request is sent as is and each resource's error code read (``configs_from_response``): kafka-python's
    ``describe_configs`` drops them, so a group the cluster refused (an ACL denying DESCRIBE_CONFIGS) would read as
    a group without configs, i.e. one running on the defaults. An admin client without the protocol layer (a
    stand-in) is asked through ``describe_configs``."""
    manager = getattr(admin, "_manager", None)
    if manager is None:
        from kafka.admin import ConfigResourceType

        answered = admin.describe_configs([_resource(ConfigResourceType.GROUP, g) for _, g in resources],
                                          config_filter="all")
        return ({group_id: {k: {"value": v.get("value"), "source": v.get("config_source")} for k, v in c.items()}
                 for group_id, c in (answered.get("group") or {}).items()}, {})
    request = describe_configs_request(resources)

    async def send():
        return await manager.send(request)

    response = manager.run(send)
    answered = configs_from_response(response)
    configs = {name: entries for (_, name), entries in answered.items()}
    refused = {}
    for result in response.results:
        if result.error_code and result.resource_name not in configs:
            refused[result.resource_name] = _error_name(result.error_code)
    return configs, refused


def _error_name(code: int) -> str:
    """Kafka's name of an error code (``GROUP_AUTHORIZATION_FAILED``), as its tools print it."""
    from kafka import errors

    error = errors.for_code(code)
    name = getattr(error, "message", None)
    return str(name) if name and name != "UNKNOWN" else f"error code {code}"


def _resource(resource_type, name: str):
    from kafka.admin import ConfigResource

    return ConfigResource(resource_type, name)


# ---------------------------------------------------------------------------------------------------------------
# `offsets-audit capture-group-configs`

def add_arguments(parser) -> None:
    parser.add_argument("--bootstrap-server", required=True, help="HOST:PORT of a broker of the cluster")
    parser.add_argument("--output", required=True,
                        help="snapshot file to write: JSON, or Parquet when it ends in .parquet")
    parser.add_argument("--group", action="append", dest="groups", default=[],
                        help="also describe this group (repeatable): one that ListGroups does not list")
    parser.add_argument("--timeout-ms", type=int, default=30_000, help="admin request timeout")


def run(args) -> int:
    import sys

    snapshot = capture_group_configs(args.bootstrap_server, groups=args.groups, timeout_ms=args.timeout_ms)
    path = write_group_configs(snapshot, args.output)
    if refused_groups(snapshot):
        print(refusal_warning(snapshot), file=sys.stderr)
    overridden = sum(1 for configs in snapshot["groups"].values()
                     for e in configs.values() if e.get("source") == DYNAMIC_GROUP_CONFIG)
    print(f"captured configs of {len(snapshot['groups'])} groups ({overridden} group-level overrides) and "
          f"{len(snapshot['broker'])} broker group.* settings into {path}"
          + ("" if snapshot["complete"] else "; the cluster has no ListConfigResources, so groups without "
             "members were not listed"), file=sys.stderr)
    return 0
